"""One connection's outbound frames: its mailbox on the bus, its writer, its write policy.

Every frame the connection sends (the gateway's responses, the bus's
notifications and the answers an operation gives when it settles) is queued
in the connection's mailbox (``supervisor.bus.Subscriber``), so there is one
queue and one order, and one task writes: ``run``, woken once per batch the
bus delivers.  It hands what is queued to ``ServerWebSocket.write_now``, one
non-blocking write, and awaits only what the socket did not take at once
(``send_many``).  With a request of this connection in flight (one the
gateway runs, or an answer an operation owes) it lets ``WRITE_AFTER_ROUNDS``
scheduler rounds pass first, so that the request's answer and the
notifications it causes, which come from other tasks in the rounds that
follow, leave in one write.  A turn's close needs no such wait: the bus
delivers its notifications and its cancels' answers as one batch.

A connection that falls ``queue_size`` frames behind is ``overflowed``;
one that takes nothing for ``send_timeout_s`` too.  Either way ``run``
closes it (1013) and returns.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Final, Protocol

import trio

from supervisor.bus import Subscriber

from .wsconn import WebSocketClosed

__all__ = ["MAX_BATCH", "WRITE_AFTER_ROUNDS", "FrameWriter", "Outbox", "Requests"]

log = logging.getLogger(__name__)

#: Scheduler rounds the writer lets pass before it writes what is queued.
WRITE_AFTER_ROUNDS: Final = 2
#: Frames written at most in one send (a bound on one write's size and time).
MAX_BATCH: Final = 256


class FrameWriter(Protocol):
    """The connection's socket (``web.wsconn.ServerWebSocket``)."""

    def write_now(self, frames: Sequence[str | bytes]) -> bytes | None:
        """One non-blocking write of the frames (bytes: framed already): None
        if nothing was written, else what the socket did not take."""
        ...

    async def send_many(self, frames: Sequence[str | bytes]) -> None:
        """Write all of them, waiting as long as it takes (``WebSocketClosed``)."""
        ...

    async def close(self, code: int, reason: str = "") -> None: ...


class Requests(Protocol):
    """The connection's requests in flight (the gateway counts them)."""

    count: int


class Outbox:
    def __init__(self, ws: FrameWriter, mailbox: Subscriber, *, requests: Requests,
                 closing: trio.Event, send_timeout_s: float) -> None:
        self._ws = ws
        #: The connection's queue (subscribe it to what the connection follows).
        self.mailbox = mailbox
        self._requests = requests
        self._closing = closing
        self._send_timeout_s = send_timeout_s
        self._overflowed = False

    @property
    def overflowed(self) -> bool:
        return self._overflowed or self.mailbox.overflowed

    @property
    def in_flight(self) -> int:
        """Requests of this connection not answered yet."""
        return self._requests.count + self.mailbox.owed

    def offer(self, frame: str) -> bool:
        """Queue a frame for the writer; False (and ``overflowed``) if full."""
        return self.mailbox.offer(frame)

    def close(self) -> None:
        """No more frames; the writer ends once it has written what is queued."""
        self.mailbox.close()

    async def run(self) -> None:
        """Write what is queued until the mailbox is closed, the server closes
        (``closing``: the gateway closes the socket), or the client cannot keep
        up (then closed with 1013)."""
        mailbox = self.mailbox
        with trio.CancelScope() as deadline:
            while await mailbox.ready() and not mailbox.overflowed:
                if self._closing.is_set():
                    return
                # One scope per connection whose deadline moves per write: a
                # fail_after per write costs a scope and a deadline-heap entry.
                deadline.deadline = trio.current_time() + self._send_timeout_s
                if self.in_flight:
                    for _ in range(WRITE_AFTER_ROUNDS):
                        await trio.lowlevel.checkpoint()
                # Taken after the last checkpoint: everything queued by now.
                batch = mailbox.take(MAX_BATCH)
                try:
                    rest = self._ws.write_now(batch)
                    if rest is None:
                        await self._ws.send_many(batch)
                    elif rest:
                        await self._ws.send_many((rest,))
                except WebSocketClosed:
                    break
                deadline.deadline = math.inf
        if deadline.cancelled_caught:
            self._overflowed = True
        if self.overflowed:
            log.warning("dropping a WebSocket client that cannot keep up")
            with trio.move_on_after(1):
                await self._ws.close(1013, "too slow: reconnect and resubscribe")
