"""Session-scoped pub/sub with bounded, never-blocking delivery.

A notification is encoded once (the WebSocket envelope, as text) and queued for
every subscriber of its session (``Subscriber.offer``): publishing never awaits,
so it can run inside the cancel path without being slowed by any client, and
the order of publishes is the order subscribers see.  A publish may carry a
second variant of its notification (a streamed text message's append, beside
the whole message): each subscriber gets the variant its subscription to the
session asked for, and each variant is encoded at most once, only if some
subscriber takes it.  A subscriber whose
queue is full is marked ``overflowed`` and its queue closed; its connection
drops it, and the client resyncs from snapshots when it reconnects.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import trio

__all__ = ["EventBus", "Subscriber", "WriteNow", "envelope", "timestamp"]

log = logging.getLogger(__name__)


_random = random.Random()


#: (second, its text, millisecond, its text): the last second formatted and the
#: last timestamp, so a stream of notifications formats a second once.  One
#: tuple, swapped whole (a reader on another thread never sees half of it).
_cache: tuple[int, str, int, str] = (-1, "", -1, "")


def timestamp() -> str:
    """Now, UTC, ISO 8601 to the millisecond (truncated), ``Z``."""
    global _cache
    ms = time.time_ns() // 1_000_000
    sec_was, sec_text, ms_was, ms_text = _cache
    if ms == ms_was:
        return ms_text
    sec, milli = divmod(ms, 1000)
    if sec != sec_was:
        sec_text = datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    text = f"{sec_text}.{milli:03d}Z"
    _cache = (sec, sec_text, ms, text)
    return text


#: The version (4) and variant (RFC 4122) bits of a random UUID, as ``uuid.UUID``
#: sets them: cleared by the mask, then set.
_UUID4_MASK: Final = ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_BITS: Final = (0x4000 << 64) | (0x8000 << 48)


def _new_id() -> str:
    """A random (version 4) UUID for a notification: from the PRNG, not
    ``os.urandom`` (a syscall per notification; these ids are not secrets),
    formatted directly (no ``uuid.UUID`` built per notification)."""
    h = "%032x" % (_random.getrandbits(128) & _UUID4_MASK | _UUID4_BITS)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def envelope(kind: str, action: str, payload: Any, msg_id: str | None = None) -> str:
    return json.dumps(
        {"id": msg_id or _new_id(), "type": kind, "action": action,
         "payload": payload, "timestamp": timestamp()},
        separators=(",", ":"),
    )


#: Writes frames (and pre-framed tails) to the client at once, in one write, if
#: it can (the gateway's, for its own WebSocket): None if nothing was written
#: (queue them), else the unwritten tail (pre-framed bytes; empty: all went).
WriteNow = Callable[[Sequence[str | bytes]], bytes | None]


class Subscriber:
    """One client's outbound queue.  The gateway's writer task drains it with
    ``receive`` (frames, and pre-framed bytes: the tail of what ``write_now``
    began); ``flush`` may write it out from the calling task instead.

    A deque and a parking lot, not a memory channel: a channel hands the first
    frame straight to a waiting receiver, so once the writer is woken nothing
    queued can be written by anyone else, and a cancel's answer would always
    wait for the writer's turn (a scheduler round)."""

    def __init__(self, bus: EventBus, queue_size: int) -> None:
        self._bus = bus
        self._queue_size = queue_size
        self._items: deque[str | bytes] = deque()
        self._lot = trio.lowlevel.ParkingLot()
        self._closed = False
        #: Set by the gateway: with nothing queued, a frame is written from the
        #: publishing task itself (a fan-out is then one syscall per
        #: subscriber, not a writer task woken per subscriber).
        self.write_now: WriteNow | None = None
        self.sessions: set[str] = set()
        #: Sessions subscribed with ``text_appends``: they get a publish's
        #: append variant, when it has one, instead of its full frame.
        self.text_appends: set[str] = set()
        self.overflowed = False

    def offer(self, frame: str) -> bool:
        """Queue a frame without waiting; False (and marked overflowed) if full.
        With nothing ahead of it, it is written at once if it can be (``flush``)."""
        if self.overflowed or self._closed:
            return False
        if len(self._items) >= self._queue_size:
            self.overflowed = True
            self._close_queue()
            return False
        self._items.append(frame)
        if len(self._items) == 1:
            self.flush()
        if self._items and self._lot:
            self._lot.unpark()
        return True

    def flush(self) -> None:
        """Write everything queued now, from this task, in one write, if the
        connection takes it at once (``write_now``: its writer idle); else the
        writer sends it as usual.  Never waits."""
        if (not self._items or self.write_now is None or self.overflowed
                or self._bus.coalesce):
            return
        tail = self.write_now(tuple(self._items))
        if tail is None:
            return
        self._items.clear()
        if tail:
            self._items.append(tail)

    async def receive(self) -> str | bytes:
        """The next queued item (``trio.EndOfChannel`` once closed and empty)."""
        if self._items:
            await trio.lowlevel.checkpoint()
        # Taken only after the last checkpoint: a ``flush`` in between must not
        # write what follows an item held here.
        while not self._items:
            if self._closed:
                raise trio.EndOfChannel
            await self._lot.park()
        return self._items.popleft()

    def receive_nowait(self) -> str | bytes:
        """``receive``, or ``trio.WouldBlock`` if nothing is queued."""
        if self._items:
            return self._items.popleft()
        if self._closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    def _close_queue(self) -> None:
        self._closed = True
        self._lot.unpark_all()

    def subscribe(self, session_id: str, *, text_appends: bool = False) -> None:
        """Follow a session (again: the latest call's ``text_appends`` holds)."""
        self.sessions.add(session_id)
        if text_appends:
            self.text_appends.add(session_id)
        else:
            self.text_appends.discard(session_id)
        self._bus._subscribers[session_id].add(self)

    def unsubscribe(self, session_id: str) -> None:
        self.sessions.discard(session_id)
        self.text_appends.discard(session_id)
        subs = self._bus._subscribers.get(session_id)
        if subs is not None:
            subs.discard(self)
            if not subs:
                del self._bus._subscribers[session_id]

    def close(self) -> None:
        for session_id in list(self.sessions):
            self.unsubscribe(session_id)
        self._close_queue()


