"""A lean WebSocket subscriber for the fan-out phase: what the server sends, read cheaply.

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
from dataclasses import dataclass, field

import trio

from tests.support.ws import now

__all__ = ["LeanSubscriber", "open_lean"]


def _client_frame(text: str) -> bytes:
    """A masked, final text frame (RFC 6455: clients mask everything)."""
    payload = text.encode()
    mask = os.urandom(4)
    n = len(payload)
    length = bytes((0x80 | n,)) if n < 126 else bytes((0x80 | 126,)) + n.to_bytes(2, "big")
    header = b"\x81" + length
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return header + mask + masked


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


async def open_lean(host: str, port: int, token: str, session_id: str,
                    nursery: trio.Nursery) -> LeanSubscriber:
    """Connect, upgrade, subscribe to ``session_id``; reading runs in ``nursery``."""
    stream = await trio.open_tcp_stream(host, port)
    key = base64.b64encode(os.urandom(16)).decode()
    await stream.send_all(
        (f"GET /ws?token={token} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
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
    sub = LeanSubscriber(stream)
    subscribed = sub.expect(b'"action":"session.subscribe"')
    sub._tail = head.split(b"\r\n\r\n", 1)[1]
    await stream.send_all(_client_frame(json.dumps(
        {"id": "s", "type": "request", "action": "session.subscribe",
         "payload": {"session_id": session_id}})))
    nursery.start_soon(sub.read)
    with trio.fail_after(30):
        await subscribed[0].wait()
    return sub
