"""ACP subagent sessions in the client core, v1 and v2, without a process.

The wire shapes are the stabilized RFD's (2026-11-20) as claude-agent-acp 0.101
sends them: ``subagent_update`` on the parent announces and patches a child, a
child's traffic carries its own ``sessionId``, v2 reports the child's state on its
own stream too (``state_update``), and ``session/cancel {sessionId: CHILD}`` stops
one child.
"""

from __future__ import annotations

from typing import Any

import pytest

from protocols.acp import AcpClient
from protocols.acp_v2 import initialize_params
from protocols.events import (
    MessageChunk,
    PermissionRequested,
    SubagentActivity,
    SubagentChanged,
    TurnEnded,
)
from protocols.jsonrpc import Dialect, IncomingNotification, IncomingRequest, RpcConnection
from protocols.turnstate import TurnState

from .test_acp_v2 import SID, V1_ANSWER, Pair, accepted, idle, negotiated, update

CHILD = "child-1"
OTHER = "child-2"


def _line(sid: str, kind: str, **fields: Any) -> bytes:
    return RpcConnection(Dialect.JSONRPC2).send_notification(
        "session/update", {"sessionId": sid, "update": {"sessionUpdate": kind, **fields}})


def announce(child: str, *, title: str = "Explore", cancel: bool = True,
             state: dict[str, Any] | None = None) -> bytes:
    fields: dict[str, Any] = {"sessionId": child, "title": title,
                              "state": state or {"state": "running"}}
    if cancel:
        fields["capabilities"] = {"cancel": {}}
    return update("subagent_update", **fields)


def v1_prompting() -> tuple[Pair, IncomingRequest]:
    p = negotiated(1, V1_ANSWER)
    [req] = p.to_agent(p.client.new_session("/w")[1])
    assert isinstance(req, IncomingRequest)
    p.to_client(p.agent.send_response(req.id, {"sessionId": SID}))
    [prompt] = p.to_agent(p.client.prompt("/subagents 2")[1])
    assert isinstance(prompt, IncomingRequest)
    p.take()
    return p, prompt


def running(version: int) -> tuple[Pair, IncomingRequest | None]:
    """A turn running with two announced children."""
    if version == 1:
        p, prompt = v1_prompting()
    else:
        p, prompt = accepted(), None
    p.to_client(announce(CHILD, title="First"))
    p.to_client(announce(OTHER, title="Second"))
    p.take()
    return p, prompt


def cancels(p: Pair, data: bytes) -> list[str]:
    return [m.params["sessionId"] for m in p.to_agent(data)
            if isinstance(m, IncomingNotification) and m.method == "session/cancel"]


def test_v1_offers_subagents_v2_needs_no_capability() -> None:
    assert initialize_params(1)["clientCapabilities"]["subagents"] == {}
    assert initialize_params("auto")["clientCapabilities"]["subagents"] == {}
    assert "clientCapabilities" not in initialize_params(2)


@pytest.mark.parametrize("version", [1, 2])
def test_an_announcement_is_a_subagent_with_its_title_state_and_cancel(version: int) -> None:
    p = accepted() if version == 2 else v1_prompting()[0]
    p.take()
    p.to_client(announce(CHILD, title="Explore the repo"))
    [ev] = p.take()
    assert ev == SubagentChanged(subagent_id=CHILD, title="Explore the repo", state="running",
                                 cancellable=True)
    # A patch that changes nothing shown says nothing; one without cancel is not cancellable.
    p.to_client(update("subagent_update", sessionId=CHILD, cwd="/w/sub"))
    assert p.take() == []
    p.to_client(update("subagent_update", sessionId=CHILD, capabilities=None))
    [ev] = p.take()
    assert isinstance(ev, SubagentChanged) and not ev.cancellable


@pytest.mark.parametrize("version", [1, 2])
def test_child_traffic_is_not_the_parents(version: int) -> None:
    p, _ = running(version)
    p.to_client(_line(CHILD, "agent_message_chunk", content={"type": "text", "text": "child"}))
    p.to_client(_line(SID, "agent_message_chunk", content={"type": "text", "text": "parent"}))
    events = p.take()
    assert [e.text for e in events if isinstance(e, MessageChunk)] == ["parent"]
    # The child's work keeps a parent that waits on it from looking stalled.
    assert SubagentActivity(subagent_id=CHILD, text="child") in events
    # Its tool calls are its trace's too, by title (DESIGN.md §13).
    p.to_client(_line(CHILD, "tool_call", toolCallId="t1", title="Read notes.txt",
                      status="completed"))
    assert SubagentActivity(subagent_id=CHILD, tool="Read notes.txt") in p.take()


