"""One connection's outbound frames: the bus's sink for it, its writer, its write policy.

Every frame the connection sends (the gateway's responses and the bus's
notifications alike) is offered here, so there is one queue and one order.
How a frame leaves, in one path: a batch of frames is handed to
``ServerWebSocket.write_now``, one non-blocking write; only what the socket
did not take at once is awaited (``send_many``), by the writer task.  Who
hands a batch over is the policy:

- **from the offering task, at once** (``offer``, ``flush``), when nothing is
  queued ahead, the writer holds nothing, no request of this connection is in
  flight and the server is not closing: a fan-out is then one syscall per
  subscriber from the publisher, not a writer task woken per subscriber;
  a settled cancel's answer and the close's notifications leave in one write
  from the closing step (``flush``);
- **by the writer task** otherwise: with a request in flight it lets
  ``WRITE_AFTER_ROUNDS`` scheduler rounds pass first (a cancel's
  notifications, its pending=false and its response come from three tasks in
  consecutive rounds), so its response joins them in one write; frames
  offered ``batched`` (``EventBus.coalescing``) wait for it too.

A connection that falls ``queue_size`` frames behind is ``overflowed``;
one that takes nothing for ``send_timeout_s`` too.  Either way ``run``
closes it (1013) and returns.  A deque and a parking lot, not a memory
channel: a channel hands the first frame straight to a waiting receiver, so
once the writer is woken nothing queued could be written by anyone else.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Sequence
from typing import Final, Protocol

import trio

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
    def __init__(self, ws: FrameWriter, *, queue_size: int, requests: Requests,
                 closing: trio.Event, send_timeout_s: float) -> None:
        self._ws = ws
        self._queue_size = queue_size
        self._requests = requests
        self._closing = closing
        self._send_timeout_s = send_timeout_s
        #: Frames, and pre-framed bytes (the tail of a write the socket took
        #: only part of), in order.
        self._items: deque[str | bytes] = deque()
        self._lot = trio.lowlevel.ParkingLot()
        self._closed = False
        #: The writer has taken frames it has not finished writing.
        self._writing = False
        self.overflowed = False

    # -- the bus's Sink, and the gateway's queue ---------------------------------------

    def offer(self, frame: str, *, batched: bool = False) -> bool:
        """Queue a frame without waiting; False (and ``overflowed``) if full.
        With nothing ahead of it, it is written at once if it can be."""
        if self.overflowed or self._closed:
            return False
        if len(self._items) >= self._queue_size:
            self.overflowed = True
            self.close()
            return False
        self._items.append(frame)
        if len(self._items) == 1 and not batched:
            self.flush()
        if self._items and self._lot:
            self._lot.unpark()
        return True

    def flush(self) -> None:
        """Write everything queued now, from this task, in one write, if the
        policy lets it (see the module's docstring) and the socket takes it
        at once; else the writer sends it.  Never waits."""
        if (not self._items or self._writing or self._requests.count or self.overflowed
                or self._closing.is_set()):
            return
        tail = self._ws.write_now(tuple(self._items))
        if tail is None:
            return
        self._items.clear()
        if tail:
            self._items.append(tail)

    def close(self) -> None:
        """No more frames; the writer ends once it has written what it holds."""
        self._closed = True
        self._lot.unpark_all()

    # -- the writer ---------------------------------------------------------------------

    async def run(self) -> None:
        """Write what the policy leaves to the writer, until the outbox is
        closed, the server closes (``closing``: the gateway closes the
        socket), or the client cannot keep up (then closed with 1013)."""
        with trio.CancelScope() as deadline:
            while True:
                await trio.lowlevel.checkpoint()
                while not self._items:
                    if self._closed:
                        break
                    await self._lot.park()
                if not self._items or self.overflowed:
                    break
                self._writing = True
                if self._closing.is_set():
                    return
                # One scope per connection whose deadline moves per write: a
                # fail_after per write costs a scope and a deadline-heap entry.
                deadline.deadline = trio.current_time() + self._send_timeout_s
                if self._requests.count:
                    for _ in range(WRITE_AFTER_ROUNDS):
                        await trio.lowlevel.checkpoint()
                # Taken after the last checkpoint: everything queued by now.
                n = min(len(self._items), MAX_BATCH)
                batch = [self._items.popleft() for _ in range(n)]
                try:
                    rest = self._ws.write_now(batch)
                    if rest is None:
                        await self._ws.send_many(batch)
                    elif rest:
                        await self._ws.send_many((rest,))
                except WebSocketClosed:
                    break
                deadline.deadline = math.inf
                self._writing = False
        if deadline.cancelled_caught:
            self.overflowed = True
        if self.overflowed:
            log.warning("dropping a WebSocket client that cannot keep up")
            with trio.move_on_after(1):
                await self._ws.close(1013, "too slow: reconnect and resubscribe")
