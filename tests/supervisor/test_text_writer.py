"""The TextWriter (issue 19): every session's streamed text written together,
at most every period — one transaction, then the notifications queued together
(one write per connection) — with a quiet stream's first text going at once, a
turn's own flush in order with it, and a failed write told to its execution.
Transactions are counted in the database's write-ahead log (tests/support/wal.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio
import trio.testing

from protocols.events import MessageChunk
from supervisor.bus import EventBus, Subscriber
from supervisor.models import Message, TextAppend
from supervisor.notify import Notifier
from supervisor.storage.store import ClosedTurn, Store
from supervisor.turn.text_writer import TextWriter
from supervisor.turn.transcript import Transcript, TurnText
from tests.support.bus_frames import queued_json
from tests.support.wal import WalCommits

PERIOD_S = 0.05


class Recording(Subscriber):
    """A mailbox that counts how often its consumer is woken: a connection's
    writer writes what is queued once per wake-up."""

    def __init__(self, bus: EventBus) -> None:
        super().__init__(bus, bus.queue_size)
        self.wakes = 0

    def _wake(self) -> None:
        self.wakes += 1
        super()._wake()


class Rig:
    def __init__(self, tmp_path: Path, sessions: int) -> None:
        self.bus = EventBus()
        self.store = Store.open(tmp_path / "t.db", Notifier(self.bus))
        db = self.store.db
        task = db.create_task(db.ensure_workspace("default"), "t").id
        self.turns: list[tuple[Transcript, TurnText]] = []
        self.sub = Recording(self.bus)
        for _ in range(sessions):
            sid = db.create_session(task, "mock").id
            turn_row, *_ = db.open_turn(sid, "hi")
            self.sub.subscribe(sid, text_appends=True)
            self.turns.append((Transcript(self.store, self.store.notify, sid),
                               TurnText(session_id=sid, turn_id=turn_row.id)))
        self.writer = TextWriter(self.store, PERIOD_S)
        self.failures: list[Exception] = []

    async def say(self, i: int, text: str) -> None:
        """What the pump does with a chunk outside agentctl: buffer, mark."""
        transcript, turn = self.turns[i]
        await transcript.record(turn, MessageChunk(text=text))
        self.writer.mark(transcript, turn, self.failures.append)

    def content(self, i: int) -> list[str]:
        sid = self.turns[i][1].session_id
        return [m.content for m in self.store.db.list_messages(sid) if m.role == "agent"]


async def test_text_marked_within_a_period_is_one_transaction_and_one_write(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    rig = Rig(tmp_path, 3)
    async with trio.open_nursery() as nursery:
        await nursery.start(rig.writer.run)
        # Each stream's first words start a message, written at once (after a quiet spell).
        for i in range(3):
            await rig.say(i, f"s{i}a ")
        await trio.sleep(PERIOD_S * 2)
        assert [rig.content(i) for i in range(3)] == [["s0a "], ["s1a "], ["s2a "]]
        queued_json(rig.sub)
        wakes = rig.sub.wakes
        wal = WalCommits(tmp_path / "t.db")
        # After a quiet spell: the text goes at once, all three sessions' together.
        for i in range(3):
            await rig.say(i, f"s{i}b ")
        await trio.sleep(PERIOD_S / 100)
        assert (rig.writer.batches, rig.writer.messages) == (1, 3)
        first = trio.current_time()
        await trio.sleep(PERIOD_S / 5)
        for i in (0, 2):
            await rig.say(i, f"s{i}c ")
            await trio.sleep(PERIOD_S / 5)
        # Text marked within the period waits for its end.
        assert rig.writer.batches == 1
        while rig.writer.batches == 1:
            await trio.sleep(PERIOD_S / 50)
        assert trio.current_time() - first >= PERIOD_S
        nursery.cancel_scope.cancel()
    assert (rig.writer.batches, rig.writer.messages) == (2, 5)
    assert wal.since() == 2  # one transaction per batch
    assert [rig.content(i) for i in range(3)] == [["s0a s0b s0c "], ["s1a s1b "],
                                                  ["s2a s2b s2c "]]
    # Each batch's appends, of every session, reach a connection together: one
    # wake-up (one write) per batch, not one per message.
    assert rig.sub.wakes - wakes == 2
    frames = queued_json(rig.sub)
    assert [(f["action"], f["payload"]["offset"], f["payload"]["text"]) for f in frames] == [
        ("session.message.appended", 4, "s0b "), ("session.message.appended", 4, "s1b "),
        ("session.message.appended", 4, "s2b "), ("session.message.appended", 8, "s0c "),
        ("session.message.appended", 8, "s2c ")]


async def test_a_turns_own_flush_waits_for_the_batch_and_follows_it(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    """A turn's end flushes its text itself: while the writer's transaction
    waits for the connection, that flush waits too, and lands after it."""
    rig = Rig(tmp_path, 1)
    transcript, turn = rig.turns[0]
    async with trio.open_nursery() as nursery:
        await nursery.start(rig.writer.run)
        await rig.say(0, "one ")
        await trio.sleep(PERIOD_S * 2)
        queued_json(rig.sub)
        async with rig.store.runner._limiter:  # the connection is busy elsewhere
            await rig.say(0, "two ")
            await trio.sleep(PERIOD_S * 2)
            assert turn.writing is not None  # the batch took it and waits
            await transcript.record(turn, MessageChunk(text="three"))
            nursery.start_soon(transcript.flush, turn)
            await trio.sleep(PERIOD_S)
        await trio.sleep(PERIOD_S * 2)
        nursery.cancel_scope.cancel()
    frames = queued_json(rig.sub)
    assert [(f["payload"]["offset"], f["payload"]["text"]) for f in frames] == [
        (4, "two "), (8, "three")]
    assert rig.content(0) == ["one two three"]


async def test_a_failed_write_is_told_and_its_text_goes_whole_with_the_next(
        tmp_path: Path, autojump_clock: trio.testing.MockClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig(tmp_path, 1)
    async with trio.open_nursery() as nursery:
        await nursery.start(rig.writer.run)
        await rig.say(0, "one ")
        await trio.sleep(PERIOD_S * 2)
        queued_json(rig.sub)

        def refused(*args: object) -> None:
            raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(rig.store.db, "update_messages", refused)
        await rig.say(0, "two ")
        await trio.sleep(PERIOD_S * 2)
        assert [str(e) for e in rig.failures] == ["disk I/O error"]
        assert queued_json(rig.sub) == []  # nothing announced that was not written
        monkeypatch.undo()
        await rig.say(0, "three")
        await trio.sleep(PERIOD_S * 2)
        nursery.cancel_scope.cancel()
    frames = queued_json(rig.sub)
    # The append would skip "two ", never announced: the message goes whole.
    assert [f["action"] for f in frames] == ["session.message.updated"]
    assert frames[0]["payload"]["message"]["content"] == "one two three"
    assert rig.content(0) == ["one two three"]


async def test_a_turns_last_text_is_written_in_its_close(tmp_path: Path) -> None:
    """The close takes the text the turn buffered since the last batch: one
    transaction for both, and its append announced before the close's frames."""
    rig = Rig(tmp_path, 1)
    transcript, turn = rig.turns[0]
    await transcript.flush(turn)  # nothing buffered: nothing written
    await rig.say(0, "first ")
    await transcript.flush(turn)
    await transcript.record(turn, MessageChunk(text="last"))
    queued_json(rig.sub)
    wal = WalCommits(tmp_path / "t.db")
    text = Transcript.take_updates(turn)
    assert text is not None and not any(turn.pending_text.values())
    closed = await rig.store.close_turn(
        turn.turn_id, state="cancelled", stop_reason="cancelled",
        status=("Turn cancelled by user", {"cancelled": True, "variant": "warning"}), text=text)
    assert closed is not None and closed.session is not None
    assert wal.since() == 1
    assert rig.content(0) == ["first last"]
    assert queued_json(rig.sub) == []  # the store publishes nothing: the closer does, once
    wakes = rig.sub.wakes
    _publish(rig, turn.turn_id, text, closed)
    frames = queued_json(rig.sub)
    assert [f["action"] for f in frames] == [
        "session.message.appended", "session.message.added", "session.state_changed",
        "session.turn.completed"]
    assert (frames[0]["payload"]["offset"], frames[0]["payload"]["text"]) == (6, "last")
    assert rig.sub.wakes - wakes == 1  # together, for the connection's one write


