"""AcpClient on an ACP v2 connection, joined to an agent-side RpcConnection.

Negotiation, the prompt's acceptance against the turn's end (the idle
``state_update``), cancel, permissions, tool calls and resume with its replay
cursor, without a process.  The conformance tests for the client side of a
cancel are in test_acp_v2_cancel_conformance.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from protocols.acp import AcpClient, AcpVersion
from protocols.events import (
    AgentNotice,
    HistoryReplayed,
    MessageChunk,
    PermissionRequested,
    PlanUpdated,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    UserEcho,
)
from protocols.jsonrpc import Dialect, ErrorResponse, IncomingRequest, Response, RpcConnection
from protocols.turnstate import TurnState

from .helpers import ConnectionPair, drain

SID = "sess-2"


class Pair(ConnectionPair[AcpClient]):
    """Keeps the client's events until ``take`` hands them over."""

    def __init__(self, client: AcpClient) -> None:
        super().__init__(client, Dialect.JSONRPC2)
        self.seen: list[object] = []

    def to_client(self, data: bytes) -> list[object]:
        events = super().to_client(data)
        self.seen += events
        return events

    def take(self) -> list[object]:
        events, self.seen = self.seen + drain(self.client), []
        return events

V2_ANSWER = {"protocolVersion": 2, "info": {"name": "fake", "version": "2"},
             "capabilities": {"session": {}}, "authMethods": []}
V1_ANSWER = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True},
             "agentInfo": {"name": "old"}, "authMethods": []}


def negotiated(version: AcpVersion = "auto", answer: dict[str, Any] | None = None) -> Pair:
    p = Pair(AcpClient(acp_version=version))
    [req] = p.to_agent(p.client.initialize()[1])
    assert isinstance(req, IncomingRequest)
    p.to_client(p.agent.send_response(req.id, V2_ANSWER if answer is None else answer))
    return p


def state(p: Pair) -> TurnState:
    # A call, not an attribute: mypy would narrow ``turn.state`` across asserts.
    return p.client.turn.state


def in_session() -> Pair:
    p = negotiated()
    [req] = p.to_agent(p.client.new_session("/work")[1])
    assert isinstance(req, IncomingRequest)
    p.to_client(p.agent.send_response(req.id, {"sessionId": SID}))
    p.take()
    return p


def update(kind: str, /, **fields: Any) -> bytes:
    # Notifications carry no id: any agent-side connection writes the same line.
    return _agent_line("session/update", {"sessionId": SID, "update": {"sessionUpdate": kind,
                                                                      **fields}})


def _agent_line(method: str, params: Any) -> bytes:
    return RpcConnection(Dialect.JSONRPC2).send_notification(method, params)


def prompting() -> tuple[Pair, IncomingRequest]:
    p = in_session()
    [req] = p.to_agent(p.client.prompt("hi")[1])
    assert isinstance(req, IncomingRequest)
    return p, req


def accepted() -> Pair:
    p, req = prompting()
    p.to_client(p.agent.send_response(req.id, {}))
    p.to_client(update("user_message", messageId="u1", content=[{"type": "text", "text": "hi"}]))
    p.to_client(update("state_update", state="running"))
    return p


def idle(stop: str | None) -> bytes:
    return update("state_update", state="idle", **({"stopReason": stop} if stop else {}))


# -- negotiation ------------------------------------------------------------

@pytest.mark.parametrize(("version", "answer", "expected"), [
    ("auto", V2_ANSWER, "acp/2"),
    ("auto", V1_ANSWER, "acp/1"),
    (2, V2_ANSWER, "acp/2"),
    (1, V1_ANSWER, "acp/1"),
])
def test_initialize_takes_the_version_the_agent_answers(
        version: AcpVersion, answer: dict[str, Any], expected: str) -> None:
    p = negotiated(version, answer)
    [ev] = p.take()
    assert isinstance(ev, Response)
    assert p.client.protocol == expected
    assert p.client.agent_info["name"] == ("fake" if expected == "acp/2" else "old")
    assert p.client.can_load and p.client.can_resume is (expected == "acp/2")


