"""What the agentctl link uses around its reader: how it reaches agentctl
(``Route``, the shared TLS context), HTTP bodies, one-line descriptions of a
failed connection, and ``first_set``.

Split out of agentctl_link.py (a module under 600 lines); nothing here holds state.
"""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import trio
from trio_websocket import ConnectionClosed, ConnectionRejected

from protocols.prompt_parts import Line, Spliced

__all__ = ["Route", "describe", "first_set", "payload", "refusal", "shared_tls",
           "ws_close_reason"]


@dataclass(frozen=True)
class Route:
    """How to reach an agentctl behind a relay that authenticates requests
    itself (the Kubernetes API server's Pod proxy, supervisor/executors/kube.py):
    its credential in ``headers`` (``Authorization`` is the relay's, so the
    agentctl token travels in ``TOKEN_HEADER``), and the TLS context that
    trusts it (its CA, and a client certificate if it asks for one)."""

    headers: Mapping[str, str] = field(default_factory=dict)
    ssl_context: ssl.SSLContext | None = None


@functools.cache
def shared_tls() -> ssl.SSLContext:
    """One CA-verifying context for every link (httpx would load the CA bundle
    per client: about 1 MiB per session, docs/performance.md)."""
    return httpx.create_ssl_context()


def describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def refusal(exc: BaseException) -> str:
    """A refused handshake in one line: the status, and the relay's message."""
    if isinstance(exc, ConnectionRejected):
        body = (exc.body or b"").decode(errors="replace")
        try:
            message = json.loads(body).get("message") or body
        except (ValueError, AttributeError):
            message = body
        return f"refused with {exc.status_code}: {str(message)[:300]}"
    return describe(exc)


def ws_close_reason(exc: ConnectionClosed) -> str:
    reason = exc.reason
    if reason is None:
        return "connection lost (no close frame)"
    return f"code {reason.code}" + (f": {reason.reason}" if reason.reason else "")


async def first_set(*events: trio.Event) -> None:
    """Return once any of ``events`` is set."""
    async with trio.open_nursery() as nursery:
        async def wait(ev: trio.Event) -> None:
            await ev.wait()
            nursery.cancel_scope.cancel()
        for ev in events:
            nursery.start_soon(wait, ev)


def payload(body: dict[str, Any] | Line | None) -> dict[str, Any]:
    """httpx's arguments for ``body``: a dict as JSON; a JSON body built already (a
    prompt with its parts, protocols/prompt_parts.py ``streamed``) as it is, a
    ``Spliced`` one sent as its base64 is encoded (not held whole)."""
    if body is None or isinstance(body, dict):
        return {"json": body}
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    return {"content": body if isinstance(body, bytes) else _Pieces(body), "headers": headers}


class _Pieces:
    """A ``Spliced`` line as httpx streams a body (an iterator, not a generator: one
    left unfinished by a cancel has nothing to finalize)."""

    def __init__(self, line: Spliced) -> None:
        self._pieces = iter(line)

    def __aiter__(self) -> _Pieces:
        return self

    async def __anext__(self) -> bytes:
        try:
            return next(self._pieces)
        except StopIteration:
            raise StopAsyncIteration from None
