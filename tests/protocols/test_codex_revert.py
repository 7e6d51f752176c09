"""Codex ``thread/revert`` (0.171; the successor of ``thread/rollback``), sans-IO:
the client core's request, and the mock agent's answer that drops the turns
from its history (shapes from ``codex app-server generate-json-schema``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from protocols.codex import CodexClient
from protocols.jsonrpc import LocalProtocolError, Response
from protocols.mock.base import Out
from protocols.mock.machine import MockMachine
from protocols.mock.sessions import MemoryStore

from .codex_states import TURN, completed, in_thread, in_turn


def test_thread_revert_exact_line_and_its_answer_reaches_the_caller() -> None:
    p = in_turn()
    completed(p, "completed")
    rid, data = p.client.thread_revert(TURN)
    assert json.loads(data) == {"id": rid, "method": "thread/revert",
                                "params": {"threadId": "thr-1", "beforeTurnId": TURN}}
    p.to_agent(data)
    result = {"thread": {"id": "thr-1", "turns": []}, "turnsBackwardsCursor": None}
    assert p.to_client(p.agent.send_response(rid, result)) == [
        Response(id=rid, method="thread/revert", result=result)]
    assert p.client.thread_id == "thr-1"  # the thread is the same one


def test_thread_revert_is_refused_locally_while_a_turn_runs_or_without_a_thread() -> None:
    with pytest.raises(LocalProtocolError, match="while a turn is running"):
        in_turn().client.thread_revert(TURN)
    with pytest.raises(LocalProtocolError, match="before the thread is open"):
        CodexClient().thread_revert(TURN)
    with pytest.raises(LocalProtocolError, match="needs a turn id"):
        in_thread().client.thread_revert("")


def _codex(store: MemoryStore) -> MockMachine:
    m = MockMachine("codex", store, cwd="/nowhere", new_id=lambda: "thr")
    for msg in ({"id": 0, "method": "initialize", "params": {}},
                {"id": 1, "method": "thread/start", "params": {"cwd": "/nowhere"}}):
        m.receive_data(json.dumps(msg).encode() + b"\n", 0.0)
    m.effects()
    return m


def _send(m: MockMachine, msg: dict[str, Any]) -> list[dict[str, Any]]:
    m.receive_data(json.dumps(msg).encode() + b"\n", 0.0)
    out = b"".join(e.data for e in m.effects() if isinstance(e, Out))
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def _turn(m: MockMachine, rid: int, text: str) -> tuple[str, list[str]]:
    sent = _send(m, {"id": rid, "method": "turn/start", "params": {
        "threadId": "thr", "input": [{"type": "text", "text": text}]}})
    turn_id = next(x for x in sent if x.get("id") == rid)["result"]["turn"]["id"]
    deltas = [x["params"]["delta"] for x in sent if x.get("method") == "item/agentMessage/delta"]
    return turn_id, deltas


def test_the_mock_drops_the_turn_and_every_later_one_from_its_history() -> None:
    store = MemoryStore()
    m = _codex(store)
    _turn(m, 2, "first")
    second, _ = _turn(m, 3, "second")
    _turn(m, 4, "third")
    answer = _send(m, {"id": 5, "method": "thread/revert",
                       "params": {"threadId": "thr", "beforeTurnId": second}})
    assert answer[0]["id"] == 5 and answer[0]["result"]["thread"]["id"] == "thr"
    assert answer[1] == {"method": "thread/reverted", "params": {"threadId": "thr"}}
    _, recalled = _turn(m, 6, "/recall")
    assert "".join(recalled) == "recall: first"
    # Kept in its store: a new process resuming the thread sees the same history.
    assert [x["text"] for x in store.sessions["thr"]["messages"] if x["role"] == "user"] == [
        "first", "/recall"]


def test_the_mock_refuses_an_unknown_turn_or_thread() -> None:
    m = _codex(MemoryStore())
    _turn(m, 2, "first")
    [err] = _send(m, {"id": 3, "method": "thread/revert",
                      "params": {"threadId": "thr", "beforeTurnId": "nope"}})
    assert err["error"]["code"] == -32600 and "nope" in err["error"]["message"]
    [err] = _send(m, {"id": 4, "method": "thread/revert",
                      "params": {"threadId": "other", "beforeTurnId": "nope"}})
    assert err["error"]["message"] == "no such thread"


def test_the_last_turn_id_outlives_its_turn_and_a_new_turn_forgets_it() -> None:
    """What a later ``thread/revert`` names a turn by: kept after ``turn/completed``
    and after an escalation abandoned the turn, gone when the next turn starts."""
    p = in_turn()
    assert p.client.last_turn_id == TURN
    completed(p, "interrupted")
    assert (p.client.turn_id, p.client.last_turn_id) == (None, TURN)
    p.client.turn_start("again")
    assert p.client.last_turn_id is None
    p = in_turn()
    assert p.client.abandon_turn()
    assert (p.client.turn_id, p.client.last_turn_id) == (None, TURN)
