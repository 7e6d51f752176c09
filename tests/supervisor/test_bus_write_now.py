"""Subscriber.write_now: a frame written from the publishing task when nothing
is queued, never ahead of what is."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence

import trio
import trio.testing

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

    def write_now(frames: Sequence[str | bytes]) -> bytes | None:
        assert len(frames) == 1 and isinstance(frames[0], str)
        written.append(frames[0])
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

    def writer(i: int) -> Callable[[Sequence[str | bytes]], bytes | None]:
        def write_now(frames: Sequence[str | bytes]) -> bytes | None:
            (frame,) = frames
            assert isinstance(frame, str)
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


async def test_flush_writes_everything_queued_in_one_write_or_leaves_it() -> None:
    bus = EventBus(queue_size=8)
    sub = bus.subscriber()
    calls: list[list[str | bytes]] = []
    answers: list[bytes | None] = [None, None, b"tail", b""]

    def write_now(frames: Sequence[str | bytes]) -> bytes | None:
        calls.append(list(frames))
        return answers.pop(0)

    sub.write_now = write_now
    assert sub.offer("one")  # write_now declined: queued
    assert sub.offer("two")
    with bus.coalescing():
        sub.flush()  # more may come in this step: not yet
    assert calls == [["one"]]
    sub.flush()  # declined (the writer busy): all of it stays, in order
    assert calls[-1] == ["one", "two"]
    sub.flush()  # part went: only its tail is left, ahead of anything offered next
    assert calls[-1] == ["one", "two"]
    assert sub.offer("three")
    sub.flush()
    assert calls[-1] == [b"tail", "three"]
    assert _queued(sub) == []


async def test_a_woken_writer_takes_nothing_a_flush_wrote_and_keeps_the_order() -> None:
    sub = EventBus(queue_size=8).subscriber()
    got: list[str | bytes] = []

    async def writer() -> None:
        while True:
            try:
                got.append(await sub.receive())
            except trio.EndOfChannel:
                return

    flushed: list[list[str | bytes]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer)
        await trio.testing.wait_all_tasks_blocked()
        assert sub.offer("a")  # the writer is woken (no write_now yet)...
        assert sub.offer("b")

        def write_now(frames: Sequence[str | bytes]) -> bytes | None:
            flushed.append(list(frames))
            return b""

        sub.write_now = write_now
        sub.flush()  # ...but before it runs, both went out from here
        await trio.testing.wait_all_tasks_blocked()
        sub.write_now = None
        assert sub.offer("c")
        await trio.testing.wait_all_tasks_blocked()
        sub.close()
    assert flushed == [["a", "b"]]
    assert got == ["c"]