def test_v2_child_idle_is_the_childs_end_not_the_turns() -> None:
    p, _ = running(2)
    p.to_client(_line(CHILD, "state_update", state="idle", stopReason="end_turn"))
    [ev] = p.take()
    assert ev == SubagentChanged(subagent_id=CHILD, title="First", state="completed",
                                 cancellable=False, stop_reason="end_turn")
    assert p.client.turn.state is TurnState.PROMPTING
    # Its mirror on the parent changes nothing more.
    p.to_client(update("subagent_update", sessionId=CHILD,
                       state={"state": "idle", "stopReason": "end_turn"}))
    assert p.take() == []


def test_v1_child_state_comes_on_the_parents_subagent_update() -> None:
    p, _ = running(1)
    p.to_client(update("subagent_update", sessionId=CHILD,
                       state={"state": "idle", "stopReason": "error"}))
    [ev] = p.take()
    assert isinstance(ev, SubagentChanged) and ev.state == "failed"
    assert p.client.turn.state is TurnState.PROMPTING


@pytest.mark.parametrize("version", [1, 2])
def test_cancel_one_child_sends_its_own_cancel_and_the_turn_goes_on(version: int) -> None:
    p, _ = running(version)
    assert cancels(p, p.client.cancel_subagent(CHILD)) == [CHILD]
    [ev] = p.take()
    assert isinstance(ev, SubagentChanged) and ev.state == "cancelling" and not ev.cancellable
    assert p.client.turn.state is TurnState.PROMPTING
    # Cancelling: a second ask writes nothing; a late "running" does not undo it.
    assert p.client.cancel_subagent(CHILD) == b""
    p.to_client(update("subagent_update", sessionId=CHILD, state={"state": "running"}))
    assert p.take() == []
    end = ({"state": "idle", "stopReason": "cancelled"})
    p.to_client(update("subagent_update", sessionId=CHILD, state=end))
    [ev] = p.take()
    assert isinstance(ev, SubagentChanged) and ev.state == "cancelled"
    # Unknown, finished: nothing to write.
    assert p.client.cancel_subagent("nope") == b""
    assert p.client.cancel_subagent(CHILD) == b""


def test_a_child_without_cancel_is_never_cancelled() -> None:
    p = accepted()
    p.to_client(announce(CHILD, cancel=False))
    p.take()
    assert p.client.cancel_subagent(CHILD) == b""
    assert cancels(p, p.client.cancel()) == [SID]


def test_cancel_of_a_child_answers_its_permission_cancelled() -> None:
    p, _ = running(2)
    _rid, data = p.agent.send_request("session/request_permission", {
        "sessionId": CHILD, "title": "Run ls", "options": [
            {"optionId": "a", "name": "Allow", "kind": "allow_once"}]})
    p.to_client(data)
    [perm] = p.take()
    assert isinstance(perm, PermissionRequested)
    sent = p.to_agent(p.client.cancel_subagent(CHILD))
    assert next(getattr(m, "result", None) for m in sent) == {"outcome": {"outcome": "cancelled"}}
    assert p.client.pending_permissions == ()


@pytest.mark.parametrize("version", [1, 2])
def test_parent_cancel_cancels_running_children_and_counts_them(version: int) -> None:
    p, prompt = running(version)
    p.to_client(update("subagent_update", sessionId=OTHER,
                       state={"state": "idle", "stopReason": "end_turn"}))
    p.take()
    # The parent's cancel first (the turn's), then each running child's.
    assert cancels(p, p.client.cancel()) == [SID, CHILD]
    if version == 1:
        assert prompt is not None
        p.to_client(p.agent.send_response(prompt.id, {"stopReason": "cancelled"}))
    else:
        p.to_client(idle("cancelled"))
    ended = [e for e in p.take() if isinstance(e, TurnEnded)]
    assert ended == [TurnEnded(stop_reason="cancelled", subagents_cancelled=1)]


def test_a_turn_that_was_not_cancelled_counts_no_children() -> None:
    p, _ = running(2)
    p.to_client(idle("end_turn"))
    [ended] = [e for e in p.take() if isinstance(e, TurnEnded)]
    assert ended.subagents_cancelled == 0


def test_a_replays_children_are_history() -> None:
    p = negotiated()
    p.client.replaying = True
    p.to_client(announce(CHILD))
    assert [e for e in p.take() if isinstance(e, SubagentChanged)] == []
    assert CHILD not in p.client.children


def test_a_client_that_never_cancels_keeps_a_clean_core() -> None:
    client = AcpClient(acp_version=1)
    assert client.cancel_subagent(CHILD) == b""