async def test_text_taken_for_a_close_someone_else_made_is_still_written(
        tmp_path: Path) -> None:
    rig = Rig(tmp_path, 1)
    transcript, turn = rig.turns[0]
    await rig.say(0, "first ")
    await transcript.flush(turn)
    assert await rig.store.close_turn(turn.turn_id, state="completed",
                                      stop_reason="end_turn") is not None
    await transcript.record(turn, MessageChunk(text="late"))
    text = Transcript.take_updates(turn)
    assert text is not None
    queued_json(rig.sub)
    assert await rig.store.close_turn(turn.turn_id, state="cancelled",
                                      stop_reason="cancelled", text=text) is None
    assert rig.content(0) == ["first late"]
    _publish(rig, turn.turn_id, text, None)
    assert [f["action"] for f in queued_json(rig.sub)] == ["session.message.appended"]


def _publish(rig: Rig, turn_id: str, text: Sequence[tuple[Message, TextAppend | None]],
             closed: ClosedTurn | None) -> None:
    """The close's one publication, as the closer (supervisor/turn/turn_close.py) makes it."""
    session_id = rig.turns[0][1].session_id
    rig.store.notify.publish(rig.store.notify.close_notes(
        session_id, turn_id, text,
        closed=None if closed is None else (closed.status, closed.session, closed.queue),
        stop_reason="cancelled", acknowledged=False))