@pytest.mark.parametrize(("version", "answer"), [
    # We offered 1: an agent that answers 2 speaks what we cannot.
    (1, V2_ANSWER),
    # The profile insists on 2: a v1 agent is refused, with the reason.
    (2, V1_ANSWER),
    ("auto", {**V2_ANSWER, "protocolVersion": 3}),
    ("auto", {**V2_ANSWER, "protocolVersion": "2"}),
])
def test_a_version_we_cannot_speak_fails_the_initialize(
        version: AcpVersion, answer: dict[str, Any]) -> None:
    p = negotiated(version, answer)
    [ev] = p.take()
    assert isinstance(ev, ErrorResponse)
    assert "protocolVersion" in ev.message or "ACP 2" in ev.message


def test_acp_version_is_checked() -> None:
    with pytest.raises(ValueError, match="acp_version"):
        AcpClient(acp_version=3)  # type: ignore[arg-type]


def test_a_v2_agent_without_the_session_capability_cannot_restore() -> None:
    p = negotiated(answer={**V2_ANSWER, "capabilities": {}})
    p.take()
    assert not p.client.can_resume and not p.client.can_load


# -- the prompt lifecycle ---------------------------------------------------

def test_acceptance_is_not_the_turns_end() -> None:
    p = accepted()
    events = p.take()
    assert events == [UserEcho(text="hi", message_id="u1")]
    assert state(p) is TurnState.PROMPTING
    p.to_client(update("agent_message_chunk", messageId="m1",
                       content={"type": "text", "text": "hello"}))
    p.to_client(idle("end_turn"))
    assert p.take() == [MessageChunk(text="hello", channel="agent", message_id="m1"),
                               TurnEnded(stop_reason="end_turn")]
    assert state(p) is TurnState.IDLE


def test_idle_before_the_acceptance_is_the_agents_previous_state() -> None:
    p, req = prompting()
    p.to_client(idle(None))
    assert p.take() == []
    assert state(p) is TurnState.PROMPTING
    p.to_client(p.agent.send_response(req.id, {}))
    assert state(p) is TurnState.PROMPTING


def test_an_idle_with_a_stop_reason_before_the_acceptance_is_not_this_turns_end() -> None:
    """The agent accepts a prompt before it runs it: an idle that comes first
    is the end of an earlier turn (one we gave up on), never this one's."""
    p, req = prompting()
    p.to_client(idle("cancelled"))
    p.to_client(p.agent.send_response(req.id, {}))
    assert p.take() == []
    assert state(p) is TurnState.PROMPTING
    p.to_client(idle("end_turn"))
    assert p.take() == [TurnEnded(stop_reason="end_turn")]


def test_a_prompt_refused_minus_32800_after_our_cancel_ends_the_turn_cancelled() -> None:
    """claude-agent-acp 0.101 answers a prompt cancelled before it accepted it
    with -32800 and sends no idle update: the cancel's outcome."""
    p, req = prompting()
    p.client.cancel()
    p.to_client(p.agent.send_error(req.id, -32800, "Request cancelled"))
    assert p.take() == [TurnEnded(stop_reason="cancelled")]


def test_a_prompt_refused_minus_32800_without_a_cancel_is_an_error() -> None:
    p, req = prompting()
    p.to_client(p.agent.send_error(req.id, -32800, "Request cancelled"))
    [ended] = p.take()
    assert isinstance(ended, TurnEnded) and ended.stop_reason == "error"


def test_idle_without_a_stop_reason_after_the_acceptance_ends_the_turn_with_a_notice() -> None:
    p = accepted()
    p.take()
    p.to_client(idle(None))
    events = p.take()
    assert isinstance(events[0], AgentNotice)
    assert events[1:] == [TurnEnded(stop_reason="end_turn")]


def test_a_refused_prompt_ends_the_turn_with_an_error() -> None:
    p, req = prompting()
    p.to_client(p.agent.send_error(req.id, -32602, "bad prompt"))
    [ended] = p.take()
    assert isinstance(ended, TurnEnded) and ended.stop_reason == "error"


