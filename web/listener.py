"""The HTTP listener of Turnvisor and of agentctl: Hypercorn's connections, held to limits.

    serve_listener                    the caller's nursery
    ├── lifespan                      Hypercorn's ASGI lifespan of the app
    └── connections                   one handler per accepted socket
        └── _connection               counted (web.connpool) → request head →
                                      token? → handed over (``Takes``) or
                                      Hypercorn (web.hyper) → handed over
                                      again for a claimed upgrade → a close
                                      that lands

What a client can hold, and for how long (``ConnLimits``):

- **Unauthenticated connections** (``per_peer`` per remote address,
  ``unauthenticated`` in all; ``web.connpool``): a new connection over a
  bound is not refused (another local program shares the person's address
  and could hold every slot: issue 40, item 7); it closes the one idle the
  longest instead (no byte moved on it for the longest time).  A connection
  whose request head carries the right token (``authenticates``:
  ``Authorization: Bearer``, the WebSocket's bearer subprotocol, the login
  address) is out of the count for good: it is never closed to make room.
- **A connection that says nothing**: its first request head must be complete
  within ``idle_s`` (a partial one gets a 408), later ones and every read of
  a request's body within ``idle_s`` too (Hypercorn's keep-alive timer, and
  ``_Guarded``'s bound on each read).  A connection upgraded to a WebSocket
  has no read bound here: Turnvisor's own WebSocket pings an idle client
  (``web.wsconn``), agentctl's event stream sends heartbeats.
- **A close that lands.** Hypercorn closes a connection from inside the
  app's task (after answering a request whose body it never read, or after
  ``Connection: close``), and quart-trio cancels that task at that very
  moment: the close (``send_eof`` then ``aclose``) was cancelled at its first
  checkpoint, so the socket stayed open — the client's next request hung and
  the server's end sat in CLOSE-WAIT.  ``_Guarded`` does a close's work before
  any checkpoint, and the socket itself is closed once Hypercorn is done with
  it, lingering: our FIN is sent, what the client still sends is read and
  dropped (bounded in bytes and time), so the close is no reset that would
  destroy the response in flight.  A lingering connection still counts.

With ``takes``, a WebSocket upgrade to its ``path`` is handed over to
whoever reads its channel (Turnvisor's ``/ws``: web/front.py), with its first
request head, and the listener waits until the new owner is done with it; it
calls nothing of the new owner's (the owner's own task serves the connection,
so nothing above the listener is run from below it).  Everything else goes
to Hypercorn with the bytes read so far replayed first, so Hypercorn sees the
connection exactly as the client sent it.  With ``takes``, every WebSocket
upgrade is the channel's or nobody's: one that comes after other requests on a
keep-alive connection is claimed from Hypercorn before it answers
(``web.hyper``) and handed over with its head; an upgrade to another path
gets a 404.
"""

from __future__ import annotations

import logging
import math
import socket as stdlib_socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final
from urllib.parse import urlsplit

import trio
from quart import Quart, Response, request

from .connpool import ConnPool, Held
from .hyper import Config as HyperConfig
from .hyper import HTTPScope, Hypercorn, WebsocketScope, bind_name, request_head

__all__ = ["Authenticates", "ConnLimits", "Handover", "Takes", "close_after_refusals",
           "serve_listener"]

log = logging.getLogger(__name__)

#: A request head larger than this is Hypercorn's to refuse (431).
MAX_HEAD: Final = 16384
#: A close reads and drops what the client still sends for at most this long
#: and this much ...
LINGER_S: Final = 2.0
LINGER_BYTES: Final = 1024 * 1024



@dataclass(eq=False)
class Handover:
    """A connection handed over with its first request head: ``done`` once its
    new owner has finished with it (the listener then closes the socket)."""

    stream: trio.SocketStream
    head: bytes
    done: trio.Event = field(default_factory=trio.Event)


@dataclass(frozen=True)
class Takes:
    """WebSocket upgrades to ``path`` leave the listener by ``channel``."""

    path: str
    channel: trio.MemorySendChannel[Handover]

#: Whether a raw request head carries the right token (``web.auth.Tokens.carried_by``).
Authenticates = Callable[[bytes], bool]


@dataclass(frozen=True, slots=True)
class ConnLimits:
    #: Seconds a connection may send nothing (see the module's docstring).
    idle_s: float = 60.0
    #: Open unauthenticated connections per remote address ...
    per_peer: int = 64
    #: ... and in all (``web.connpool``).
    unauthenticated: int = 256


