"""Session-scoped pub/sub with bounded, never-blocking delivery; no I/O.

A notification is encoded once (the WebSocket envelope, as text) and offered
to every sink subscribed to its session (``Sink.offer``): publishing never
awaits, so it can run inside the cancel path without being slowed by any
client, and the order of publishes is the order subscribers see.  What a sink
does with a frame is its own: the gateway's (``web.outbox``) writes it to its
connection or queues it for its writer; ``Subscriber`` here only queues it,
for a consumer in this process.  A publish may carry a
second variant of its notification (a streamed text message's append, beside
the whole message): each subscriber gets the variant its subscription to the
session asked for, and each variant is encoded at most once, only if some
subscriber takes it.  A sink that cannot take more is marked
``overflowed`` (its ``offer`` says False): it is counted and logged once, and
offered nothing more; its connection drops it, and the client resyncs from
snapshots when it reconnects.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import time
from collections import defaultdict, deque
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Final, Protocol

import trio

__all__ = ["EventBus", "Sink", "Subscriber", "envelope", "timestamp"]

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


class Sink(Protocol):
    """Where the bus delivers: never waits, never raises."""

    #: True once the sink could not take a frame: it is offered nothing more.
    overflowed: bool

    def offer(self, frame: str, *, batched: bool = False) -> bool:
        """Take a frame; False if it could not (full: ``overflowed``, or closed).
        ``batched``: more frames follow in this step (``EventBus.coalescing``),
        so a sink that writes may wait for them and write them together."""
        ...


class Subscriber:
    """A sink that only queues: a consumer in this process takes its frames
    with ``receive`` or ``receive_nowait``.  Bounded: once ``queue_size``
    frames wait, it is ``overflowed`` and closed."""

    def __init__(self, bus: EventBus, queue_size: int) -> None:
        self._bus = bus
        self._queue_size = queue_size
        self._items: deque[str] = deque()
        self._lot = trio.lowlevel.ParkingLot()
        self._closed = False
        self.overflowed = False

    @property
    def sessions(self) -> set[str]:
        return self._bus.sessions_of(self)

    @property
    def text_appends(self) -> set[str]:
        """The sessions followed with ``text_appends``."""
        return self._bus.sessions_of(self, text_appends=True)

    def offer(self, frame: str, *, batched: bool = False) -> bool:
        if self.overflowed or self._closed:
            return False
        if len(self._items) >= self._queue_size:
            self.overflowed = True
            self._close_queue()
            return False
        self._items.append(frame)
        if self._lot:
            self._lot.unpark()
        return True

    async def receive(self) -> str:
        """The next queued frame (``trio.EndOfChannel`` once closed and empty)."""
        await trio.lowlevel.checkpoint()
        while not self._items:
            if self._closed:
                raise trio.EndOfChannel
            await self._lot.park()
        return self._items.popleft()

    def receive_nowait(self) -> str:
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
        self._bus.subscribe(session_id, self, text_appends=text_appends)

    def unsubscribe(self, session_id: str) -> None:
        self._bus.unsubscribe(session_id, self)

    def close(self) -> None:
        self._bus.unsubscribe_all(self)
        self._close_queue()


class EventBus:
    def __init__(self, *, queue_size: int = 1024) -> None:
        #: How many frames a subscriber may hold (``Subscriber``; the gateway's
        #: connections take the same bound).
        self.queue_size = queue_size
        #: Session → its sinks, each with whether it takes text appends.
        self._subscribers: defaultdict[str, dict[Sink, bool]] = defaultdict(dict)
        #: Sink → the sessions it follows (for ``unsubscribe_all``).
        self._following: dict[Sink, set[str]] = {}
        self.published = 0
        self.dropped_subscribers = 0
        #: Inside ``coalescing``: frames are offered ``batched``.
        self._coalesce = False

    @contextlib.contextmanager
    def coalescing(self) -> Iterator[None]:
        """Publishes in a row (no checkpoint between them): each frame is
        offered ``batched``, so a sink that writes sends them in one write
        instead of one each."""
        was, self._coalesce = self._coalesce, True
        try:
            yield
        finally:
            self._coalesce = was

    def subscriber(self) -> Subscriber:
        """A queueing sink of this bus's bound (not yet subscribed to anything)."""
        return Subscriber(self, self.queue_size)

    def subscribe(self, session_id: str, sink: Sink, *, text_appends: bool = False) -> None:
        """Deliver the session's notifications to ``sink`` (again: the latest
        call's ``text_appends`` holds)."""
        self._subscribers[session_id][sink] = text_appends
        self._following.setdefault(sink, set()).add(session_id)

    def unsubscribe(self, session_id: str, sink: Sink) -> None:
        sinks = self._subscribers.get(session_id)
        if sinks is not None:
            sinks.pop(sink, None)
            if not sinks:
                del self._subscribers[session_id]
        following = self._following.get(sink)
        if following is not None:
            following.discard(session_id)
            if not following:
                del self._following[sink]

    def unsubscribe_all(self, sink: Sink) -> None:
        for session_id in list(self._following.get(sink, ())):
            self.unsubscribe(session_id, sink)

    def sessions_of(self, sink: Sink, *, text_appends: bool = False) -> set[str]:
        """The sessions ``sink`` follows (with ``text_appends``: those it takes
        appends of)."""
        return {sid for sid in self._following.get(sink, ())
                if not text_appends or self._subscribers[sid][sink]}

    def subscriber_count(self, session_id: str) -> int:
        return len(self._subscribers.get(session_id, ()))

    def publish(self, session_id: str, action: str, payload: dict[str, Any],
                append: tuple[str, dict[str, Any]] | None = None) -> None:
        """Deliver a notification to the session's subscribers.  Never raises, never waits.

        ``append``: the (action, payload) that subscribers asking for text
        appends get instead of (action, payload)."""
        sinks = self._subscribers.get(session_id)
        self.published += 1
        if not sinks:
            return
        full: str | None = None
        short: str | None = None
        batched = self._coalesce
        for sink, appends in list(sinks.items()):
            if sink.overflowed:
                continue  # already dropped (counted and logged once); its connection is closing
            if append is not None and appends:
                if short is None:
                    short = envelope("notification", append[0], append[1])
                frame = short
            else:
                if full is None:
                    full = envelope("notification", action, payload)
                frame = full
            if not sink.offer(frame, batched=batched) and sink.overflowed:
                self.dropped_subscribers += 1
                log.warning("dropped a subscriber that fell %d frames behind", self.queue_size)
