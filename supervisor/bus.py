"""Session-scoped pub/sub with bounded, never-blocking delivery; no I/O.

A notification is encoded once (the WebSocket envelope, as text) and queued
in the mailbox (``Subscriber``) of every consumer subscribed to its session:
publishing never awaits and calls nothing outside this module, so it can run
inside the cancel path without being slowed by any client, and the order of
publishes is the order subscribers see.  A connection's mailbox is read by
its writer (``web.outbox``), which writes what is queued in one write.

``publish_all`` delivers a batch (a turn's close: its notifications and the
answers of the cancels it settled, ``Reply``) and wakes each consumer once,
after the whole batch.  A notification may carry a second variant (a streamed
text message's append, beside the whole message): each subscriber gets the
variant its subscription to the session asked for, and each variant is
encoded at most once, only if some subscriber takes it.  A mailbox that
cannot take more is marked ``overflowed``: it is counted and logged once, and
offered nothing more; its connection drops it, and the client resyncs from
snapshots when it reconnects.
"""

from __future__ import annotations

import json
import logging
import random
import time
import weakref
from collections import defaultdict, deque
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

import trio

__all__ = ["EventBus", "Note", "Reply", "Subscriber", "envelope", "timestamp"]

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


#: One notification: (bus key, action, payload, append) — ``append`` the
#: (action, payload) that subscribers asking for text appends get instead.
Note = tuple[str, str, dict[str, Any], "tuple[str, dict[str, Any]] | None"]
#: One answer to one request of one connection: (its mailbox, the request's
#: id, the envelope's type, action and payload).
Reply = tuple["Subscriber", str, str, str, dict[str, Any]]


class Subscriber:
    """One consumer's mailbox: the bus (and, for a connection, the gateway's
    answers) put frames in, in order; its consumer takes them (``receive``,
    ``receive_nowait``; a connection's writer ``ready`` and ``take``).
    Bounded: once ``queue_size`` frames wait, it is ``overflowed`` and closed,
    and offered nothing more."""

    def __init__(self, bus: EventBus, queue_size: int) -> None:
        self._bus = bus
        self._queue_size = queue_size
        self._items: deque[str] = deque()
        self._lot = trio.lowlevel.ParkingLot()
        self._closed = False
        self.overflowed = False
        #: Answers owed to this consumer's requests by an operation that
        #: answers them itself when it settles (``Reply``): requests in flight.
        self.owed = 0

    @property
    def sessions(self) -> set[str]:
        return self._bus.sessions_of(self)

    @property
    def text_appends(self) -> set[str]:
        """The sessions followed with ``text_appends``."""
        return self._bus.sessions_of(self, text_appends=True)

    @property
    def closed(self) -> bool:
        return self._closed

    def offer(self, frame: str) -> bool:
        """Queue a frame and wake the consumer; False if it could not (full:
        ``overflowed``, or closed)."""
        if not self._put(frame):
            return False
        self._wake()
        return True

    def _put(self, frame: str) -> bool:
        if self.overflowed or self._closed:
            return False
        if len(self._items) >= self._queue_size:
            self.overflowed = True
            self._close_queue()
            return False
        self._items.append(frame)
        return True

    def _wake(self) -> None:
        if self._lot:
            self._lot.unpark()

    def __len__(self) -> int:
        return len(self._items)

    async def ready(self) -> bool:
        """Wait until a frame is queued (True) or the mailbox is closed and
        empty (False)."""
        await trio.lowlevel.checkpoint()
        while not self._items:
            if self._closed:
                return False
            await self._lot.park()
        return True

    def take(self, most: int) -> list[str]:
        """Up to ``most`` queued frames, oldest first."""
        n = min(len(self._items), most)
        return [self._items.popleft() for _ in range(n)]

    async def receive(self) -> str:
        """The next queued frame (``trio.EndOfChannel`` once closed and empty)."""
        if not await self.ready():
            raise trio.EndOfChannel
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
        """No more frames; the consumer takes what is queued, then is told."""
        self._bus.unsubscribe_all(self)
        self._close_queue()


class EventBus:
    def __init__(self, *, queue_size: int = 1024) -> None:
        #: How many frames a subscriber may hold (a connection's too).
        self.queue_size = queue_size
        #: Session → its subscribers, each with whether it takes text appends.
        self._subscribers: defaultdict[str, dict[Subscriber, bool]] = defaultdict(dict)
        #: Subscriber → the sessions it follows (for ``unsubscribe_all``).
        self._following: dict[Subscriber, set[str]] = {}
        self.dropped_subscribers = 0
        #: Subscribers dropped for falling behind (counted once each).
        self._dropped: weakref.WeakSet[Subscriber] = weakref.WeakSet()

    def subscriber(self) -> Subscriber:
        """A mailbox of this bus's bound (not yet subscribed to anything)."""
        return Subscriber(self, self.queue_size)

    def subscribe(self, session_id: str, sink: Subscriber, *,
                  text_appends: bool = False) -> None:
        """Deliver the session's notifications to ``sink`` (again: the latest
        call's ``text_appends`` holds)."""
        self._subscribers[session_id][sink] = text_appends
        self._following.setdefault(sink, set()).add(session_id)

    def unsubscribe(self, session_id: str, sink: Subscriber) -> None:
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

    def unsubscribe_all(self, sink: Subscriber) -> None:
        for session_id in list(self._following.get(sink, ())):
            self.unsubscribe(session_id, sink)

    def sessions_of(self, sink: Subscriber, *, text_appends: bool = False) -> set[str]:
        """The sessions ``sink`` follows (with ``text_appends``: those it takes
        appends of)."""
        return {sid for sid in self._following.get(sink, ())
                if not text_appends or self._subscribers[sid][sink]}

    def subscriber_count(self, session_id: str) -> int:
        return len(self._subscribers.get(session_id, ()))

    def publish(self, session_id: str, action: str, payload: dict[str, Any],
                append: tuple[str, dict[str, Any]] | None = None) -> None:
        """One notification to the session's subscribers (``publish_all``'s)."""
        self.publish_all(((session_id, action, payload, append),))

    def publish_all(self, notes: Sequence[Note], replies: Sequence[Reply] = ()) -> None:
        """Notifications, in order, then answers: each frame queued for its
        subscribers, and each subscriber woken once, after all of them (its
        consumer takes them together: a connection writes them in one write).
        Never raises, never waits."""
        woken: dict[Subscriber, None] = {}
        for session_id, action, payload, append in notes:
            sinks = self._subscribers.get(session_id)
            if not sinks:
                continue
            full: str | None = None
            short: str | None = None
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
                self._deliver(sink, frame, woken)
        # Answers of one operation differ only in their ids: encoded once, and
        # each id put in front (a storm of joined duplicates is cheap).
        tails: dict[int, str] = {}
        for sink, request_id, kind, action, payload in replies:
            sink.owed -= 1
            if not request_id:
                frame = envelope(kind, action, payload)
            else:
                tail = tails.get(id(payload))
                if tail is None:
                    whole = envelope(kind, action, payload, "x")
                    tail = tails[id(payload)] = whole[len('{"id":"x"'):]
                frame = '{"id":' + json.dumps(request_id) + tail
            self._deliver(sink, frame, woken)
        for sink in woken:
            sink._wake()

    def _deliver(self, sink: Subscriber, frame: str, woken: dict[Subscriber, None]) -> None:
        if sink._put(frame):
            woken[sink] = None
        elif sink.overflowed and sink not in self._dropped:
            self._dropped.add(sink)
            self.dropped_subscribers += 1
            log.warning("dropped a subscriber that fell %d frames behind", self.queue_size)
