"""agentctl's event log: numbered entries, a replay ring, bounded fan-out to
the event-stream subscribers."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import Any

import trio

__all__ = ["EventLog", "Subscriber"]


@dataclass(eq=False)
class Subscriber:
    send: trio.MemorySendChannel[str]
    receive: trio.MemoryReceiveChannel[str]
    #: Set when the subscriber is dropped (it fell behind, or agentctl stops).
    dropped: str | None = None
    #: The last seq queued to it.
    last_seq: int = 0
    #: Who it says it is (``?owner=``): a connected owner keeps its session.
    owner: str | None = None


class EventLog:
    """Numbered log entries, a replay ring, and bounded fan-out.

    ``publish`` never blocks: each subscriber has ``buffer`` frames of room;
    one that has no room is dropped (its channel closed after what it already
    has, ``dropped`` says why), so a slow reader never slows the agent or a
    cancel.  Subscribing and taking the replay happen without a checkpoint in
    between, so nothing falls between the backlog and the live stream.
    """

    def __init__(self, *, buffer: int, replay: int) -> None:
        self.buffer = buffer
        self.last_seq = 0
        self._ring: deque[tuple[int, str]] = deque(maxlen=replay)
        self.subscribers: set[Subscriber] = set()

    @property
    def oldest_seq(self) -> int:
        """The oldest seq still replayable (``last_seq + 1`` when none is)."""
        return self._ring[0][0] if self._ring else self.last_seq + 1

    def publish(self, frame: dict[str, Any], *, turn: str | None) -> int:
        self.last_seq += 1
        seq = self.last_seq
        data = json.dumps({"seq": seq, "turn": turn, **frame}, default=str)
        self._ring.append((seq, data))
        for sub in list(self.subscribers):
            try:
                sub.send.send_nowait(data)
                sub.last_seq = seq
            except trio.WouldBlock:
                self.drop(sub, f"subscriber fell behind: more than {self.buffer} frames queued; "
                               f"reconnect with ?after={sub.last_seq}")
            except trio.BrokenResourceError:
                self.subscribers.discard(sub)
        return seq

    def subscribe(self, after: int | None, *, owner: str | None = None,
                  ) -> tuple[Subscriber, list[str], tuple[int, int] | None]:
        """A new subscriber, the backlog after ``after`` (None: live only), and
        the range it asked for that is no longer kept."""
        send, receive = trio.open_memory_channel[str](self.buffer)
        sub = Subscriber(send=send, receive=receive, last_seq=self.last_seq, owner=owner)
        backlog: list[str] = []
        gap: tuple[int, int] | None = None
        if after is not None and after < self.last_seq:
            oldest = self.oldest_seq
            if after + 1 < oldest:
                gap = (after + 1, oldest - 1)
            backlog = [data for seq, data in self._ring if seq > after]
        self.subscribers.add(sub)
        return sub, backlog, gap

    def drop(self, sub: Subscriber, reason: str) -> None:
        if sub.dropped is None:
            sub.dropped = reason
        self.subscribers.discard(sub)
        sub.send.close()

    def close(self, reason: str) -> None:
        for sub in list(self.subscribers):
            self.drop(sub, reason)
