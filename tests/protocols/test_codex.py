"""CodexClient, the sans-IO Codex app-server core, joined to an agent-side
RpcConnection (the Codex dialect: no ``jsonrpc`` member)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from protocols.codex import CodexClient
from protocols.events import (
    AgentNotice,
    MessageChunk,
    OtherUpdate,
    PermissionRequested,
    PermissionResolved,
    PlanUpdated,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
)
from protocols.jsonrpc import (
    ErrorResponse,
    IncomingNotification,
    IncomingRequest,
    LocalProtocolError,
    PeerClosed,
    Response,
)
from protocols.turnstate import TurnState

from .codex_states import (
    APPROVAL_PARAMS,
    DECLINE,
    INTERRUPT,
    PERMISSIONS_PARAMS,
    RESOLVED,
    THREAD,
    TURN,
    V2_OPTIONS,
    Pair,
    asked_approval,
    asked_permissions,
    cancelled_before_turn_id,
    completed,
    fresh,
    in_thread,
    in_turn,
    initialized,
    interrupted,
    notify,
    state,
    turn_result,
    turn_sent,
)
from .helpers import drain

# -- exact lines ----------------------------------------------------------

INITIALIZE = (
    b'{"id":1,"method":"initialize",'
    b'"params":{"clientInfo":{"name":"turnvisor","title":null,"version":"0.1.0"}}}\n'
)
INITIALIZED = b'{"method":"initialized"}\n'
THREAD_START = b'{"id":2,"method":"thread/start","params":{"cwd":"/work"}}\n'
THREAD_START_EXTRA = (
    b'{"id":2,"method":"thread/start","params":{"cwd":"/work","approvalPolicy":"never",'
    b'"sandbox":"read-only","ephemeral":true}}\n'
)
TURN_START = (
    b'{"id":3,"method":"turn/start",'
    b'"params":{"threadId":"thr-1","input":[{"type":"text","text":"hi"}]}}\n'
)
ACCEPT = b'{"id":0,"result":{"decision":"accept"}}\n'
ACCEPT_SESSION = b'{"id":0,"result":{"decision":"acceptForSession"}}\n'
DENY_AND_STOP = b'{"id":0,"result":{"decision":"cancel"}}\n'
GRANT_TURN = (
    b'{"id":0,"result":{"permissions":{"network":{"enabled":true},'
    b'"fileSystem":{"write":["/work/out"]}},"scope":"turn"}}\n'
)
GRANT_SESSION = GRANT_TURN.replace(b'"turn"', b'"session"')
GRANT_NOTHING = b'{"id":0,"result":{"permissions":{},"scope":"turn"}}\n'

# (starting state, what the caller does, the exact bytes it must write)
WRITES: list[tuple[Callable[[], Pair], Callable[[CodexClient], bytes], bytes]] = [
    (fresh, lambda c: c.initialize()[1], INITIALIZE),
    (initialized, CodexClient.initialized, INITIALIZED),
    (initialized, lambda c: c.thread_start("/work")[1], THREAD_START),
    (
        initialized,
        lambda c: c.thread_start(
            "/work", approvalPolicy="never", sandbox="read-only", ephemeral=True
        )[1],
        THREAD_START_EXTRA,
    ),
    (in_thread, lambda c: c.turn_start("hi")[1], TURN_START),
    (in_turn, CodexClient.cancel, INTERRUPT),
    # Interrupt first, so the agent stops before it hears the decline (a
    # decline alone lets the turn go on), then the pending approval declined.
    (asked_approval, CodexClient.cancel, INTERRUPT + DECLINE),
    (asked_approval, lambda c: c.respond_permission("0", "accept"), ACCEPT),
    (asked_approval, lambda c: c.respond_permission("0", None), DECLINE),
    (asked_approval, lambda c: c.respond_permission("0", "decline"), DECLINE),
    (asked_approval, lambda c: c.respond_permission("0", "acceptForSession"), ACCEPT_SESSION),
    (asked_approval, lambda c: c.respond_permission("0", "cancel"), DENY_AND_STOP),
    (asked_permissions, lambda c: c.respond_permission("0", "accept"), GRANT_TURN),
    (asked_permissions, lambda c: c.respond_permission("0", "acceptForSession"), GRANT_SESSION),
    (asked_permissions, lambda c: c.respond_permission("0", "decline"), GRANT_NOTHING),
    (asked_permissions, lambda c: c.respond_permission("0", "cancel"), GRANT_NOTHING),
    (asked_permissions, CodexClient.cancel, INTERRUPT + GRANT_NOTHING),
    # No active turn means already settled: nothing to write.
    (in_thread, CodexClient.cancel, b""),
    (interrupted, CodexClient.cancel, b""),
    # The turn id is not known yet: the interrupt is owed, not written.
    (turn_sent, CodexClient.cancel, b""),
    # An agent that went on after the interrupt gets it again (a new request id).
    (interrupted, CodexClient.resend_cancel, INTERRUPT.replace(b'"id":4', b'"id":5')),
    (in_turn, CodexClient.resend_cancel, b""),
    (cancelled_before_turn_id, CodexClient.resend_cancel, b""),
]
WRITE_IDS = [
    "initialize",
    "initialized",
    "thread/start",
    "thread/start with extras",
    "turn/start",
    "turn/interrupt",
    "cancel declines the approval",
    "approval accepted",
    "approval declined",
    "approval declined (chosen)",
    "approval accepted for the session",
    "approval cancel: deny and stop",
    "permissions granted for the turn",
    "permissions granted for the session",
    "permissions denied",
    "permissions denied and stop",
    "cancel denies the permissions",
    "cancel with no turn",
    "second cancel",
    "cancel before the turn id",
    "interrupt re-sent",
    "no interrupt to re-send",
    "interrupt still owed",
]


@pytest.mark.parametrize(("state", "call", "expected"), WRITES, ids=WRITE_IDS)
def test_exact_lines(
    state: Callable[[], Pair], call: Callable[[CodexClient], bytes], expected: bytes
) -> None:
    p = state()
    data = call(p.client)
    assert data == expected
    for ev in p.to_agent(data) if data else []:
        assert isinstance(ev, IncomingRequest | IncomingNotification | Response)


# -- the turn and its interrupt --------------------------------------------


def test_turn_id_is_the_operation_id() -> None:
    p = turn_sent()
    assert p.client.turn_id is None
    [resp] = p.to_client(p.agent.send_response(3, turn_result()))
    assert isinstance(resp, Response)
    assert p.client.turn_id == TURN


def test_interrupt_then_completed_interrupted_is_cancelled() -> None:
    p = in_turn()
    [req] = p.to_agent(p.client.cancel())
    assert req == IncomingRequest(
        id=4, method="turn/interrupt", params={"threadId": THREAD, "turnId": TURN}
    )
    assert state(p) is TurnState.CANCEL_SENT
    # The interrupt's answer {} does not end the turn; turn/completed does.
    [ack] = p.to_client(p.agent.send_response(4, {}))
    assert ack == Response(id=4, method="turn/interrupt", result={})
    assert state(p) is TurnState.CANCEL_SENT
    assert completed(p, "interrupted") == [TurnEnded(stop_reason="cancelled", turn_id=TURN)]
    assert state(p) is TurnState.IDLE
    assert p.client.turn_id is None
    assert p.client.cancel() == b""  # settled


def test_cancel_before_turn_id_is_owed_and_sent_when_the_id_arrives() -> None:
    p = turn_sent()
    assert p.client.cancel() == b""
    assert p.client.data_to_send() == b""
    p.to_client(p.agent.send_response(3, turn_result()))
    assert p.client.data_to_send() == INTERRUPT
    assert p.client.data_to_send() == b""  # owed once, sent once


def test_owed_interrupt_goes_out_on_turn_started_too() -> None:
    p = turn_sent()
    p.client.cancel()
    notify(p, "turn/started", {"threadId": THREAD, **turn_result()})
    assert p.client.data_to_send() == INTERRUPT
    p.to_client(p.agent.send_response(3, turn_result()))
    assert p.client.data_to_send() == b""


def test_owed_interrupt_dropped_when_turn_start_fails() -> None:
    p = turn_sent()
    p.client.cancel()
    events = p.to_client(p.agent.send_error(3, -32600, "a turn is already running"))
    assert events == [
        ErrorResponse(id=3, method="turn/start", code=-32600, message="a turn is already running"),
        TurnEnded(stop_reason="error", error="a turn is already running"),
    ]
    assert p.client.data_to_send() == b""
    assert state(p) is TurnState.IDLE


def test_owed_interrupt_when_the_agent_exits_mid_answer() -> None:
    """The turn/start answer is the agent's last, unterminated line: the core
    learns the id but must not try to write to an agent that is gone."""
    p = turn_sent()
    p.client.cancel()
    p.client.receive_data(p.agent.send_response(3, turn_result()).rstrip(b"\n"))
    p.client.receive_data(b"")
    events = [p.client.next_event(), p.client.next_event()]
    assert isinstance(events[-1], PeerClosed)
    assert state(p) is TurnState.CLOSED


@pytest.mark.parametrize(
    ("status", "error", "expected"),
    [
        ("completed", None, TurnEnded(stop_reason="end_turn", turn_id=TURN)),
        ("interrupted", None, TurnEnded(stop_reason="cancelled", turn_id=TURN)),
        (
            "failed",
            {"message": "usage limit"},
            TurnEnded(stop_reason="error", turn_id=TURN, error="usage limit"),
        ),
        ("somethingNew", None, TurnEnded(stop_reason="error", turn_id=TURN)),
    ],
)
def test_turn_status_maps_to_stop_reason(status: str, error: Any, expected: TurnEnded) -> None:
    p = in_turn()
    assert completed(p, status, error=error) == [expected]


def test_completion_of_another_turn_is_a_notice() -> None:
    p = in_turn()
    [notice] = completed(p, "completed", turn_id="other")
    assert isinstance(notice, AgentNotice)
    assert state(p) is TurnState.PROMPTING
    assert completed(p, "completed") == [TurnEnded(stop_reason="end_turn", turn_id=TURN)]


def test_completion_with_no_turn_running_is_a_notice() -> None:
    p = in_thread()
    [notice] = completed(p, "completed")
    assert isinstance(notice, AgentNotice)


def test_completion_before_turn_start_answer_ends_the_turn() -> None:
    p = turn_sent()
    assert completed(p, "completed") == [TurnEnded(stop_reason="end_turn", turn_id=TURN)]


# -- approvals ------------------------------------------------------------



def test_v1_approval_declined_as_denied() -> None:
    p = in_turn()
    _, data = p.agent.send_request(
        "execCommandApproval",
        {"conversationId": THREAD, "callId": "call-1", "command": ["rm", "-rf", "build"]},
    )
    [req] = p.to_client(data)
    assert isinstance(req, PermissionRequested)
    assert (req.title, req.tool_call_id) == ("rm -rf build", "call-1")
    assert [o.option_id for o in req.options] == [
        "approved",
        "approved_for_session",
        "denied",
        "abort",
    ]
    # codex 0.169's ReviewDecision: ``denied`` is an object carrying the rejection.
    assert p.client.cancel() == INTERRUPT + (
        b'{"id":0,"result":{"decision":{"denied":{"rejection":"The user denied this request."}}}}\n'
    )


def test_a_decision_not_offered_is_refused_and_the_approval_kept() -> None:
    p = asked_approval()
    with pytest.raises(LocalProtocolError, match="approved"):
        p.client.respond_permission("0", "approved")  # a v1 word for a v2 request
    assert p.client.pending_permissions == ("0",)


def test_approval_details_say_what_is_asked() -> None:
    p = in_turn()
    params = {**APPROVAL_PARAMS, "cwd": "/work/sub", "startedAtMs": 1}
    _, data = p.agent.send_request("item/commandExecution/requestApproval", params)
    [req] = p.to_client(data)
    assert isinstance(req, PermissionRequested)
    assert req.details == {
        "command": "touch file.txt", "cwd": "/work/sub", "reason": "Write to disk"
    }


@pytest.mark.parametrize(
    ("option", "interrupts"),
    [("accept", False), ("acceptForSession", False), ("decline", False), ("cancel", True)],
)
def test_each_decision_is_resolved_and_says_whether_it_stops_the_turn(
    option: str, interrupts: bool
) -> None:
    p = asked_approval()
    [answer] = p.to_agent(p.client.respond_permission("0", option))
    assert answer == Response(
        id=0, method="item/commandExecution/requestApproval", result={"decision": option}
    )
    # The event comes out with the next read of the agent's output.
    assert drain(p.client) == [PermissionResolved(
        request_id="0", option_id=option, interrupts_turn=interrupts
    )]


def test_human_checkpoint_offers_no_session_wide_answer() -> None:
    p = in_turn()
    params = {**APPROVAL_PARAMS, "kind": "humanCommand"}
    _, data = p.agent.send_request("item/commandExecution/requestApproval", params)
    [req] = p.to_client(data)
    assert isinstance(req, PermissionRequested)
    assert [o.option_id for o in req.options] == ["accept", "decline", "cancel"]
    assert req.details["kind"] == "humanCommand"
    with pytest.raises(LocalProtocolError):
        p.client.respond_permission("0", "acceptForSession")
    # A cancel still answers "decline" (the interrupt stops the turn).
    assert p.client.cancel() == INTERRUPT + DECLINE


def test_human_checkpoint_asked_after_interrupt_is_declined() -> None:
    p = interrupted()
    params = {**APPROVAL_PARAMS, "kind": "humanCommand"}
    p.to_client(p.agent.send_request("item/commandExecution/requestApproval", params)[1])
    assert p.client.data_to_send() == DECLINE


def test_file_change_approval_shows_the_changes_of_its_item() -> None:
    p = in_turn()
    changes = [{"path": "/work/a.py", "kind": {"type": "update"}, "diff": "@@ -1 +1 @@\n-a\n+b"}]
    notify(p, "item/started", {"threadId": THREAD, "turnId": TURN, "item": {
        "type": "fileChange", "id": "f1", "status": "inProgress", "changes": changes}})
    _, data = p.agent.send_request("item/fileChange/requestApproval", {
        "threadId": THREAD, "turnId": TURN, "itemId": "f1", "startedAtMs": 1})
    [req] = p.to_client(data)
    assert isinstance(req, PermissionRequested)
    assert req.title == "Apply file changes: /work/a.py"
    assert req.tool_call_id == "f1"
    assert req.details == {"changes": changes}
    assert [o.name for o in req.options] == [
        "Allow", "Allow for this session", "Deny", "Deny and stop"
    ]


def test_permissions_request_is_served_not_refused() -> None:
    p = in_turn()
    _, data = p.agent.send_request("item/permissions/requestApproval", PERMISSIONS_PARAMS)
    [req] = p.to_client(data)
    assert p.client.data_to_send() == b""  # no "method not found"
    assert req == PermissionRequested(
        request_id="0", title="Needs the network", tool_call_id="item-8", options=V2_OPTIONS
    )
    assert isinstance(req, PermissionRequested)
    assert req.details == {
        "cwd": "/work", "reason": "Needs the network",
        "permissions": PERMISSIONS_PARAMS["permissions"],
    }
    [answer] = p.to_agent(p.client.respond_permission("0", "cancel"))
    assert answer == Response(
        id=0, method="item/permissions/requestApproval",
        result={"permissions": {}, "scope": "turn"},
    )
    assert drain(p.client) == [
        PermissionResolved(request_id="0", option_id="cancel", interrupts_turn=True)
    ]




def test_server_resolving_an_answered_approval_is_just_news() -> None:
    p = asked_approval()
    p.client.respond_permission("0", "accept")
    events = p.to_client(RESOLVED)
    assert events[0] == PermissionResolved(request_id="0", option_id="accept")
    assert events[1:] == [OtherUpdate(kind="serverRequest/resolved", payload=None)]


# -- streamed items ---------------------------------------------------------


# notification -> events (extra members such as emittedAtMs are ignored)
NOTIFICATIONS: list[tuple[str, str, dict[str, Any], list[object]]] = [
    (
        "delta",
        "item/agentMessage/delta",
        {"threadId": THREAD, "turnId": TURN, "itemId": "msg_1", "delta": "tok0 "},
        [MessageChunk(text="tok0 ", message_id="msg_1")],
    ),
    (
        "reasoning",
        "item/reasoning/textDelta",
        {"itemId": "r", "delta": "hmm"},
        [MessageChunk(text="hmm", channel="thought")],
    ),
    (
        "reasoning summary",
        "item/reasoning/summaryTextDelta",
        {"delta": "so"},
        [MessageChunk(text="so", channel="thought")],
    ),
    (
        "command started",
        "item/started",
        {"item": {"type": "commandExecution", "id": "c", "command": "ls", "status": "inProgress"}},
        [ToolCallStarted(tool_call_id="c", title="ls", status="in_progress", kind="execute")],
    ),
    (
        "file change started",
        "item/started",
        {"item": {"type": "fileChange", "id": "f"}},
        [ToolCallStarted(tool_call_id="f", title="fileChange", status="in_progress", kind="other")],
    ),
    (
        "command completed",
        "item/completed",
        {"item": {"type": "commandExecution", "id": "c", "status": "completed", "exitCode": 0}},
        [ToolCallUpdated(tool_call_id="c", status="completed")],
    ),
    (
        "command failed",
        "item/completed",
        {"item": {"type": "commandExecution", "id": "c", "status": "failed"}},
        [ToolCallUpdated(tool_call_id="c", status="failed")],
    ),
    (
        "command declined",
        "item/completed",
        {"item": {"type": "commandExecution", "id": "c", "status": "declined"}},
        [ToolCallUpdated(tool_call_id="c", status="failed")],
    ),
    (
        "user message item",
        "item/started",
        {"item": {"type": "userMessage", "id": "u"}},
        [OtherUpdate(kind="item/started", payload=None)],
    ),
    (
        "plan",
        "turn/plan/updated",
        {
            "plan": [
                {"step": "read", "status": "completed"},
                {"step": "fix", "status": "inProgress"},
                {"step": "test", "status": "pending"},
                "junk",
            ]
        },
        [
            PlanUpdated(
                entries=(
                    {"content": "read", "status": "completed", "priority": "medium"},
                    {"content": "fix", "status": "in_progress", "priority": "medium"},
                    {"content": "test", "status": "pending", "priority": "medium"},
                )
            )
        ],
    ),
    ("error", "error", {"error": {"message": "stream disconnected"}}, [AgentNotice]),
    (
        "turn started",
        "turn/started",
        {"threadId": THREAD, **turn_result()},
        [OtherUpdate(kind="turn/started", payload=None)],
    ),
    (
        "unknown method",
        "thread/tokenUsage/updated",
        {"tokenUsage": {}},
        [OtherUpdate(kind="thread/tokenUsage/updated", payload=None)],
    ),
    ("delta without text", "item/agentMessage/delta", {"delta": 5}, []),
    ("completed without turn", "turn/completed", {"threadId": THREAD}, [AgentNotice]),
]


@pytest.mark.parametrize(
    ("method", "params", "expected"),
    [n[1:] for n in NOTIFICATIONS],
    ids=[n[0] for n in NOTIFICATIONS],
)
def test_notifications(method: str, params: dict[str, Any], expected: list[object]) -> None:
    p = in_turn()
    events = notify(p, method, {**params, "emittedAtMs": 1796212069007})
    assert [
        type(e) if isinstance(x, type) else e for e, x in zip(events, expected, strict=True)
    ] == expected


