"""Tokens, workspaces and the auth cookie (DESIGN.md §7).

A token opens exactly one workspace.  It arrives as ``Authorization: Bearer``,
as the auth cookie, or once as ``?token=`` on a page (which sets the cookie,
HttpOnly and SameSite=Strict, and redirects to the same URL without it so the
token does not stay in the address bar or history).  Tokens are compared in
constant time and never logged: the access log is off and no error message
repeats a token.

A cookie rides along with every request the browser makes to this host, from
any page: ``SameSite=Strict`` does not stop a page on another port of the same
host (a dev server an agent started), which is the same *site*.  So a request
that changes state and is authenticated by the cookie must show that it comes
from our own pages (``cross_site_refusal``); bearer-token clients send no
cookie-borne credentials and are not concerned.
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["COOKIE", "Tokens", "cross_site_refusal", "load_default_token", "origin_allowed"]

COOKIE = "turnvisor_token"


def load_default_token(data_dir: Path) -> str:
    """``TURNVISOR_TOKEN``, else the token stored in the data dir, else a new one."""
    env = os.environ.get("TURNVISOR_TOKEN")
    if env:
        return env
    path = data_dir / "token"
    if path.exists():
        token = path.read_text().strip()
        if token:
            return token
    token = secrets.token_urlsafe(32)
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


class Tokens:
    def __init__(self, by_workspace: Mapping[str, str]) -> None:
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

    def resolve(self, authorization: str | None, cookie: str | None,
                query_token: str | None = None) -> str | None:
        """The workspace of the request's token: the Authorization header wins,
        then the cookie, then a ``?token=``."""
        auth = authorization or ""
        if auth[:7].lower() == "bearer ":
            return self.workspace(auth[7:].strip())
        return self.workspace(cookie) or self.workspace(query_token)


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

    Concerned: every method but GET/HEAD/OPTIONS, unless the request carries
    ``Authorization: Bearer`` (then the cookie is not what authenticates it).
    Such a request passes only if it comes from our own origin — ``Origin``
    naming this Host (``null`` is refused), or, when a browser sent no Origin,
    ``Sec-Fetch-Site: same-origin``; no evidence either way is refused too, and
    so is any ``Sec-Fetch-Site`` but ``same-origin`` — and only with a JSON
    body type: a cross-site page can send text/plain or a form without a CORS
    preflight, never application/json.
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
