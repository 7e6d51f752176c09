"""The HTTP listener: every ``/ws`` upgrade to the gateway's own WebSocket, the rest to Hypercorn.

    serve_http                        the caller's nursery (web.listener's tree)
    └── connections                   one handler per accepted socket
        ├── Hypercorn's TCPServer     pages, REST
        └── _websocket                a connection asking for ``/ws``
            └── ServerWebSocket reader + Gateway.serve

Every connection starts with its request head read by ``web.listener``
(bounded in size and time, with the per-peer cap and the idle timeout); a
``GET /ws`` with ``Upgrade: websocket`` is served by ``web.wsconn``, anything
else is handed to Hypercorn with the bytes already read replayed first.  An
upgrade that comes later on a keep-alive connection Hypercorn serves is
claimed from it before it answers (``web.hyper``) and comes here the same
way, so there is one WebSocket stack.  Why not Hypercorn's: see
``web.wsconn`` (one write for every frame queued, not one trip through the
ASGI stack per frame).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio
from hypercorn.config import Config as HyperConfig
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, RejectConnection, RejectData, Request
from wsproto.utilities import RemoteProtocolError

from supervisor.config import Config
from supervisor.orchestrator import Caller

from .gateway import Gateway
from .listener import Authenticates, ConnLimits, Handover, Takes, serve_listener
from .wsconn import ServerWebSocket

__all__ = ["Admitted", "Handshake", "WsRefusal", "WsRoute", "conn_limits", "serve_http",
           "ws_max_message"]

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Handshake:
    """What admission looks at in a WebSocket upgrade."""

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


def conn_limits(config: Config) -> ConnLimits:
    return ConnLimits(idle_s=config.limits.idle_connection_s,
                      per_peer=config.limits.max_connections_per_peer)


@dataclass(frozen=True)
class WsRoute:
    path: str
    admit: Admission
    gateway: Gateway
    max_message: int


async def serve_http(app: Any, config: HyperConfig, route: WsRoute, limits: ConnLimits, *,
                     shutdown_trigger: Callable[[], Awaitable[object]],
                     authenticates: Authenticates | None = None,
                     task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
                     ) -> None:
    """Serve until ``shutdown_trigger`` returns (``web.listener``: the limits,
    the graceful stop); every ``/ws`` upgrade is ours, the rest Hypercorn's.
    ``authenticates``: whether a request head carries a token (such a
    connection is never refused or closed for a connection bound)."""
    send, receive = trio.open_memory_channel[Handover](0)
    async with trio.open_nursery() as websockets:
        websockets.start_soon(_take, route, limits.idle_s, receive, websockets)
        async with send:
            await serve_listener(app, config, limits, takes=Takes(route.path, send),
                                 authenticates=authenticates,
                                 shutdown_trigger=shutdown_trigger, task_status=task_status)
        websockets.cancel_scope.cancel()


async def _take(route: WsRoute, idle_s: float, receive: trio.MemoryReceiveChannel[Handover],
                websockets: trio.Nursery) -> None:
    """Every WebSocket upgrade the listener hands over, served in a task of its own."""
    async with receive:
        async for handover in receive:
            websockets.start_soon(_serve_websocket, route, idle_s, handover)


async def _serve_websocket(route: WsRoute, idle_s: float, handover: Handover) -> None:
    try:
        await _websocket(handover.stream, handover.head, route, idle_s)
    except Exception:
        # One connection's failure is that connection's (as Hypercorn keeps it).
        log.exception("WebSocket connection failed")
        await trio.aclose_forcefully(handover.stream)
    finally:
        handover.done.set()


async def _websocket(stream: trio.SocketStream, head: bytes, route: WsRoute,
                     idle_s: float) -> None:
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
    ws = ServerWebSocket(stream, conn, max_message=route.max_message, idle_s=idle_s)
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
