"""One turn's text: written in segments, cut at the cap (issue 27), through the transcript."""

from __future__ import annotations

from pathlib import Path

from protocols.events import MessageChunk
from supervisor.bus import EventBus
from supervisor.notify import Notifier
from supervisor.storage.store import Store
from supervisor.turn import transcript as transcript_module
from supervisor.turn.transcript import OUTPUT_CUT_STATUS, Transcript, TurnText


def _setup(tmp_path: Path, cap: int) -> tuple[Store, Transcript, TurnText]:
    store = Store.open(tmp_path / "t.db", Notifier(EventBus()))
    ws = store.db.ensure_workspace("default")
    sid = store.db.create_session(store.db.create_task(ws, "t").id, "mock").id
    turn_row, *_ = store.db.open_turn(sid, "hi")
    transcript = Transcript(store, store.notify, sid, max_turn_output=cap)
    return store, transcript, TurnText(session_id=sid, turn_id=turn_row.id)


async def test_text_past_the_cap_is_cut_at_a_character_and_said_once(tmp_path: Path) -> None:
    store, transcript, turn = _setup(tmp_path, cap=10)
    for text in ("abcd", "é€😀", "never", "seen", ""):  # 4 + 2+3+4 bytes: the 😀 does not fit
        await transcript.record(turn, MessageChunk(text=text))
    await transcript.record(turn, MessageChunk(text="thought", channel="thought"))
    await transcript.flush(turn)
    messages = [m for m in store.db.list_messages(turn.session_id) if m.role != "user"]
    assert [(m.role, m.kind, m.content) for m in messages] == [
        ("agent", "text", "abcdé€"),
        ("system", "status", OUTPUT_CUT_STATUS.format("10 bytes")),
    ]
    assert messages[1].metadata == {"output_cut": True, "limit_bytes": 10, "variant": "warning"}
    assert messages[1].turn_id == turn.turn_id
    # A new turn has its own budget.
    fresh = TurnText(session_id=turn.session_id, turn_id=turn.turn_id)
    await transcript.record(fresh, MessageChunk(text="again"))
    await transcript.flush(fresh)
    assert store.db.list_messages(turn.session_id)[-1].content == "again"


async def test_a_long_answer_is_written_in_segments(tmp_path: Path) -> None:
    store, transcript, turn = _setup(tmp_path, cap=10**9)
    segment = transcript_module.SEGMENT_UNITS
    block = "x" * (segment // 4)
    for _ in range(10):
        await transcript.record(turn, MessageChunk(text=block))
        await transcript.flush(turn)  # (as the text writer would, now and then)
    texts = [m.content for m in store.db.list_messages(turn.session_id) if m.role == "agent"]
    assert "".join(texts) == block * 10  # nothing lost, in order
    assert len(texts) == 3 and all(len(t) <= segment for t in texts), [len(t) for t in texts]
