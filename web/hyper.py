"""Everything the listener uses of Hypercorn, in one module.

Hypercorn's public API serves a whole listener (``hypercorn.trio.serve``);
``web.listener`` needs one connection at a time (its own accept loop, the
per-peer cap, the request head read first), so it drives the pieces
Hypercorn's own ``serve`` is made of: the app wrapper, the ASGI lifespan, the
worker context and ``TCPServer`` for one connection, and it reads whether that
connection's HTTP/1.1 protocol is answering a request.  None of these is
documented API, so the version is pinned (``pyproject.toml``: hypercorn
0.18.x) and tests/web/test_hyper.py checks each piece against the installed
Hypercorn: an upgrade that moves one fails there, by name, before anything
else does.

**WebSocket upgrades are not Hypercorn's** when the listener has a ``take``
(Turnvisor's ``/ws``, served by ``web.wsconn``): an upgrade that comes on a
connection Hypercorn already serves (a reused keep-alive connection) reaches
the app as an ASGI ``websocket`` scope; ``Connection`` claims it before any
answer is written (ASGI: nothing is sent until the app accepts), the stream
(``Claimable``) then ends Hypercorn's reads and swallows its writes (the 500
it writes for an app that returned without accepting), and the connection
goes back to the listener with the upgrade's request head rebuilt from the
scope.  Without a ``take`` (agentctl) Hypercorn serves upgrades itself.

**Every request is shown to the listener** (``on_request``, its scope) before
the app sees it: a request on a kept-alive connection may be the first on it
to carry the token, and the listener then stops counting that connection
among the unauthenticated ones it may close (``web.connpool``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, Protocol

import h11
import trio
from hypercorn.config import Config, Sockets
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import (
    ASGIReceiveCallable,
    ASGISendCallable,
    ConnectionState,
    HTTPScope,
    Scope,
    WebsocketScope,
)
from hypercorn.utils import repr_socket_addr, wrap_app

__all__ = ["Claimable", "Config", "Connection", "HTTPScope", "Hypercorn", "OnRequest", "Sockets",
           "WebsocketScope", "bind_name", "request_head", "upgrade_head"]

#: Shown each request's scope before the app runs (``request_head`` rebuilds its head).
OnRequest = Callable[[HTTPScope | WebsocketScope], None]


class Claimable(Protocol):
    """The stream a ``Connection`` is served on: ``claim`` takes it back from
    Hypercorn (reads end, writes are dropped) with the upgrade's head."""

    def claim(self, head: bytes) -> None: ...


def bind_name(sock: socket.socket) -> str:
    """``http://host:port`` of a listening socket, as Hypercorn prints it."""
    return f"http://{repr_socket_addr(sock.family, sock.getsockname())}"


def request_head(scope: HTTPScope | WebsocketScope) -> bytes:
    """The request head of an ASGI ``http`` or ``websocket`` scope, as the
    client sent it (header names as h11 hands them over: lower case; order
    kept)."""
    target = bytes(scope.get("raw_path") or scope["path"].encode())
    query = bytes(scope.get("query_string") or b"")
    if query:
        target += b"?" + query
    method = scope["method"] if scope["type"] == "http" else "GET"
    lines = [method.encode("latin-1") + b" " + target + b" HTTP/1.1"]
    lines += [bytes(name) + b": " + bytes(value) for name, value in scope["headers"]]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def upgrade_head(scope: WebsocketScope) -> bytes:
    """The request head of a WebSocket upgrade (``request_head``)."""
    return request_head(scope)


class Hypercorn:
    """Hypercorn's side of one listener: the app, its lifespan, the worker context."""

    def __init__(self, app: Any, config: Config, *, claim_upgrades: bool) -> None:
        self.config = config
        self._app = app
        self._claim_upgrades = claim_upgrades
        self._state: dict[str, Any] = {}
        self._wrapped = wrap_app(app, config.wsgi_max_body_size, None)
        self._lifespan = Lifespan(self._wrapped, config, self._state)
        self._context = WorkerContext(None)

    async def run_lifespan(self, *,
                           task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
                           ) -> None:
        await self._lifespan.handle_lifespan(task_status=task_status)

    async def wait_for_startup(self) -> None:
        await self._lifespan.wait_for_startup()

    async def wait_for_shutdown(self) -> None:
        await self._lifespan.wait_for_shutdown()

    async def terminate(self) -> None:
        """No more keep-alive cycles: open connections close after their answer."""
        await self._context.terminated.set()

    def connection(self) -> Connection:
        return Connection(self)

    def _server(self, stream: Claimable, on_request: OnRequest | None) -> TCPServer:
        app = self._wrapped
        if self._claim_upgrades or on_request is not None:
            inner = self._app
            claim = self._claim_upgrades

            async def asgi(scope: Scope, receive: ASGIReceiveCallable,
                           send: ASGISendCallable) -> None:
                if scope["type"] != "lifespan":
                    if on_request is not None:
                        on_request(scope)
                    if claim and scope["type"] == "websocket":
                        stream.claim(request_head(scope))
                        return
                await inner(scope, receive, send)

            app = wrap_app(asgi, self.config.wsgi_max_body_size, "asgi")
        return TCPServer(app, self.config, self._context,
                         ConnectionState(self._state.copy()), stream)  # type: ignore[arg-type]


class Connection:
    """One accepted connection as Hypercorn serves it."""

    def __init__(self, hypercorn: Hypercorn) -> None:
        self._hypercorn = hypercorn
        self._server: TCPServer | None = None

    async def run(self, stream: Claimable, on_request: OnRequest | None = None) -> None:
        """Until Hypercorn closes the connection (or it is claimed)."""
        self._server = self._hypercorn._server(stream, on_request)
        await self._server.run()

    def answering(self) -> bool:
        """The client has sent a whole request and the app is still answering
        it (a cancel waits up to its join window): the connection is not idle.
        Read from Hypercorn's HTTP/1.1 protocol; anything else counts as idle."""
        protocol = getattr(getattr(self._server, "protocol", None), "protocol", None)
        connection = getattr(protocol, "connection", None)
        return (getattr(protocol, "stream", None) is not None
                and getattr(connection, "their_state", None) is h11.DONE)
