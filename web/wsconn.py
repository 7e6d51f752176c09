"""One server WebSocket over a Trio stream: what ``/ws`` speaks below Quart.

Why not through Quart and Hypercorn: there every outbound frame was its own
trip through quart → hypercorn → wsproto → h11 and its own ``send_all`` (a
syscall each); a cancel puts seven notifications on its connection before its
response, and a storm or a fan-out is one frame per answer or per subscriber.
Here the gateway hands over every frame it has queued at once, they are framed
in place (server frames are unmasked: a header and the UTF-8 text) and written
with one ``send_all``.

What the client sends is parsed by wsproto (masking, fragments, control
frames, UTF-8 and protocol errors, answered with the close codes of RFC 6455).
A message above ``max_message`` bytes closes the connection with 1009, as
Hypercorn did.  A client that sends nothing for ``idle_s`` is pinged; one
that then answers nothing (no pong, no frame) for ``idle_s`` more is closed
with 1001: a long-lived client that is idle but alive (browsers answer pings
by themselves) stays, a vanished one does not hold its connection.

Writes are not shielded: a peer that takes nothing is timed out by the
gateway's send deadline, and the connection is then aborted (a write cut
off mid-frame leaves nothing worth keeping).

    serve(ws)                     the caller's nursery
    └── reader                    socket → wsproto → ``receive()``; pongs, close replies
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Final

import trio
from wsproto import WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    BytesMessage,
    CloseConnection,
    Ping,
    TextMessage,
)
from wsproto.frame_protocol import CloseReason

__all__ = ["ServerWebSocket", "WebSocketClosed", "frame_text"]

MAX_READ: Final = 65536
#: How long a close we started waits for the client's reply before hanging up.
CLOSE_REPLY_S: Final = 1.0


class WebSocketClosed(Exception):
    """The connection is closed (by either side) or broken."""


def frame_text(text: str) -> bytes:
    """One unmasked, final text frame (RFC 6455 §5.2)."""
    payload = text.encode()
    n = len(payload)
    if n < 126:
        header = bytes((0x81, n))
    elif n < 65536:
        header = bytes((0x81, 126)) + n.to_bytes(2, "big")
    else:
        header = bytes((0x81, 127)) + n.to_bytes(8, "big")
    return header + payload


def _framed_all(frames: Sequence[str | bytes]) -> bytes:
    """Frames in order, one buffer (bytes: framed already)."""
    return b"".join(f if isinstance(f, bytes) else frame_text(f) for f in frames)


#: The last frame ``write_now`` framed, by its text's identity: a fan-out hands
#: every subscriber the same text object, framed once instead of per subscriber.
_last_framed: tuple[str | None, bytes] = (None, b"")


def _framed_once(text: str) -> bytes:
    global _last_framed
    last_text, data = _last_framed
    if text is not last_text:
        data = frame_text(text)
        _last_framed = (text, data)
    return data


class ServerWebSocket:
    """An accepted connection (``conn`` has completed the handshake)."""

    def __init__(self, stream: trio.abc.Stream, conn: WSConnection, *,
                 max_message: int, idle_s: float = math.inf) -> None:
        self._stream = stream
        self._conn = conn
        # The socket's descriptor, for ``write_now`` (Trio made it non-blocking).
        sock = getattr(stream, "socket", None)
        self._fd: int | None = sock.fileno() if sock is not None else None
        self._max_message = max_message
        self._idle_s = idle_s
        self._write_lock = trio.StrictFIFOLock()
        self._to_receiver, self._incoming = trio.open_memory_channel[str | bytes](16)
        #: Set when the connection is over (the reader ended).
        self.closed = trio.Event()
        self._broken = False
        #: The reader's scope: given a deadline once a close is under way.
        self._reading = trio.CancelScope()

    # -- the gateway's Socket -------------------------------------------------------

    async def receive(self) -> str | bytes:
        try:
            return await self._incoming.receive()
        except trio.EndOfChannel:
            raise WebSocketClosed from None

    async def send(self, data: str | bytes) -> None:
        if isinstance(data, bytes):
            raise TypeError("the gateway sends text frames only")
        await self.send_many((data,))

    async def send_many(self, frames: Sequence[str | bytes]) -> None:
        """Every frame, in order, in one write (bytes: already framed)."""
        if self._conn.state is not ConnectionState.OPEN:
            raise WebSocketClosed
        await self._write(_framed_all(frames))

    def write_now(self, frames: Sequence[str | bytes]) -> bytes | None:
        """Write frames (bytes: already framed) without waiting, if nothing is
        being written: None if nothing was (the caller queues them), else what
        the socket did not take (empty: all of it).  One non-blocking
        ``write`` on the socket."""
        if (self._fd is None or self._broken or self._write_lock.locked()
                or self._conn.state is not ConnectionState.OPEN):
            return None
        if len(frames) == 1 and isinstance(frames[0], str):
            data = _framed_once(frames[0])
        else:
            data = _framed_all(frames)
        try:
            sent = os.write(self._fd, data)
        except BlockingIOError:
            return None
        except OSError:
            return None  # broken: the writer's next write finds out and ends the connection
        return data[sent:]

    async def close(self, code: int, reason: str = "") -> None:
        """Start the closing handshake and hang up once the client replied
        (or after ``CLOSE_REPLY_S``)."""
        if self._conn.state is ConnectionState.OPEN:
            try:
                await self._write(self._conn.send(CloseConnection(code=code, reason=reason)))
            except WebSocketClosed:
                pass
        with trio.move_on_after(CLOSE_REPLY_S):
            await self.closed.wait()
        await self.abort()

    async def abort(self) -> None:
        self._broken = True
        await trio.aclose_forcefully(self._stream)

    # -- the connection ---------------------------------------------------------------

    async def _write(self, data: bytes) -> None:
        if self._broken:
            raise WebSocketClosed
        async with self._write_lock:
            try:
                await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._broken = True
                raise WebSocketClosed from None
            except trio.Cancelled:
                # Cut off mid-write (the send deadline): the stream may hold half
                # a frame, so nothing more can be written on it.
                self._broken = True
                raise

    async def run_reader(self) -> None:
        """Read until the connection ends; then ``receive`` raises ``WebSocketClosed``."""
        try:
            with self._reading:
                await self._read()
        except (WebSocketClosed, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self._to_receiver.close()
            self.closed.set()

    async def _read(self) -> None:
        texts: list[str] = []  # the fragments of the message being received
        blobs: list[bytes] = []
        size = 0
        pinged = False  # a ping sent, nothing received since
        while True:
            for event in self._conn.events():
                if isinstance(event, TextMessage | BytesMessage):
                    if self._conn.state is not ConnectionState.OPEN:
                        continue  # we are closing: read on (for the reply), keep nothing
                    if isinstance(event, TextMessage):
                        texts.append(event.data)
                    else:
                        blobs.append(bytes(event.data))
                    size += len(event.data)
                    if size > self._max_message:
                        texts, blobs, size = [], [], 0
                        await self._close_for(CloseReason.MESSAGE_TOO_BIG,
                                              f"message larger than {self._max_message} bytes")
                    elif event.message_finished:
                        message = "".join(texts) if texts else b"".join(blobs)
                        texts, blobs, size = [], [], 0
                        await self._to_receiver.send(message)
                elif isinstance(event, Ping):
                    if self._conn.state is ConnectionState.OPEN:
                        await self._write(self._conn.send(event.response()))
                elif isinstance(event, CloseConnection):
                    if self._conn.state is ConnectionState.REMOTE_CLOSING:
                        await self._write(self._conn.send(event.response()))
                    elif self._conn.state is ConnectionState.OPEN:
                        # A protocol error wsproto found: close with its code.
                        await self._close_for(event.code, event.reason or "")
                    return
            with trio.move_on_after(self._idle_s) as idle:
                data = await self._stream.receive_some(MAX_READ)
            if idle.cancelled_caught:
                if self._conn.state is not ConnectionState.OPEN:
                    continue  # closing: the close's own deadline bounds the wait
                if pinged:
                    await self._close_for(CloseReason.GOING_AWAY, "no answer to a ping")
                else:
                    await self._write(self._conn.send(Ping(payload=b"idle")))
                    pinged = True
                continue
            if not data:
                return
            pinged = False
            self._conn.receive_data(bytes(data))

    async def _close_for(self, code: int, reason: str) -> None:
        """Close from our side; the reader reads on (discarding) until the
        client's reply, for at most ``CLOSE_REPLY_S``."""
        self._reading.deadline = min(self._reading.deadline,
                                     trio.current_time() + CLOSE_REPLY_S)
        try:
            await self._write(self._conn.send(CloseConnection(code=code, reason=reason)))
        except WebSocketClosed:
            pass
