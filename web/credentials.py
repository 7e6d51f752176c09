"""Where a request carries a token, read from its raw head or its offered
subprotocols: shared by Turnvisor's server (web/auth.py) and agentctl's,
which must not import the backend's auth (its own component).

The browser cannot set ``Authorization`` on a WebSocket, so it offers the
token as a subprotocol ``turnvisor.bearer.<base64url>`` beside ``turnvisor``.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable, Iterable
from typing import Final
from urllib.parse import unquote_plus, urlsplit

__all__ = ["BEARER_PREFIX", "bearer_subprotocol", "head_carries", "head_tokens",
           "subprotocol_token"]

#: The subprotocol prefix that carries a token (web/static/ws.js builds it).
BEARER_PREFIX: Final = "turnvisor.bearer."


def bearer_subprotocol(token: str) -> str:
    """The subprotocol a browser offers to carry ``token`` (what web/static/ws.js builds)."""
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    return BEARER_PREFIX + encoded


def subprotocol_token(offered: Iterable[str]) -> str | None:
    """The token in an offered ``turnvisor.bearer.*`` subprotocol, if any."""
    for proto in offered:
        if proto.startswith(BEARER_PREFIX):
            encoded = proto[len(BEARER_PREFIX):]
            try:
                return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
            except (binascii.Error, ValueError):
                return None
    return None


def head_tokens(head: bytes) -> list[str]:
    """The tokens a raw request head offers, at most one of each kind: the
    first ``Authorization: Bearer``, the first bearer subprotocol, the first
    ``token`` query parameter (the login address).  Bounded work whatever the
    head holds; a malformed head offers what could be read of it."""
    end = head.find(b"\r\n\r\n")
    lines = (head if end < 0 else head[:end]).decode("latin-1").split("\r\n")
    found: list[str] = []
    parts = lines[0].split(" ")
    if len(parts) == 3:
        query = urlsplit(parts[1]).query
        for field in query.split("&"):
            if field.startswith("token="):
                found.append(unquote_plus(field[6:]))
                break
    bearer = subprotocol = False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip()
        if name == "authorization" and not bearer:
            bearer = True
            if value[:7].lower() == "bearer ":
                found.append(value[7:].strip())
        elif name == "sec-websocket-protocol" and not subprotocol:
            offered = subprotocol_token(p.strip() for p in value.split(","))
            if offered is not None:
                subprotocol = True
                found.append(offered)
    return found


def head_carries(token: str) -> Callable[[bytes], bool]:
    """Whether a raw request head carries ``token`` (agentctl's one token;
    ``head_tokens``), compared in constant time."""
    known = token.encode()

    def carried_by(head: bytes) -> bool:
        found = False
        for offered in head_tokens(head):
            found = hmac.compare_digest(known, offered.encode()) or found
        return found

    return carried_by
