"""Text appends (issue 19): the bus hands each subscriber the variant of a
publish its subscription asked for, each variant encoded once; the transcript
publishes a streamed text message's growth as an append at its UTF-16 offset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from protocols.events import MessageChunk, ToolCallStarted
from supervisor import bus as bus_module
from supervisor.bus import EventBus
from supervisor.models import utf16_len
from supervisor.notify import Notifier
from supervisor.storage.store import Store
from supervisor.turn.transcript import Transcript, TurnText
from tests.support.bus_frames import queued

APPEND = ("session.message.appended", {"session_id": "s1", "offset": 3, "text": "abc"})


def actions(frames: list[str]) -> list[str]:
    return [json.loads(f)["action"] for f in frames]


async def test_each_subscriber_gets_the_variant_it_asked_for() -> None:
    bus = EventBus()
    full, full2, short, short2, other = (bus.subscriber() for _ in range(5))
    full.subscribe("s1")
    full2.subscribe("s1")
    short.subscribe("s1", text_appends=True)
    short2.subscribe("s1", text_appends=True)
    other.subscribe("s2", text_appends=True)  # another session: hears nothing of s1
    bus.publish("s1", "session.message.updated", {"session_id": "s1"}, APPEND)
    got = {name: queued(sub) for name, sub in
           [("full", full), ("full2", full2), ("short", short), ("short2", short2),
            ("other", other)]}
    assert actions(got["full"]) == actions(got["full2"]) == ["session.message.updated"]
    assert actions(got["short"]) == actions(got["short2"]) == ["session.message.appended"]
    assert json.loads(got["short"][0])["payload"] == APPEND[1]
    assert got["other"] == []
    # Encoded once per variant: subscribers of a variant share the very same frame.
    assert got["full"][0] is got["full2"][0]
    assert got["short"][0] is got["short2"][0]
    # A publish without an append variant reaches everyone whole.
    bus.publish("s1", "session.turn.completed", {"session_id": "s1"})
    for sub in (full, short):
        assert actions(queued(sub)) == ["session.turn.completed"]


async def test_a_variant_nobody_takes_is_not_encoded(monkeypatch: pytest.MonkeyPatch) -> None:
    encoded: list[str] = []
    real = bus_module.envelope

    def counting(kind: str, action: str, payload: Any, msg_id: str | None = None) -> str:
        encoded.append(action)
        return real(kind, action, payload, msg_id)

    monkeypatch.setattr(bus_module, "envelope", counting)
    bus = EventBus()
    subs = [bus.subscriber() for _ in range(3)]
    for sub in subs:
        sub.subscribe("s1", text_appends=True)
    bus.publish("s1", "session.message.updated", {"session_id": "s1"}, APPEND)
    assert encoded == ["session.message.appended"]
    subs[0].subscribe("s1")  # subscribing again without the option: whole messages again
    encoded.clear()
    bus.publish("s1", "session.message.updated", {"session_id": "s1"}, APPEND)
    assert sorted(encoded) == ["session.message.appended", "session.message.updated"]
    assert actions(queued(subs[0])) == ["session.message.appended", "session.message.updated"]
    subs[1].unsubscribe("s1")
    assert "s1" not in subs[1].text_appends


def test_utf16_len_counts_what_javascript_counts() -> None:
    assert utf16_len("") == 0
    assert utf16_len("abc") == 3
    assert utf16_len("é") == 1
    assert utf16_len("a😀b") == 4  # the emoji is a surrogate pair in UTF-16
    assert utf16_len("\ud83d") == 1  # a lone surrogate is one unit, like its U+FFFD


def chunk(text: str) -> MessageChunk:
    return MessageChunk(text=text)


async def test_the_transcript_publishes_growth_as_appends_at_utf16_offsets(
        tmp_path: Path) -> None:
    bus = EventBus()
    store = Store.open(tmp_path / "t.db", Notifier(bus))
    ws = store.db.ensure_workspace("default")
    sid = store.db.create_session(store.db.create_task(ws, "t").id, "mock").id
    turn_row, *_ = store.db.open_turn(sid, "hi")
    full, short = bus.subscriber(), bus.subscriber()
    full.subscribe(sid)
    short.subscribe(sid, text_appends=True)
    transcript = Transcript(store, store.notify, sid)
    turn = TurnText(session_id=sid, turn_id=turn_row.id)

    async def say(*texts: str) -> None:
        for text in texts:
            await transcript.record(turn, chunk(text))
        await transcript.flush(turn)

    await say("a😀", "b")
    await say("c🎉")
    await say("d")
    frames = [json.loads(f) for f in queued(short)]
    assert [f["action"] for f in frames] == ["session.message.added",
                                             "session.message.appended",
                                             "session.message.appended"]
    msg_id = frames[0]["payload"]["message"]["id"]
    assert [(f["payload"]["offset"], f["payload"]["text"]) for f in frames[1:]] == [
        (4, "c🎉"), (7, "d")]  # UTF-16 units: "a😀b" is 4, not 3
    assert frames[1]["payload"] == {"session_id": sid, "message_id": msg_id,
                                    "turn_id": turn_row.id, "offset": 4, "text": "c🎉"}
    assert actions(queued(full)) == ["session.message.added"] + ["session.message.updated"] * 2
    stored = store.db.list_messages(sid)[-1]
    assert stored.id == msg_id and stored.content == "a😀bc🎉d"
    assert utf16_len(stored.content) == 8

    # A surrogate pair cut between two flushes: the first half is stored as
    # U+FFFD, the second makes it the character, so that growth is no append.
    await say("\ud83d")
    await say("\ude00", "!")
    await say("?")
    frames = [json.loads(f) for f in queued(short)]
    assert [f["action"] for f in frames] == ["session.message.appended",
                                             "session.message.updated",
                                             "session.message.appended"]
    assert frames[0]["payload"]["offset"] == 8
    assert frames[1]["payload"]["message"]["content"] == "a😀bc🎉d😀!"
    assert frames[2]["payload"]["offset"] == 11
    assert store.db.list_messages(sid)[-1].content == "a😀bc🎉d😀!?"

    # After a tool call the text is a new message: added whole, not appended.
    queued(full)
    await transcript.record(turn, ToolCallStarted(tool_call_id="t1", title="ls", kind="execute",
                                                  status="pending", raw={}))
    await say("after")
    assert actions(queued(short)) == ["session.message.added", "session.message.added"]
    assert actions(queued(full)) == ["session.message.added", "session.message.added"]
    store.db.close()
