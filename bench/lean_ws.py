"""Lean WebSocket clients for the fan-out and the storm: what the server sends, read cheaply.

A fan-out's last delivery is measured at the client; with a trio-websocket
client per subscriber the bench spent 110-160 µs of its own CPU per frame
(its reader task, wsproto, a memory channel, JSON), more than the server, on
the same two cores.  This subscriber reads the raw socket and looks for the
one frame it waits for with a byte search: server frames are unmasked, so a
notification's JSON is in the stream as it was sent.  It speaks just enough:
the upgrade, one masked ``session.subscribe`` request, and nothing else.
"""

from __future__ import annotations

import base64
import json
import os
import select
import threading
from dataclasses import dataclass, field

import trio

from tests.support.ws import now

__all__ = ["LeanConnection", "LeanRequest", "LeanSubscriber", "client_frame", "open_lean",
           "open_lean_connection", "read_all", "upgrade"]


def client_frame(payload: bytes, opcode: int = 0x1) -> bytes:
    """A masked, final frame, text by default (RFC 6455 §5.3: clients mask everything)."""
    n = len(payload)
    if n < 126:
        length = bytes((0x80 | n,))
    elif n < 65536:
        length = bytes((0x80 | 126,)) + n.to_bytes(2, "big")
    else:
        length = bytes((0x80 | 127,)) + n.to_bytes(8, "big")
    mask = os.urandom(4)
    # XOR as one big integer: a Python loop per byte would cost the request.
    key = (mask * (n // 4 + 1))[:n]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")
    return bytes((0x80 | opcode,)) + length + mask + masked


@dataclass(eq=False)
class LeanSubscriber:
    stream: trio.SocketStream
    #: Byte patterns awaited → the event set (with its arrival time) when seen.
    waiting: dict[bytes, tuple[trio.Event, list[float]]] = field(default_factory=dict)
    _tail: bytes = b""

    def expect(self, pattern: bytes) -> tuple[trio.Event, list[float]]:
        """The arrival (``now()``) of the next frame containing ``pattern``
        (what was read before does not count)."""
        entry: tuple[trio.Event, list[float]] = (trio.Event(), [])
        self.waiting[pattern] = entry
        self._tail = b""
        return entry

    async def read(self) -> None:
        while True:
            data = await self.stream.receive_some(65536)
            if not data:
                return
            at = now()
            # Keep a little of the previous read: a pattern may straddle two reads.
            window = self._tail + data
            self._tail = window[-256:]
            for pattern, (event, when) in list(self.waiting.items()):
                if pattern in window:
                    del self.waiting[pattern]
                    when.append(at)
                    event.set()


def read_all(fds: list[int], patterns: tuple[bytes, ...], timeout_s: float,
             ready: threading.Event | None = None) -> list[dict[int, float]]:
    """Read the subscribers' sockets through one epoll, as the fan-out floor
    (bench/fanout_floor.py) reads its own, until every socket has carried every
    pattern (in order: a later pattern counts once the earlier one was seen);
    per pattern, each socket's arrival time (``now()``).  Blocking: for a
    worker thread, while no task reads these sockets.  What it costs per frame
    is the floor's reading, so a fan-out's last delivery measures the server.
    ``ready`` is set once it listens."""
    seen: list[dict[int, float]] = [{} for _ in patterns]
    tails = dict.fromkeys(fds, b"")
    deadline = now() + timeout_s
    with select.epoll() as ep:
        for fd in fds:
            ep.register(fd, select.EPOLLIN)
        if ready is not None:
            ready.set()
        while len(seen[-1]) < len(fds):
            left = deadline - now()
            if left <= 0:
                raise TimeoutError(f"{len(seen[-1])} of {len(fds)} subscribers got everything")
            for fd, _ in ep.poll(left):
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    raise ConnectionError("a subscriber's connection closed")
                at = now()
                window = tails[fd] + data
                tails[fd] = window[-256:]
                start = 0
                for i, pattern in enumerate(patterns):
                    if fd in seen[i]:
                        continue
                    found = window.find(pattern, start)
                    if found < 0:
                        break
                    seen[i][fd] = at
                    start = found + len(pattern)
    return seen


async def upgrade(host: str, port: int, token: str) -> trio.SocketStream:
    """A connected, upgraded stream (what came after the 101's head is dropped:
    the server sends nothing before a request)."""
    stream = await trio.open_tcp_stream(host, port)
    key = base64.b64encode(os.urandom(16)).decode()
    await stream.send_all(
        (f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
         f"Authorization: Bearer {token}\r\n"
         f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
         "Sec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = await stream.receive_some(4096)
        if not chunk:
            raise ConnectionError("closed during the upgrade")
        head += chunk
    if not head.startswith(b"HTTP/1.1 101"):
        raise ConnectionError(head.split(b"\r\n", 1)[0].decode())
    return stream


async def open_lean(host: str, port: int, token: str, session_id: str,
                    nursery: trio.Nursery) -> LeanSubscriber:
    """Connect, upgrade, subscribe to ``session_id``; reading runs in ``nursery``."""
    stream = await upgrade(host, port, token)
    sub = LeanSubscriber(stream)
    subscribed = sub.expect(b'"action":"session.subscribe"')
    await stream.send_all(client_frame(json.dumps(
        {"id": "s", "type": "request", "action": "session.subscribe",
         "payload": {"session_id": session_id}}).encode()))
    nursery.start_soon(sub.read)
    with trio.fail_after(30):
        await subscribed[0].wait()
    return sub


@dataclass(eq=False)
class LeanRequest:
    """One request sent on a ``LeanConnection``: when it went, when its answer came."""

    sent_at: float
    done: trio.Event = field(default_factory=trio.Event)
    answered_at: float = 0.0
    ok: bool = False


@dataclass(eq=False)
class LeanConnection:
    """Requests and their answers over a raw socket: frames are parsed just far
    enough to find an answer's ``id`` (the storm's 1,000 answers, read cheaply)."""

    stream: trio.SocketStream
    pending: dict[str, LeanRequest] = field(default_factory=dict)
    _buffer: bytes = b""
    _next: int = 0

    async def send(self, action: str, payload: dict[str, object]) -> LeanRequest:
        self._next += 1
        req_id = f"r{self._next}"
        request = self.pending[req_id] = LeanRequest(sent_at=now())
        await self.stream.send_all(client_frame(json.dumps(
            {"id": req_id, "type": "request", "action": action, "payload": payload}).encode()))
        return request

    async def read(self) -> None:
        while True:
            try:
                data = await self.stream.receive_some(65536)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return  # closed by its owner
            if not data:
                return
            at = now()
            self._buffer += data
            while len(self._buffer) >= 2:
                n = self._buffer[1] & 0x7F
                start = 2
                if n == 126:
                    n, start = int.from_bytes(self._buffer[2:4], "big"), 4
                elif n == 127:
                    n, start = int.from_bytes(self._buffer[2:10], "big"), 10
                if len(self._buffer) < start + n:
                    break
                frame = self._buffer[start:start + n]
                self._buffer = self._buffer[start + n:]
                self._answered(frame, at)

    def _answered(self, frame: bytes, at: float) -> None:
        head = frame.find(b'"id":"')
        if head < 0:
            return
        end = frame.find(b'"', head + 6)
        request = self.pending.pop(frame[head + 6:end].decode(), None)
        if request is not None:
            request.answered_at = at
            request.ok = b'"type":"response"' in frame
            request.done.set()


async def open_lean_connection(host: str, port: int, token: str,
                               nursery: trio.Nursery) -> LeanConnection:
    """Connect and upgrade; reading runs in ``nursery``."""
    stream = await upgrade(host, port, token)
    conn = LeanConnection(stream)
    nursery.start_soon(conn.read)
    return conn