async def serve_listener(app: Any, config: HyperConfig, limits: ConnLimits, *,
                         takes: Takes | None = None,
                         authenticates: Authenticates | None = None,
                         shutdown_trigger: Callable[[], Awaitable[object]],
                         task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
                         ) -> None:
    """Serve until ``shutdown_trigger`` returns; then stop accepting and give
    open connections ``config.graceful_timeout`` (as ``hypercorn.trio.serve``).
    ``config.keep_alive_timeout`` is set to ``limits.idle_s``.  Without
    ``authenticates`` every connection counts as unauthenticated."""
    config.keep_alive_timeout = limits.idle_s
    hypercorn = Hypercorn(app, config, claim_upgrades=takes is not None)
    pool = ConnPool(per_peer=limits.per_peer, total=limits.unauthenticated)
    async with trio.open_nursery() as lifespan_nursery:
        await lifespan_nursery.start(hypercorn.run_lifespan)
        await hypercorn.wait_for_startup()
        async with trio.open_nursery() as connections:
            sockets = config.create_sockets()
            listeners = []
            binds = []
            for sock in sockets.insecure_sockets:
                sock.listen(config.backlog)
                listeners.append(trio.SocketListener(trio.socket.from_stdlib_socket(sock)))
                binds.append(bind_name(sock))
            handler = partial(_connection, hypercorn, limits, pool, takes, authenticates)
            async with trio.open_nursery() as accepting:
                accepting.start_soon(partial(trio.serve_listeners, handler, listeners,
                                             handler_nursery=connections))
                task_status.started(binds)
                await shutdown_trigger()
                accepting.cancel_scope.cancel()
            await hypercorn.terminate()
            connections.cancel_scope.deadline = trio.current_time() + config.graceful_timeout
        await hypercorn.wait_for_shutdown()
        lifespan_nursery.cancel_scope.cancel()


def close_after_refusals(app: Quart) -> None:
    """An error answer to a request that has a body says ``Connection: close``
    (and Hypercorn then closes): the body may be unread (a refusal in a
    ``before_request``, a 413, a 404), and then the connection cannot carry
    another request; the client learns it from the answer, not by a failed
    reuse.  A client that sent a good request keeps its connection."""

    @app.after_request
    async def close_if_refused(response: Response) -> Response:
        if response.status_code >= 400 and (
                request.headers.get("Content-Length", "0") not in ("", "0")
                or "Transfer-Encoding" in request.headers):
            response.headers["Connection"] = "close"
        return response


def _peer(stream: trio.SocketStream) -> str:
    try:
        address = stream.socket.getpeername()
    except OSError:
        return "?"
    return str(address[0]) if isinstance(address, tuple) else str(address)


async def _connection(hypercorn: Hypercorn, limits: ConnLimits, pool: ConnPool,
                      takes: Takes | None, authenticates: Authenticates | None,
                      stream: trio.SocketStream) -> None:
    held = pool.open(_peer(stream), partial(_evict, stream), trio.current_time())
    try:
        await _serve(hypercorn, limits, pool, held, takes, authenticates, stream)
    except Exception:
        # One connection's failure is that connection's, not the listener's.
        log.exception("connection failed")
    finally:
        try:
            await _close(stream, LINGER_S)
        finally:
            pool.close(held)


def _evict(stream: trio.SocketStream) -> None:
    """Close at once, whatever the connection's task is doing: the socket's
    close wakes its read or write with ``ClosedResourceError`` (Hypercorn
    takes that as the client gone, as it does a reset; a write it shields from
    cancellation ends too), and the task then finds it closed."""
    _shut_write(stream.socket)
    stream.socket.close()


async def _serve(hypercorn: Hypercorn, limits: ConnLimits, pool: ConnPool, held: Held,
                 takes: Takes | None, authenticates: Authenticates | None,
                 stream: trio.SocketStream) -> None:
    def touch() -> None:
        pool.touch(held)

    head, complete = await _read_head(stream, limits.idle_s, touch)
    if not complete:
        if head.strip():
            with trio.move_on_after(LINGER_S):
                await _send(stream, _plain(408, "request head not received in time"))
        return
    if authenticates is not None and authenticates(head):
        pool.authenticate(held)
    if takes is not None and _asks_for(head, takes.path):
        await _hand_over(takes, stream, head)
        return
    served = hypercorn.connection()
    guarded = _Guarded(stream, head, limits.idle_s, answering=served.answering,
                       on_activity=touch)

    def on_request(scope: HTTPScope | WebsocketScope) -> None:
        # A later request on this connection may be the first with the token.
        if (not held.authenticated and authenticates is not None
                and authenticates(request_head(scope))):
            pool.authenticate(held)

    await served.run(guarded, on_request)
    if guarded.claimed is not None:
        # A WebSocket upgrade on a connection Hypercorn served before
        # (keep-alive): ours, as a fresh one is (web.hyper).
        assert takes is not None  # only claimed when there is a taker
        if _asks_for(guarded.claimed, takes.path):
            await _hand_over(takes, stream, guarded.claimed)
        else:
            with trio.move_on_after(LINGER_S):
                await _send(stream, _plain(404, "no WebSocket at this path"))