def test_an_idle_update_with_no_turn_of_ours_is_background() -> None:
    p = in_session()
    p.to_client(idle("end_turn"))
    assert p.take() == []
    p.to_client(update("agent_message_chunk", messageId="bg",
                       content={"type": "text", "text": "background"}))
    assert p.take() == [MessageChunk(text="background", channel="agent",
                                            message_id="bg")]


def test_whole_messages_and_plans_map_to_events() -> None:
    p = accepted()
    p.take()
    p.to_client(update("agent_message", messageId="m2",
                       content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]))
    p.to_client(update("agent_thought", messageId="t1", content=[{"type": "text", "text": "?"}]))
    entry = {"content": "step", "priority": "high", "status": "pending"}
    p.to_client(update("plan_update", plan={"type": "items", "planId": "p1", "entries": [entry]}))
    assert p.take() == [MessageChunk(text="ab", channel="agent", message_id="m2"),
                               MessageChunk(text="?", channel="thought", message_id="t1"),
                               PlanUpdated(entries=(entry,))]


def test_the_first_tool_call_update_of_an_id_starts_the_tool() -> None:
    p = accepted()
    p.take()
    p.to_client(update("tool_call_update", toolCallId="c1", title="ls", kind="read"))
    p.to_client(update("tool_call_update", toolCallId="c1", status="in_progress"))
    p.to_client(update("tool_call_update", toolCallId="c1", status="completed"))
    assert p.take() == [
        ToolCallStarted(tool_call_id="c1", title="ls", status="pending", kind="read"),
        ToolCallUpdated(tool_call_id="c1", status="in_progress"),
        ToolCallUpdated(tool_call_id="c1", status="completed"),
    ]


def test_a_v2_permission_request_surfaces_with_its_title_and_subject() -> None:
    p = accepted()
    p.take()
    _, data = p.agent.send_request("session/request_permission", {
        "sessionId": SID, "title": "Run this?", "description": "it writes",
        "subject": {"type": "tool_call", "toolCall": {"toolCallId": "c9", "kind": "execute",
                                                        "rawInput": {"cmd": "touch"}}},
        "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}],
    })
    p.to_client(data)
    [ev] = p.take()
    assert isinstance(ev, PermissionRequested)
    assert (ev.title, ev.tool_call_id) == ("Run this?", "c9")
    assert ev.details == {"kind": "execute", "raw_input": {"cmd": "touch"},
                          "description": "it writes"}


def test_a_malformed_v2_permission_request_is_refused_not_left_waiting() -> None:
    p = accepted()
    p.take()
    rid, data = p.agent.send_request("session/request_permission", {"sessionId": SID,
                                                                    "options": []})
    p.to_client(data)
    assert isinstance(p.take()[0], AgentNotice)
    [answer] = p.to_agent(p.client.data_to_send())
    assert isinstance(answer, ErrorResponse) and answer.id == rid


# -- resume with its replay cursor -------------------------------------------

def test_load_is_resume_with_a_replay_cursor() -> None:
    p = in_session()
    rid, data = p.client.load_session("old", "/work")
    [req] = p.to_agent(data)
    assert isinstance(req, IncomingRequest) and req.method == "session/resume"
    assert req.params["replayFrom"] == {"type": "start"}
    for line in (update("user_message", messageId="u", content=[{"type": "text", "text": "x"}]),
                 update("agent_message", messageId="a", content=[{"type": "text", "text": "y"}]),
                 update("tool_call_update", toolCallId="c", status="completed"),
                 idle("end_turn")):
        p.to_client(line)
    p.to_client(p.agent.send_response(rid, {}))
    events = p.take()
    assert isinstance(events[0], HistoryReplayed) and events[0].updates == 4
    assert isinstance(events[1], Response)
    assert p.client.session_id == "old"


def test_resume_without_replay_sends_no_cursor() -> None:
    p = in_session()
    rid, data = p.client.resume_session("old", "/work")
    [req] = p.to_agent(data)
    assert isinstance(req, IncomingRequest) and req.method == "session/resume"
    assert "replayFrom" not in req.params
    p.to_client(p.agent.send_response(rid, {}))
    assert p.client.session_id == "old"
