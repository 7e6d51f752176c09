"""Codex ``thread/resume`` and ``turn/steer``, sans-IO (shapes from the codex
0.169 app-server schema: ``codex app-server generate-json-schema``)."""

from __future__ import annotations

import pytest

from protocols.codex import CodexClient
from protocols.events import MessageChunk, OptionsChanged, TurnEnded
from protocols.jsonrpc import (
    ErrorResponse,
    IncomingRequest,
    LocalProtocolError,
    Response,
)

from .codex_states import TURN, completed, in_turn, initialized, turn_result, turn_sent
from .helpers import ConnectionPair, parse_lines

OLD = "thr-old"
Pair = ConnectionPair[CodexClient]

THREAD_RESUME = (
    b'{"id":2,"method":"thread/resume","params":{"threadId":"thr-old","cwd":"/work",'
    b'"approvalPolicy":"on-request","sandbox":"workspace-write","excludeTurns":true}}\n'
)
TURN_STEER = (
    b'{"id":4,"method":"turn/steer","params":{"threadId":"thr-1","input":'
    b'[{"type":"text","text":"also this"}],"expectedTurnId":"turn-1"}}\n'
)


def resumed() -> tuple[Pair, int]:
    p = initialized()
    p.to_agent(p.client.initialized())
    # A profile's thread/start parameters; ``ephemeral`` is thread/start's only.
    rid, data = p.client.thread_resume(
        OLD, "/work", approvalPolicy="on-request", sandbox="workspace-write", ephemeral=False
    )
    assert (rid, data) == (2, THREAD_RESUME)
    [req] = p.to_agent(data)
    assert isinstance(req, IncomingRequest) and req.method == "thread/resume"
    return p, rid


def test_codex_always_resumes_and_never_loads() -> None:
    assert (CodexClient().can_resume, CodexClient().can_load) == (True, False)


def test_thread_resume_exact_line_and_thread_id() -> None:
    p, rid = resumed()
    assert p.client.thread_id is None  # not until the agent answers
    result = {"thread": {"id": OLD, "turns": []}, "model": "m", "cwd": "/work"}
    [options, answer] = p.to_client(p.agent.send_response(rid, result))
    assert answer == Response(id=rid, method="thread/resume", result=result)
    # The resumed thread's model is offered (model/list has not been asked).
    assert isinstance(options, OptionsChanged)
    assert [(o["id"], o["current"]) for o in options.options] == [
        ("model", "m"), ("reasoning_effort", None), ("approval_policy", None)]
    assert p.client.thread_id == OLD
    [turn] = parse_lines(p.client.turn_start("/recall")[1])
    assert turn["params"]["threadId"] == OLD


def test_thread_resume_without_cwd_sends_none() -> None:
    p = initialized()
    [msg] = parse_lines(p.client.thread_resume(OLD)[1])
    assert msg["params"] == {"threadId": OLD, "excludeTurns": True}


def test_thread_resume_refused_opens_nothing() -> None:
    p, rid = resumed()
    [err] = p.to_client(p.agent.send_error(rid, -32600, f"no rollout found for thread id {OLD}"))
    assert isinstance(err, ErrorResponse) and err.method == "thread/resume"
    assert p.client.thread_id is None
    with pytest.raises(LocalProtocolError):
        p.client.turn_start("hi")


def test_thread_resume_result_without_a_thread_id_is_an_error() -> None:
    p, rid = resumed()
    [err] = p.to_client(p.agent.send_response(rid, {"thread": {}}))
    assert err == ErrorResponse(id=rid, method="thread/resume", code=-32603,
                                message="thread/resume result has no thread id")
    assert p.client.thread_id is None


def test_thread_resume_misuse_is_a_local_error() -> None:
    with pytest.raises(LocalProtocolError, match="thread id"):
        initialized().client.thread_resume("")
    with pytest.raises(LocalProtocolError, match="turn is running"):
        in_turn().client.thread_resume(OLD)


# -- turn/steer ----------------------------------------------------------------


def test_steer_exact_line_names_the_running_turn() -> None:
    p = in_turn()
    rid, data = p.client.steer("also this")
    assert (rid, data) == (4, TURN_STEER)
    [req] = p.to_agent(data)
    assert isinstance(req, IncomingRequest) and req.params["expectedTurnId"] == TURN
    assert p.to_client(p.agent.send_response(rid, {"turnId": TURN})) == [
        Response(id=rid, method="turn/steer", result={"turnId": TURN})]
    # The turn goes on, steered.
    assert p.client.turn.running and p.client.turn_id == TURN


def test_stale_expected_turn_id_is_the_agents_error() -> None:
    p = in_turn()
    rid, data = p.client.steer("too late")
    p.to_agent(data)
    # The turn ended while the steer was on its way: the agent refuses it.
    assert completed(p, "completed") == [TurnEnded(stop_reason="end_turn", turn_id=TURN)]
    [err] = p.to_client(p.agent.send_error(rid, -32600, "expectedTurnId is not the active turn"))
    assert err == ErrorResponse(id=rid, method="turn/steer", code=-32600,
                                message="expectedTurnId is not the active turn")
    assert not p.client.turn.running


def test_steer_after_the_turn_ended_is_refused_locally() -> None:
    p = in_turn()
    completed(p, "completed")
    with pytest.raises(LocalProtocolError, match="no turn to steer"):
        p.client.steer("hello?")


def test_steer_with_no_turn_or_no_turn_id_or_a_cancel_sent_is_refused() -> None:
    p = initialized()
    with pytest.raises(LocalProtocolError, match="IDLE"):
        p.client.steer("x")
    p = turn_sent()
    with pytest.raises(LocalProtocolError, match="not known yet"):
        p.client.steer("x")
    p.to_client(p.agent.send_response(3, turn_result()))
    p.client.steer("x")  # now it can
    p.client.cancel()
    with pytest.raises(LocalProtocolError, match="CANCEL_SENT"):
        p.client.steer("x")


def test_steered_output_streams_as_ever() -> None:
    p = in_turn()
    p.to_agent(p.client.steer("left")[1])
    assert p.to_client(p.agent.send_notification("item/agentMessage/delta", {
        "threadId": "thr-1", "turnId": TURN, "itemId": "m", "delta": "steered: left"})) == [
        MessageChunk(text="steered: left", message_id="m")]
