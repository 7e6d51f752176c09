"""Subscriber.write_now: a frame written from the publishing task when nothing
is queued, never ahead of what is."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import trio

from supervisor.bus import EventBus, Subscriber, envelope


def _queued(sub: Subscriber) -> list[str | bytes]:
    out: list[str | bytes] = []
    while True:
        try:
            out.append(sub.receive_nowait())
        except trio.WouldBlock:
            return out


async def test_a_frame_goes_out_at_once_or_its_tail_is_queued() -> None:
    sub = EventBus(queue_size=8).subscriber()
    answers: list[bytes | None] = [b"", None, b"tail"]
    written: list[str] = []

    def write_now(frame: str) -> bytes | None:
        written.append(frame)
        return answers.pop(0)

    sub.write_now = write_now
    assert sub.offer("one")  # all of it went
    assert _queued(sub) == []
    assert sub.offer("two")  # nothing went: queued as it is
    # Something is queued now: the next frame waits behind it, write_now is not asked.
    assert sub.offer("three")
    assert written == ["one", "two"]
    assert _queued(sub) == ["two", "three"]
    assert sub.offer("four")  # part went: its tail (pre-framed bytes) is queued
    assert _queued(sub) == [b"tail"]
    assert written == ["one", "two", "four"]


async def test_publish_writes_to_each_idle_subscriber() -> None:
    bus = EventBus(queue_size=8)
    subs = [bus.subscriber() for _ in range(3)]
    written: list[tuple[int, str]] = []

    def writer(i: int) -> Callable[[str], bytes | None]:
        def write_now(frame: str) -> bytes | None:
            written.append((i, frame))
            return b""
        return write_now

    for i, sub in enumerate(subs):
        sub.subscribe("s")
        sub.write_now = writer(i)
    bus.publish("s", "session.cancellation_changed", {"session_id": "s"})
    assert sorted(i for i, _ in written) == [0, 1, 2]
    assert len({frame for _, frame in written}) == 1  # one encoded frame for all
    assert all(_queued(sub) == [] for sub in subs)


def test_notification_ids_are_distinct_version_4_uuids() -> None:
    ids = [json.loads(envelope("notification", "x", {}))["id"] for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
