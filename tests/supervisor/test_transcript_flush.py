"""A turn's own flush writes streamed text the one way every grown message is
written (issue 45, item 3: "four routes for streamed text"): what starts a
message is inserted, and what only grew — every channel of the turn together —
is one ``update_messages``: one transaction (counted in the database's
write-ahead log, tests/support/wal.py), its notifications queued together (one
write per connection), a failed write announced whole by the next."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

from protocols.events import MessageChunk
from supervisor.bus import EventBus, Subscriber
from supervisor.notify import Notifier
from supervisor.storage.store import Store
from supervisor.turn.transcript import Transcript, TurnText
from tests.support.wal import WalCommits


def drain(sub: Subscriber) -> list[dict[str, Any]]:
    """What ``sub`` has queued so far, parsed (taken)."""
    frames: list[dict[str, Any]] = []
    while True:
        try:
            frames.append(json.loads(sub.receive_nowait()))
        except trio.WouldBlock:
            return frames


class Counting(Subscriber):
    """A mailbox counting its consumer's wake-ups (a connection writes once per wake-up)."""

    def __init__(self, bus: EventBus) -> None:
        super().__init__(bus, bus.queue_size)
        self.wakes = 0

    def _wake(self) -> None:
        self.wakes += 1
        super()._wake()


class Rig:
    """One running turn in a real store, its transcript, a subscriber with appends."""

    def __init__(self, tmp_path: Path) -> None:
        bus = EventBus()
        self.store = Store.open(tmp_path / "t.db", Notifier(bus))
        db = self.store.db
        task = db.create_task(db.ensure_workspace("default"), "t").id
        self.sid = db.create_session(task, "mock").id
        turn_row, *_ = db.open_turn(self.sid, "hi")
        self.sub = Counting(bus)
        self.sub.subscribe(self.sid, text_appends=True)
        self.turns = [(Transcript(self.store, self.store.notify, self.sid),
                       TurnText(session_id=self.sid, turn_id=turn_row.id))]

    def content(self, i: int) -> list[str]:
        return [m.content for m in self.store.db.list_messages(self.sid) if m.role == "agent"]


async def _both_channels(rig: Rig, answer: str, thought: str) -> None:
    transcript, turn = rig.turns[0]
    await transcript.record(turn, MessageChunk(text=answer))
    await transcript.record(turn, MessageChunk(text=thought, channel="thought"))


async def test_both_channels_grown_are_one_transaction_and_one_write(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    transcript, turn = rig.turns[0]
    await _both_channels(rig, "ans", "tho")
    wal = WalCommits(tmp_path / "t.db")
    await transcript.flush(turn)  # each channel starts its message: two inserts
    assert wal.since() == 2
    assert sorted(rig.content(0)) == ["ans", "tho"]
    drain(rig.sub)
    wal, wakes = WalCommits(tmp_path / "t.db"), rig.sub.wakes
    await _both_channels(rig, "wer", "ught")
    await transcript.flush(turn)
    assert wal.since() == 1  # both grown messages: one transaction
    assert rig.sub.wakes - wakes == 1
    frames = drain(rig.sub)
    assert sorted((f["action"], f["payload"]["offset"], f["payload"]["text"])
                  for f in frames) == [("session.message.appended", 3, "ught"),
                                       ("session.message.appended", 3, "wer")]
    assert sorted(rig.content(0)) == ["answer", "thought"]


async def test_a_new_message_and_a_grown_one_in_one_flush(tmp_path: Path) -> None:
    """One channel grows, the other starts: the insert, then the update."""
    rig = Rig(tmp_path)
    transcript, turn = rig.turns[0]
    await transcript.record(turn, MessageChunk(text="one "))
    await transcript.flush(turn)
    drain(rig.sub)
    await _both_channels(rig, "two", "hmm")
    await transcript.flush(turn)
    frames = drain(rig.sub)
    assert [f["action"] for f in frames] == ["session.message.added",
                                             "session.message.appended"]
    assert frames[0]["payload"]["message"]["content"] == "hmm"
    assert (frames[1]["payload"]["offset"], frames[1]["payload"]["text"]) == (4, "two")
    assert sorted(rig.content(0)) == ["hmm", "one two"]


async def test_a_refused_flush_raises_and_the_next_announces_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig(tmp_path)
    transcript, turn = rig.turns[0]
    await transcript.record(turn, MessageChunk(text="one "))
    await transcript.flush(turn)
    drain(rig.sub)

    def refused(*args: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(rig.store.db, "update_messages", refused)
    await transcript.record(turn, MessageChunk(text="two "))
    with pytest.raises(Exception, match="disk I/O error"):
        await transcript.flush(turn)
    assert drain(rig.sub) == []  # nothing announced that was not written
    assert turn.writing is None  # the next write does not wait for this one
    monkeypatch.undo()
    await transcript.record(turn, MessageChunk(text="three"))
    await transcript.flush(turn)
    frames = drain(rig.sub)
    # An append would skip "two ", never announced: the message goes whole.
    assert [f["action"] for f in frames] == ["session.message.updated"]
    assert frames[0]["payload"]["message"]["content"] == "one two three"
    assert rig.content(0) == ["one two three"]


async def test_after_a_refused_write_of_both_channels_each_is_announced_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both channels' growth was lost together: neither may be announced as an
    append next (its offset would skip text no client was told of)."""
    rig = Rig(tmp_path)
    transcript, turn = rig.turns[0]
    await _both_channels(rig, "ans", "tho")
    await transcript.flush(turn)
    drain(rig.sub)

    def refused(*args: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(rig.store.db, "update_messages", refused)
    await _both_channels(rig, "w", "u")
    with pytest.raises(Exception, match="disk I/O error"):
        await transcript.flush(turn)
    monkeypatch.undo()
    await _both_channels(rig, "er", "ght")
    await transcript.flush(turn)
    frames = drain(rig.sub)
    assert [f["action"] for f in frames] == ["session.message.updated"] * 2
    assert sorted(f["payload"]["message"]["content"] for f in frames) == ["answer", "thought"]
    assert sorted(rig.content(0)) == ["answer", "thought"]


async def test_a_channel_not_written_since_the_refusal_is_still_announced_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The write after a refusal carries one channel only: the other's message
    is still owed a whole announcement when it grows next."""
    rig = Rig(tmp_path)
    transcript, turn = rig.turns[0]
    await _both_channels(rig, "ans", "tho")
    await transcript.flush(turn)

    def refused(*args: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(rig.store.db, "update_messages", refused)
    await _both_channels(rig, "w", "u")
    with pytest.raises(Exception, match="disk I/O error"):
        await transcript.flush(turn)
    monkeypatch.undo()
    await transcript.record(turn, MessageChunk(text="er"))
    await transcript.flush(turn)
    await transcript.record(turn, MessageChunk(text="ght", channel="thought"))
    await transcript.flush(turn)
    await transcript.record(turn, MessageChunk(text="!", channel="thought"))
    await transcript.flush(turn)
    drain_from = drain(rig.sub)
    assert [(f["action"], f["payload"].get("text")) for f in drain_from[-3:]] == [
        ("session.message.updated", None), ("session.message.updated", None),
        ("session.message.appended", "!")]
    assert [f["payload"]["message"]["content"] for f in drain_from[-3:-1]] == [
        "answer", "thought"]
