"""Conformance: every MUST of ACP v2 that concerns the client side of a cancel,
one test each, named after it (ACP v2 "Prompt lifecycle: Cancellation",
"Cancellation: $/cancel_request", "Migrating from v1: Clients", checklist 13).
The SHOULDs that go with them are checked too, marked as such.
"""

from __future__ import annotations

from protocols.events import PermissionRequested, PermissionWithdrawn, ToolCallUpdated, TurnEnded
from protocols.jsonrpc import (
    REQUEST_CANCELLED,
    ErrorResponse,
    IncomingNotification,
    Response,
)
from protocols.turnstate import TurnState

from .test_acp_v2 import SID, Pair, accepted, idle, prompting, update

PERMISSION = {
    "sessionId": SID, "title": "Write?",
    "subject": {"type": "tool_call", "toolCall": {"toolCallId": "c1"}},
    "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}],
}


def asked(p: Pair, n: int = 1) -> list[int]:
    ids = []
    for _ in range(n):
        rid, data = p.agent.send_request("session/request_permission", PERMISSION)
        p.to_client(data)
        ids.append(rid)
    assert sum(isinstance(e, PermissionRequested) for e in p.take()) == n
    return ids


def test_client_must_respond_to_all_pending_permission_requests_with_cancelled() -> None:
    """"The Client MUST respond to all pending session/request_permission
    requests with the cancelled outcome" — before the cancel itself."""
    p = accepted()
    ids = asked(p, 2)
    sent = p.to_agent(p.client.cancel())
    answers = [e for e in sent if isinstance(e, Response)]
    assert [a.id for a in answers] == ids
    assert all(a.result == {"outcome": {"outcome": "cancelled"}} for a in answers)
    assert isinstance(sent[-1], IncomingNotification) and sent[-1].method == "session/cancel"
    assert sent[-1].params == {"sessionId": SID}


def test_client_must_answer_a_permission_asked_after_the_cancel_with_cancelled() -> None:
    """The same MUST for a request that arrives while the cancel is outstanding:
    it is pending, so it is answered cancelled (at once: nobody is asked)."""
    p = accepted()
    p.client.cancel()
    rid, data = p.agent.send_request("session/request_permission", PERMISSION)
    p.to_client(data)
    assert not any(isinstance(e, PermissionRequested) for e in p.take())
    [answer] = p.to_agent(p.client.data_to_send())
    assert isinstance(answer, Response) and answer.id == rid
    assert answer.result == {"outcome": {"outcome": "cancelled"}}


def test_client_must_answer_a_withdrawn_request_with_a_result_or_minus_32800() -> None:
    """$/cancel_request: the receiver "MUST send one of these responses for the
    original request": the agent's cascade withdraws its permission requests
    after our session/cancel, and each gets -32800."""
    p = accepted()
    [rid] = asked(p)
    p.to_client(p.agent.send_notification("$/cancel_request", {"requestId": rid}))
    assert any(isinstance(e, PermissionWithdrawn) for e in p.take())
    [answer] = p.to_agent(p.client.data_to_send())
    assert isinstance(answer, ErrorResponse) and answer.id == rid
    assert answer.code == REQUEST_CANCELLED


def test_client_must_answer_each_request_once_when_the_cancel_already_answered_it() -> None:
    """One response per request: a withdrawal of a request our cancel already
    answered (cancelled) gets no second answer."""
    p = accepted()
    [rid] = asked(p)
    p.client.cancel()
    p.to_client(p.agent.send_notification("$/cancel_request", {"requestId": rid}))
    assert p.client.data_to_send() == b""


def state(p: Pair) -> TurnState:
    # A call, not an attribute: mypy would narrow ``turn.state`` across asserts.
    return p.client.turn.state


def test_client_waits_for_the_idle_state_update_with_cancelled_as_the_confirmation() -> None:
    """Clients: "After session/cancel, keep accepting updates and wait for the
    idle state_update with stopReason cancelled as confirmation": the turn is
    not over at the cancel, nor at a running or requires_action update."""
    p = accepted()
    p.take()
    p.client.cancel()
    for agent_state in ("running", "requires_action"):
        p.to_client(update("state_update", state=agent_state))
    assert state(p) is TurnState.CANCEL_SENT
    assert not any(isinstance(e, TurnEnded) for e in p.take())
    p.to_client(idle("cancelled"))
    assert p.take() == [TurnEnded(stop_reason="cancelled")]
    assert state(p) is TurnState.IDLE


def test_client_keeps_accepting_updates_after_the_cancel() -> None:
    """SHOULD: "The Client SHOULD still accept tool call updates received after
    sending session/cancel" (the agent MUST send them before the idle)."""
    p = accepted()
    p.to_client(update("tool_call_update", toolCallId="c2", title="edit", status="in_progress"))
    p.take()
    p.client.cancel()
    p.take()
    p.to_client(update("tool_call_update", toolCallId="c2", status="failed"))
    p.to_client(update("agent_message_chunk", messageId="m", content={"type": "text",
                                                                     "text": "stopping"}))
    events = p.take()
    assert ToolCallUpdated(tool_call_id="c2", status="failed") in events
    assert any(getattr(e, "text", None) == "stopping" for e in events)


def test_client_marks_unfinished_tool_calls_cancelled_when_it_sends_the_cancel() -> None:
    """SHOULD: "preemptively mark all non-finished tool calls pertaining to the
    current active work as cancelled as soon as it sends session/cancel"."""
    p = accepted()
    for line in (update("tool_call_update", toolCallId="a", title="a"),
                 update("tool_call_update", toolCallId="b", title="b", status="in_progress"),
                 update("tool_call_update", toolCallId="c", title="c", status="completed")):
        p.to_client(line)
    p.take()
    p.client.cancel()
    marked = [e for e in p.take() if isinstance(e, ToolCallUpdated)]
    assert marked == [ToolCallUpdated(tool_call_id="a", status="cancelled"),
                      ToolCallUpdated(tool_call_id="b", status="cancelled")]


def test_client_must_not_take_a_cancelled_prompt_response_as_the_turns_end() -> None:
    """v2: "The session/prompt response no longer ends the turn": a cancel
    that reaches the agent before it accepted the prompt is still confirmed by
    the idle update, not by the acceptance."""
    p, req = prompting()
    p.client.cancel()
    p.to_client(p.agent.send_response(req.id, {}))
    assert state(p) is TurnState.CANCEL_SENT
    p.to_client(idle("cancelled"))
    assert p.take()[-1] == TurnEnded(stop_reason="cancelled")


def test_client_sends_no_second_cancel_and_no_cancel_without_a_turn() -> None:
    """Single flight: one session/cancel per turn (a re-send only on request),
    none with no turn running."""
    p = accepted()
    assert p.client.cancel() != b""
    assert p.client.cancel() == b""
    p.to_client(idle("cancelled"))
    assert p.client.cancel() == b""


def test_the_cancel_is_the_session_cancel_notification_naming_the_session() -> None:
    """session/cancel is a notification (no id, so no answer is waited for)
    naming the session: the exact line, unchanged from v1."""
    assert accepted().client.cancel() == (
        b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-2"}}\n')
