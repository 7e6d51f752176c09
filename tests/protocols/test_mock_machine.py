"""The mock agent's machine without a process: bytes in at a given time, effects out.

What the program and the in-process twin both rely on: timers asked for, not slept;
a cancel that resumes the turn at once; the version the client offers choosing the
dialect; effects in the order the agent made them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from protocols.mock.base import CloseOut, Effect, Err, Exit, Out
from protocols.mock.machine import MockMachine
from protocols.mock.options import DEFAULTS, config_options
from protocols.mock.sessions import MemoryStore


def line(msg: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **msg}).encode() + b"\n"


def messages(effects: list[Effect]) -> list[dict[str, Any]]:
    out = b"".join(e.data for e in effects if isinstance(e, Out))
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def texts(msgs: list[dict[str, Any]]) -> list[str]:
    return [m["params"]["update"]["content"]["text"] for m in msgs
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]


def opened(version: int = 1, *, max_version: int = 1,
           store: MemoryStore | None = None) -> MockMachine:
    m = MockMachine("acp", store or MemoryStore(), acp_max_version=max_version, cwd="/nowhere",
                    new_id=lambda: "s1")
    m.receive_data(line({"id": 0, "method": "initialize",
                         "params": {"protocolVersion": version}}), 0.0)
    m.receive_data(line({"id": 1, "method": "session/new", "params": {"cwd": "/nowhere"}}), 0.0)
    m.effects()
    return m


def prompt(m: MockMachine, text: str, now: float = 0.0, rid: int = 2) -> list[dict[str, Any]]:
    m.receive_data(line({"id": rid, "method": "session/prompt", "params": {
        "sessionId": "s1", "prompt": [{"type": "text", "text": text}]}}), now)
    return messages(m.effects())


def test_delay_asks_for_a_timer_per_chunk_and_ends_at_its_time() -> None:
    m = opened()
    assert texts(prompt(m, "/delay 300")) == ["chunk0 "]
    assert m.next_wakeup() == pytest.approx(0.1)
    m.advance(0.05)  # not due: nothing happens
    assert m.effects() == []
    seen: list[dict[str, Any]] = []
    for now in (0.1, 0.2, 0.3):
        m.advance(now)
        seen += messages(m.effects())
    assert texts(seen) == ["chunk1 ", "chunk2 ", "chunk3 "]
    assert seen[-1] == {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}
    assert m.next_wakeup() is None and m.turn is None


def test_a_cancel_resumes_the_turn_at_once() -> None:
    m = opened()
    prompt(m, "/delay 5000")
    m.receive_data(line({"method": "session/cancel", "params": {"sessionId": "s1"}}), 0.03)
    assert messages(m.effects()) == [
        {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}}]
    assert m.cancels == 1 and m.next_wakeup() is None


def test_dropcancel_ignores_the_first_cancel_and_slow_ignores_all_until_its_end() -> None:
    m = opened()
    prompt(m, "/dropcancel 5000")
    cancel = line({"method": "session/cancel", "params": {"sessionId": "s1"}})
    m.receive_data(cancel, 0.01)
    assert m.effects() == [] and m.turn is not None
    m.receive_data(cancel, 0.02)
    assert messages(m.effects())[-1]["result"] == {"stopReason": "cancelled"}

    prompt(m, "/slow 200", now=1.0, rid=3)
    m.receive_data(cancel, 1.01)
    assert m.effects() == []
    m.advance(1.1)
    m.advance(1.2)
    assert messages(m.effects())[-1] == {"jsonrpc": "2.0", "id": 3,
                                         "result": {"stopReason": "cancelled"}}


def test_the_version_offered_chooses_the_dialect() -> None:
    for offered, highest, spoken in ((2, 2, 2), (2, 1, 1), (1, 2, 1)):
        m = MockMachine("acp", MemoryStore(), acp_max_version=highest, cwd="/nowhere")
        m.receive_data(line({"id": 0, "method": "initialize",
                             "params": {"protocolVersion": offered}}), 0.0)
        assert messages(m.effects())[0]["result"]["protocolVersion"] == spoken


def test_v2_accepts_the_prompt_then_ends_with_the_idle_state() -> None:
    m = opened(2, max_version=2)
    msgs = prompt(m, "hello there")
    assert msgs[0] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    updates = [x["params"]["update"] for x in msgs[1:]]
    assert [u["sessionUpdate"] for u in updates] == [
        "user_message", "state_update", "agent_message_chunk", "agent_message_chunk",
        "state_update"]
    assert updates[-1] == {"sessionUpdate": "state_update", "state": "idle",
                           "stopReason": "end_turn"}


def test_an_acp_permission_waits_for_its_answer_even_after_a_cancel() -> None:
    m = opened()
    request = prompt(m, "/permission")[-1]
    assert request["method"] == "session/request_permission"
    m.receive_data(line({"method": "session/cancel", "params": {"sessionId": "s1"}}), 1.0)
    assert m.effects() == [] and m.turn is not None
    m.receive_data(line({"id": request["id"], "result": {"outcome": {"outcome": "cancelled"}}}),
                   2.0)
    assert messages(m.effects()) == [
        {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}}]


def test_codex_approval_ends_with_the_interrupt() -> None:
    m = MockMachine("codex", MemoryStore(), cwd="/nowhere", new_id=lambda: "t1")
    for msg in ({"id": 0, "method": "initialize", "params": {}},
                {"id": 1, "method": "thread/start", "params": {"cwd": "/nowhere"}},
                {"id": 2, "method": "turn/start", "params": {
                    "threadId": "t1", "input": [{"type": "text", "text": "/permission"}]}}):
        m.receive_data(json.dumps(msg).encode() + b"\n", 0.0)
    sent = messages(m.effects())
    turn_id = next(x for x in sent if x.get("id") == 2)["result"]["turn"]["id"]
    assert sent[-1]["method"] == "item/commandExecution/requestApproval"
    m.receive_data(json.dumps({"id": 3, "method": "turn/interrupt", "params": {
        "threadId": "t1", "turnId": turn_id}}).encode() + b"\n", 1.0)
    after = messages(m.effects())
    assert after[0] == {"id": 3, "result": {}}
    assert [x.get("method") for x in after[1:]] == [
        "serverRequest/resolved", "item/completed", "turn/completed"]
    assert after[-1]["params"]["turn"]["status"] == "interrupted"


def test_sessions_survive_the_machine_in_its_store() -> None:
    store = MemoryStore()
    m = opened(store=store)
    prompt(m, "first words")
    again = MockMachine("acp", store, cwd="/nowhere")
    again.receive_data(line({"id": 0, "method": "initialize",
                             "params": {"protocolVersion": 1}}), 0.0)
    again.receive_data(line({"id": 1, "method": "session/resume",
                             "params": {"sessionId": "s1", "cwd": "/nowhere"}}), 0.0)
    # Answered with the session's options, kept with it.
    assert messages(again.effects())[-1] == {"jsonrpc": "2.0", "id": 1, "result": {
        "configOptions": config_options(DEFAULTS, 1)}}
    recalled = prompt(again, "/recall")
    assert texts(recalled) == ["recall: first words"]
    assert again.resumed == ["s1"]


def test_crash_and_closeout_are_effects_in_order() -> None:
    m = opened()
    prompt_line = line({"id": 2, "method": "session/prompt", "params": {
        "sessionId": "s1", "prompt": [{"type": "text", "text": "/crash"}]}})
    m.receive_data(prompt_line, 0.0)
    effects = m.effects()
    assert [type(e) for e in effects] == [Out, Err, Exit] and m.closed
    assert isinstance(effects[-1], Exit) and effects[-1].status == 1

    m = opened()
    prompt(m, "/closeout")
    m.receive_data(line({"id": 9, "method": "nothing/here"}), 0.0)
    assert m.effects() == []  # stdout is closed: the error answer goes nowhere
    m = opened()
    m.receive_data(line({"id": 2, "method": "session/prompt", "params": {
        "sessionId": "s1", "prompt": [{"type": "text", "text": "/closeout"}]}}), 0.0)
    assert m.effects() == [CloseOut()]


# -- /subagents: child sessions (DESIGN.md §13) ---------------------------------

def _updates(msgs: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m["params"]["sessionId"], m["params"]["update"]["sessionUpdate"],
             m["params"]["update"]) for m in msgs if m.get("method") == "session/update"]


def _with_subagents(version: int) -> MockMachine:
    m = MockMachine("acp", MemoryStore(), acp_max_version=2, cwd="/nowhere",
                    new_id=lambda: "s1")
    caps: dict[str, Any] = {"clientCapabilities": {"subagents": {}}} if version == 1 else {}
    m.receive_data(line({"id": 0, "method": "initialize",
                         "params": {"protocolVersion": version, **caps}}), 0.0)
    m.receive_data(line({"id": 1, "method": "session/new", "params": {"cwd": "/nowhere"}}), 0.0)
    m.effects()
    return m


def _cancel(m: MockMachine, sid: str, now: float) -> list[dict[str, Any]]:
    m.receive_data(line({"method": "session/cancel", "params": {"sessionId": sid}}), now)
    return messages(m.effects())


@pytest.mark.parametrize("version", [1, 2])
def test_subagents_announce_children_that_stream_and_honour_their_own_cancel(
        version: int) -> None:
    m = _with_subagents(version)
    ups = _updates(prompt(m, "/subagents 2 1000"))
    announced = [u["sessionId"] for sid, kind, u in ups if kind == "subagent_update"]
    assert len(announced) == 2 and all(sid == "s1" for sid, kind, _ in ups
                                       if kind == "subagent_update")
    first, second = announced
    assert {sid for sid, kind, _ in ups if kind == "agent_message_chunk"} == {"s1", first, second}
    if version == 2:
        assert (first, "state_update", {"sessionUpdate": "state_update",
                                        "state": "running"}) in ups
    # The first child's own cancel: it ends cancelled at once; the parent goes on.
    ups = _updates(_cancel(m, first, 0.15))
    assert ("s1", "subagent_update", {"sessionUpdate": "subagent_update", "sessionId": first,
            "state": {"state": "idle", "stopReason": "cancelled"}}) in ups
    assert m.turn is not None
    m.advance(0.5)
    ups = _updates(messages(m.effects()))
    assert {sid for sid, kind, _ in ups if kind == "agent_message_chunk"} == {"s1", second}
    # At its time the other child ends; then the parent ends its turn.
    m.advance(1.0)
    out = messages(m.effects())
    ups = _updates(out)
    assert any(k == "subagent_update" and u["sessionId"] == second
               and u["state"] == {"state": "idle", "stopReason": "end_turn"}
               for _, k, u in ups)
    assert m.turn is None and m.children == {}


@pytest.mark.parametrize("version", [1, 2])
def test_a_parent_cancel_leaves_the_children_running(version: int) -> None:
    m = _with_subagents(version)
    ups = _updates(prompt(m, "/subagents 2 5000"))
    kids = [u["sessionId"] for _, kind, u in ups if kind == "subagent_update"]
    out = _cancel(m, "s1", 0.2)
    assert m.turn is None
    if version == 1:
        assert {"id": 2, "jsonrpc": "2.0", "result": {"stopReason": "cancelled"}} in out
    m.advance(0.31)
    assert {sid for sid, kind, _ in _updates(messages(m.effects()))
            if kind == "agent_message_chunk"} == set(kids)
    for kid in kids:
        _cancel(m, kid, 0.35)
    assert m.children == {} and m.running == []


def test_subagents_unseen_by_a_v1_client_that_did_not_opt_in() -> None:
    m = opened(1)
    ups = _updates(prompt(m, "/subagents 2 300"))
    assert [k for _, k, _ in ups if k == "subagent_update"] == []


def test_a_late_cancel_of_an_ended_child_does_not_cancel_the_parent() -> None:
    m = _with_subagents(2)
    ups = _updates(prompt(m, "/subagents 2 5000"))
    first = next(u["sessionId"] for _, kind, u in ups if kind == "subagent_update")
    _cancel(m, first, 0.05)
    assert first not in m.children
    _cancel(m, first, 0.06)  # again, after its end
    assert m.turn is not None and not m.turn.cancelled