async def _hand_over(takes: Takes, stream: trio.SocketStream, head: bytes) -> None:
    """Hand the connection over and wait until its new owner is done with it
    (its socket is closed after that, by the caller)."""
    handover = Handover(stream, head)
    try:
        await takes.channel.send(handover)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return  # nobody takes connections any more (the server is stopping)
    await handover.done.wait()


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


async def _read_head(stream: trio.SocketStream, within_s: float,
                     on_activity: Callable[[], None]) -> tuple[bytes, bool]:
    """What the client sent before its head ended (or ``MAX_HEAD`` bytes),
    within ``within_s``; and whether that is for Hypercorn (a head, or too
    much for one) rather than a silence, a partial head or a hang-up."""
    head = b""
    with trio.move_on_after(within_s):
        while b"\r\n\r\n" not in head and len(head) < MAX_HEAD:
            try:
                data = await stream.receive_some(MAX_HEAD)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return head, False
            if not data:
                return head, False
            on_activity()
            head += data
        return head, True
    return head, False


def _plain(status: int, text: str) -> bytes:
    body = text.encode()
    return (f"HTTP/1.1 {status} \r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


async def _send(stream: trio.SocketStream, data: bytes) -> None:
    try:
        await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


def _shut_write(sock: trio.socket.SocketType) -> None:
    try:
        sock.shutdown(stdlib_socket.SHUT_WR)
    except OSError:
        pass  # closed already, or the peer is gone


async def _close(stream: trio.SocketStream, linger_s: float) -> None:
    """Close for good, lingering: FIN first, then read and drop what the client
    still sends (at most ``LINGER_BYTES``, ``linger_s``) until it closes too;
    the socket is closed whatever happens, cancellation included."""
    try:
        if stream.socket.fileno() < 0:
            return
        _shut_write(stream.socket)
        with trio.move_on_after(linger_s):
            dropped = 0
            while dropped < LINGER_BYTES:
                data = await stream.receive_some(65536)
                if not data:
                    break
                dropped += len(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        stream.socket.close()


class _Guarded(trio.abc.HalfCloseableStream):
    """The socket as Hypercorn sees it: the bytes read before given back first;
    each read bounded by ``idle_s`` (a ``trio.TooSlowError``, which Hypercorn
    takes as its own read timeout) unless a request is being answered, and
    none once a 101 upgraded the connection (agentctl's WebSocket, or h2c); a
    ``send_eof``/``aclose`` that cannot be cancelled before it has done its
    work (see the module's docstring).  ``aclose`` does not close the socket:
    it sends our FIN and ends the pending read (Hypercorn then sees the end of
    the connection); the listener closes the socket after Hypercorn.

    ``claim`` takes the connection back from Hypercorn for a WebSocket upgrade
    (``web.hyper``): from then on Hypercorn reads the end of the stream and its
    writes and closes go nowhere; the socket is the listener's again, open."""

    def __init__(self, stream: trio.SocketStream, first: bytes, idle_s: float, *,
                 answering: Callable[[], bool], on_activity: Callable[[], None]) -> None:
        self._stream = stream
        self._first = first
        self._idle_s = idle_s
        self._upgraded = False
        self._closing = False
        self._reading: trio.CancelScope | None = None
        self.socket = stream.socket
        #: Whether a request is being answered (then a silent client is waiting, not idle).
        self._answering = answering
        #: Called when bytes moved, either way.
        self._on_activity = on_activity
        #: The head of the WebSocket upgrade this connection was claimed for.
        self.claimed: bytes | None = None

    def claim(self, head: bytes) -> None:
        self.claimed = head
        self._closing = True
        if self._reading is not None:
            self._reading.cancel()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._first:
            data, self._first = self._first, b""
            await trio.lowlevel.checkpoint()
            return data
        if self._closing:
            await trio.lowlevel.checkpoint()
            return b""
        while True:
            deadline = trio.current_time() + self._idle_s if not self._upgraded else math.inf
            with trio.CancelScope(deadline=deadline) as reading:
                self._reading = reading
                try:
                    data = await self._stream.receive_some(max_bytes)
                finally:
                    self._reading = None
                if data:
                    self._on_activity()
                return data
            if self._closing:
                return b""
            if not self._answering():
                raise trio.TooSlowError(f"nothing received for {self._idle_s:g}s")

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.claimed is not None:
            await trio.lowlevel.checkpoint()
            return  # Hypercorn's answer to an upgrade it no longer has
        if not self._upgraded and bytes(data[:13]) == b"HTTP/1.1 101 ":
            self._upgraded = True
            if self._reading is not None:  # the read under way has no bound either
                self._reading.deadline = math.inf
        await self._stream.send_all(data)
        self._on_activity()

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        if self.claimed is None:
            _shut_write(self.socket)
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def aclose(self) -> None:
        self._closing = True
        if self.claimed is None:
            _shut_write(self.socket)
        if self._reading is not None:
            self._reading.cancel()
        await trio.lowlevel.cancel_shielded_checkpoint()
