"""The HTTP listener: ``/ws`` upgrades to the gateway's own WebSocket, the rest to Hypercorn.

    serve_http                        the caller's nursery
    ├── lifespan                      Hypercorn's ASGI lifespan of the app
    └── connections                   one handler per accepted socket
        ├── Hypercorn's TCPServer     pages, REST (and a WebSocket upgrade that
        │                             comes on a reused keep-alive connection:
        │                             the Quart route serves that one)
        └── _websocket                a fresh connection asking for ``/ws``
            └── ServerWebSocket reader + Gateway.serve

Every connection starts with its request head read here (bounded in size and
time); a ``GET /ws`` with ``Upgrade: websocket`` is served by ``web.wsconn``,
anything else is handed to Hypercorn with the bytes already read replayed
first, so Hypercorn sees the connection exactly as the client sent it.  Why:
see ``web.wsconn`` (one write for every frame queued, not one trip through
the ASGI stack per frame).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final
from urllib.parse import urlsplit

import trio
from hypercorn.config import Config as HyperConfig
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import repr_socket_addr, wrap_app
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, RejectConnection, RejectData, Request
from wsproto.utilities import RemoteProtocolError

from supervisor.config import Config
from supervisor.orchestrator import Caller

from .gateway import Gateway
from .wsconn import ServerWebSocket

__all__ = ["Admitted", "Handshake", "WsRefusal", "WsRoute", "serve_http", "ws_max_message"]

log = logging.getLogger(__name__)

#: A request head larger than this is Hypercorn's to refuse.
MAX_HEAD: Final = 16384
#: How long a new connection may take to send its request head before it is
#: handed to Hypercorn as it is (which then applies its own timeouts).
HEAD_TIMEOUT_S: Final = 10.0



@dataclass(frozen=True)
class Handshake:
    """What admission looks at in a WebSocket upgrade (either path)."""

    origin: str | None
    host: str | None
    authorization: str | None
    subprotocols: tuple[str, ...]
    peer: str


@dataclass(frozen=True)
class WsRefusal:
    status: int
    text: str
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Admitted:
    caller: Caller
    #: The subprotocol to select (never one that carries the token), or None.
    subprotocol: str | None


#: The handshake → the caller, or the refusal of the upgrade.
Admission = Callable[[Handshake], Awaitable[Admitted | WsRefusal]]


def ws_max_message(config: Config) -> int:
    """A message above this closes the connection (1009); below it, the
    gateway answers an oversized frame with an error and keeps the connection."""
    return max(4 * 1024 * 1024, 4 * config.limits.max_ws_frame_bytes)


@dataclass(frozen=True)
class WsRoute:
    path: str
    admit: Admission
    gateway: Gateway
    max_message: int


async def serve_http(app: Any, config: HyperConfig, route: WsRoute, *,
                     shutdown_trigger: Callable[[], Awaitable[object]],
                     task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
                     ) -> None:
    """Serve until ``shutdown_trigger`` returns; then stop accepting and give
    open connections ``config.graceful_timeout`` (as ``hypercorn.trio.serve``)."""
    wrapped = wrap_app(app, config.wsgi_max_body_size, None)
    state: dict[str, Any] = {}
    lifespan = Lifespan(wrapped, config, state)
    context = WorkerContext(None)
    async with trio.open_nursery() as lifespan_nursery:
        await lifespan_nursery.start(lifespan.handle_lifespan)
        await lifespan.wait_for_startup()
        async with trio.open_nursery() as connections:
            sockets = config.create_sockets()
            listeners = []
            binds = []
            for sock in sockets.insecure_sockets:
                sock.listen(config.backlog)
                listeners.append(trio.SocketListener(trio.socket.from_stdlib_socket(sock)))
                binds.append(f"http://{repr_socket_addr(sock.family, sock.getsockname())}")
            handler = partial(_connection, wrapped, config, context, state, route)
            async with trio.open_nursery() as accepting:
                accepting.start_soon(partial(trio.serve_listeners, handler, listeners,
                                             handler_nursery=connections))
                task_status.started(binds)
                await shutdown_trigger()
                accepting.cancel_scope.cancel()
            await context.terminated.set()
            connections.cancel_scope.deadline = trio.current_time() + config.graceful_timeout
        await lifespan.wait_for_shutdown()
        lifespan_nursery.cancel_scope.cancel()


async def _connection(app: Any, config: HyperConfig, context: WorkerContext,
                      state: dict[str, Any], route: WsRoute, stream: trio.SocketStream) -> None:
    head = b""
    with trio.move_on_after(HEAD_TIMEOUT_S):
        head = await _read_head(stream)
    if _asks_for(head, route.path):
        try:
            await _websocket(stream, head, route)
        except Exception:
            # One connection's failure is that connection's (as Hypercorn keeps it).
            log.exception("WebSocket connection failed")
            await trio.aclose_forcefully(stream)
        return
    await TCPServer(app, config, context, ConnectionState(state.copy()),
                    _Replayed(stream, head))  # type: ignore[arg-type]


async def _read_head(stream: trio.SocketStream) -> bytes:
    head = b""
    while b"\r\n\r\n" not in head and len(head) < MAX_HEAD:
        try:
            data = await stream.receive_some(MAX_HEAD)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            break
        if not data:
            break
        head += data
    return head


def _asks_for(head: bytes, path: str) -> bool:
    """A complete ``GET <path>`` request head with ``Upgrade: websocket``."""
    end = head.find(b"\r\n\r\n")
    if end < 0:
        return False
    request_line, _, header_block = head[:end].partition(b"\r\n")
    parts = request_line.split(b" ")
    if len(parts) != 3 or parts[0] != b"GET":
        return False
    if urlsplit(parts[1].decode("latin-1")).path != path:
        return False
    for line in header_block.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"upgrade" and b"websocket" in value.lower():
            return True
    return False


async def _websocket(stream: trio.SocketStream, head: bytes, route: WsRoute) -> None:
    conn = WSConnection(ConnectionType.SERVER)
    try:
        conn.receive_data(head)
        request = next(e for e in conn.events() if isinstance(e, Request))
    except (RemoteProtocolError, StopIteration) as exc:
        hint = getattr(exc, "event_hint", None)
        if isinstance(hint, RejectConnection):
            await _send(stream, conn.send(hint))
        else:
            await _send(stream, _plain(400, "bad WebSocket request"))
        await trio.aclose_forcefully(stream)
        return
    headers = _headers(request)
    admitted = await route.admit(Handshake(
        origin=headers.get("origin"), host=request.host,
        authorization=headers.get("authorization"),
        subprotocols=tuple(request.subprotocols), peer=_peer(stream)))
    if isinstance(admitted, WsRefusal):
        body = admitted.text.encode()
        await _send(stream, conn.send(RejectConnection(
            status_code=admitted.status, has_body=True,
            headers=[(b"content-type", b"text/plain; charset=utf-8"),
                     (b"content-length", str(len(body)).encode()),
                     (b"x-content-type-options", b"nosniff"),
                     *((k.encode(), v.encode()) for k, v in admitted.headers)])))
        await _send(stream, conn.send(RejectData(data=body)))
        await trio.aclose_forcefully(stream)
        return
    if not await _send(stream, conn.send(AcceptConnection(subprotocol=admitted.subprotocol))):
        await trio.aclose_forcefully(stream)
        return
    ws = ServerWebSocket(stream, conn, max_message=route.max_message)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ws.run_reader)
            await route.gateway.serve(ws, admitted.caller)
            nursery.cancel_scope.cancel()
    finally:
        await ws.abort()


def _headers(request: Request) -> dict[str, str]:
    """The request's headers by lower-case name (repeated ones joined, as
    HTTP allows; cookies with "; ")."""
    out: dict[str, str] = {}
    for raw_name, raw_value in request.extra_headers:
        name = bytes(raw_name).decode("latin-1").lower()
        value = bytes(raw_value).decode("latin-1")
        if name in out:
            out[name] += ("; " if name == "cookie" else ", ") + value
        else:
            out[name] = value
    return out


def _peer(stream: trio.SocketStream) -> str:
    """The client's address (no port): the throttle's key."""
    try:
        name = stream.socket.getpeername()
    except OSError:
        return "?"
    return str(name[0]) if isinstance(name, tuple) else str(name)


def _plain(status: int, text: str) -> bytes:
    body = text.encode()
    return (f"HTTP/1.1 {status} \r\ncontent-type: text/plain\r\ncontent-length: {len(body)}"
            "\r\nconnection: close\r\n\r\n").encode() + body


async def _send(stream: trio.SocketStream, data: bytes) -> bool:
    try:
        await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return False
    return True


class _Replayed(trio.abc.Stream):
    """A socket stream whose first read gives back the bytes read before
    (the request head), for Hypercorn."""

    def __init__(self, stream: trio.SocketStream, first: bytes) -> None:
        self._stream = stream
        self._first = first
        self.socket = stream.socket

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._first:
            data, self._first = self._first, b""
            await trio.lowlevel.checkpoint()
            return data
        return await self._stream.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        await self._stream.aclose()