class EventBus:
    def __init__(self, *, queue_size: int = 1024) -> None:
        self.queue_size = queue_size
        self._subscribers: defaultdict[str, set[Subscriber]] = defaultdict(set)
        self.published = 0
        self.dropped_subscribers = 0
        #: Inside ``coalescing``: frames are queued, never written from the publisher.
        self.coalesce = False

    @contextlib.contextmanager
    def coalescing(self) -> Iterator[None]:
        """Publishes in a row (no checkpoint between them): each subscriber's
        frames are queued, and its writer, woken after, sends them in one write
        instead of one syscall each from here."""
        was, self.coalesce = self.coalesce, True
        try:
            yield
        finally:
            self.coalesce = was

    def subscriber(self) -> Subscriber:
        return Subscriber(self, self.queue_size)

    def subscriber_count(self, session_id: str) -> int:
        return len(self._subscribers.get(session_id, ()))

    def publish(self, session_id: str, action: str, payload: dict[str, Any],
                append: tuple[str, dict[str, Any]] | None = None) -> None:
        """Deliver a notification to the session's subscribers.  Never raises, never waits.

        ``append``: the (action, payload) that subscribers asking for text
        appends get instead of (action, payload)."""
        subs = self._subscribers.get(session_id)
        self.published += 1
        if not subs:
            return
        full: str | None = None
        short: str | None = None
        for sub in list(subs):
            if sub.overflowed:
                continue  # already dropped (counted and logged once); its connection is closing
            if append is not None and session_id in sub.text_appends:
                if short is None:
                    short = envelope("notification", append[0], append[1])
                frame = short
            else:
                if full is None:
                    full = envelope("notification", action, payload)
                frame = full
            if not sub.offer(frame) and sub.overflowed:
                self.dropped_subscribers += 1
                log.warning("dropped a subscriber that fell %d frames behind", self.queue_size)
