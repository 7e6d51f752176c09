"""Tokens and workspaces (DESIGN.md §7, as changed in docs/contract-notes.md).

A token opens exactly one workspace.  It arrives only in a header the client
sets itself: ``Authorization: Bearer`` (REST, WebSocket clients) or, from the
browser's WebSocket (which cannot set headers), the subprotocol
``turnvisor.bearer.<base64url of the token>`` offered next to ``turnvisor``
(the one the server selects: the token is never echoed back).

No cookie is a credential, and neither is ``?token=``: a browser attaches
cookies to its requests to every port of the host, and a URL travels in an
``<img>`` or a link, so both would hand the token to whatever page or agent
output can make the browser send a request.  The page itself is a shell with
no private data; its script takes a ``?token=`` from its own address (a
top-level visit), keeps it in the origin's ``localStorage`` and sends it as
above.  Tokens are compared in constant time and never logged.

``Tokens.carried_by(head)`` reads a raw request head for the listener, before
the app sees it (``web.connpool``: a connection whose request carries the
right token is never refused or evicted for a connection bound).  There the
page's login address counts too (``GET /?token=…``, the top-level visit that
hands the page its token): it authorizes nothing, it only says the request
comes from someone who holds the token.
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from supervisor.config import MIN_TOKEN_CHARS, ConfigError

from .credentials import (
    bearer_subprotocol,
    head_carries,
    head_tokens,
    subprotocol_token,
)

__all__ = [
    "SUBPROTOCOL",
    "Tokens",
    "bearer_subprotocol",
    "cross_site_refusal",
    "head_carries",
    "head_tokens",
    "load_default_token",
    "origin_allowed",
    "subprotocol_token",
]

#: The WebSocket subprotocol the server selects.
SUBPROTOCOL = "turnvisor"


def load_default_token(data_dir: Path) -> str:
    """``TURNVISOR_TOKEN``, else the token stored in the data dir, else a new
    one; ConfigError for a token too short to be a secret."""
    env = os.environ.get("TURNVISOR_TOKEN")
    if env is not None:
        if len(env) < MIN_TOKEN_CHARS:
            raise ConfigError(f"TURNVISOR_TOKEN must be at least {MIN_TOKEN_CHARS} characters "
                              f"(it has {len(env)})")
        return env
    path = data_dir / "token"
    if path.exists():
        token = path.read_text().strip()
        if token:
            if len(token) < MIN_TOKEN_CHARS:
                raise ConfigError(f"{path}: the token must be at least {MIN_TOKEN_CHARS} "
                                  "characters (delete the file for a new one)")
            return token
    token = secrets.token_urlsafe(32)
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


class Tokens:
    def __init__(self, by_workspace: Mapping[str, str]) -> None:
        short = [ws for ws, t in by_workspace.items() if len(t) < MIN_TOKEN_CHARS]
        if short:
            raise ValueError(f"tokens under {MIN_TOKEN_CHARS} characters: {', '.join(short)}")
        self._pairs = [(t.encode(), ws) for ws, t in by_workspace.items()]

    def workspace(self, token: str | None) -> str | None:
        if not token:
            return None
        given = token.encode()
        found = None
        for known, ws in self._pairs:
            # No early exit: every token is compared, in constant time.
            if hmac.compare_digest(known, given):
                found = ws
        return found

    def carried_by(self, head: bytes) -> bool:
        """Whether a raw request head carries one of the tokens (``head_tokens``)."""
        found = False
        for token in head_tokens(head):
            # Every candidate is compared (no early exit), as in ``workspace``.
            found = (self.workspace(token) is not None) or found
        return found

    def resolve(self, authorization: str | None, subprotocols: Iterable[str] = ()) -> str | None:
        """The workspace of the request's token: ``Authorization: Bearer``,
        else (a WebSocket handshake) the bearer subprotocol."""
        auth = authorization or ""
        if auth[:7].lower() == "bearer ":
            return self.workspace(auth[7:].strip())
        return self.workspace(subprotocol_token(subprotocols))


def origin_allowed(origin: str | None, host: str | None) -> bool:
    """A browser WebSocket must come from our own pages; non-browser clients send no Origin."""
    if origin is None:
        return True
    if origin == "null" or host is None:
        return False
    return urlsplit(origin).netloc.lower() == host.lower()


#: Methods that change nothing (the REST API keeps to that).
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def cross_site_refusal(*, method: str, path: str, authorization: str | None,
                       origin: str | None, sec_fetch_site: str | None,
                       content_type: str | None, host: str | None) -> str | None:
    """Why a state-changing request under /api/ is refused as possibly
    cross-site, or None to let it through (authentication comes after).

    Since no cookie authenticates anything, every such request without
    ``Authorization: Bearer`` fails authentication anyway; this stays as a
    second fence (an endpoint added later that forgot authentication still
    refuses a cross-site write).  It passes only a request from our own origin
    — ``Origin`` naming this Host (``null`` is refused), or, when a browser
    sent no Origin, ``Sec-Fetch-Site: same-origin`` — with a JSON body type.
    """
    if not path.startswith("/api/") or method.upper() in SAFE_METHODS:
        return None
    if (authorization or "")[:7].lower() == "bearer ":
        return None
    if origin is not None:
        if origin == "null" or not origin_allowed(origin, host):
            return "cross-origin request refused (Origin is not this server)"
    elif sec_fetch_site is None:
        return ("request refused: no Origin or Sec-Fetch-Site shows it comes from this "
                "server's pages (API clients: use Authorization: Bearer)")
    if sec_fetch_site is not None and sec_fetch_site.lower() != "same-origin":
        return "cross-site request refused (Sec-Fetch-Site)"
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        return "request refused: a state-changing request needs Content-Type: application/json"
    return None
