"""AcpClient, the sans-IO ACP core, joined to an agent-side RpcConnection.

The table pins the exact bytes the client writes in each state; the tests
after it walk the conversations (permission, tools, cancel) and check what the
agent side receives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from protocols.acp import AcpClient
from protocols.events import (
    AgentNotice,
    MessageChunk,
    OtherUpdate,
    PermissionRequested,
    PlanUpdated,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    UsageUpdated,
    UserEcho,
)
from protocols.jsonrpc import (
    IncomingNotification,
    IncomingRequest,
    LocalProtocolError,
    Response,
)
from protocols.turnstate import TurnState

from .acp_states import (
    AGENT_WITHDRAWS,
    PERMISSION_CANCELLED,
    PERMISSION_PARAMS,
    SESSION_CANCEL,
    SID,
    Pair,
    asked_permission,
    cancelled,
    fresh,
    fresh_v1,
    fresh_v2,
    in_session,
    initialized,
    prompting,
    state,
    update,
    with_tools,
)
from .helpers import drain, parse_lines

# -- exact lines ----------------------------------------------------------

INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,'
    b'"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false,"subagents":{}}}}\n'
)
INFO = b'"info":{"name":"turnvisor","title":"Turnvisor","version":"0.1.0"}'
INITIALIZE_V2 = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2,'
    + INFO + b',"capabilities":{}}}\n'
)
#: ``auto`` offers 2, with v1's member for agents that require it to parse the request.
INITIALIZE_AUTO = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2,'
    + INFO + b',"capabilities":{},'
    b'"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false,"subagents":{}}}}\n'
)
SESSION_NEW = (
    b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/work","mcpServers":[]}}\n'
)
SESSION_PROMPT = (
    b'{"jsonrpc":"2.0","id":3,"method":"session/prompt",'
    b'"params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"hi"}]}}\n'
)
PERMISSION_ALLOWED = (
    b'{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}\n'
)

# (starting state, what the caller does, the exact bytes it must write)
WRITES: list[tuple[Callable[[], Pair], Callable[[AcpClient], bytes], bytes]] = [
    (fresh_v1, lambda c: c.initialize()[1], INITIALIZE),
    (fresh_v2, lambda c: c.initialize()[1], INITIALIZE_V2),
    (fresh, lambda c: c.initialize()[1], INITIALIZE_AUTO),
    (initialized, lambda c: c.new_session("/work")[1], SESSION_NEW),
    (in_session, lambda c: c.prompt("hi")[1], SESSION_PROMPT),
    (prompting, AcpClient.cancel, SESSION_CANCEL),
    # The MUST: every pending permission is answered cancelled, before the cancel.
    (asked_permission, AcpClient.cancel, PERMISSION_CANCELLED + SESSION_CANCEL),
    (asked_permission, lambda c: c.respond_permission("0", "allow"), PERMISSION_ALLOWED),
    (asked_permission, lambda c: c.respond_permission("0", None), PERMISSION_CANCELLED),
    (with_tools, AcpClient.cancel, SESSION_CANCEL),
    # No turn running: the cancel has already settled, nothing to write.
    (in_session, AcpClient.cancel, b""),
    (cancelled, AcpClient.cancel, b""),
    # An agent that dropped the first cancel gets it again, on request.
    (cancelled, AcpClient.resend_cancel, SESSION_CANCEL),
    (prompting, AcpClient.resend_cancel, b""),
    (in_session, AcpClient.resend_cancel, b""),
]
WRITE_IDS = [
    "initialize (acp_version 1)",
    "initialize (acp_version 2)",
    "initialize (acp_version auto)",
    "session/new",
    "session/prompt",
    "session/cancel",
    "cancel answers the permission cancelled",
    "permission selected",
    "permission cancelled",
    "cancel with tools open",
    "cancel with no turn",
    "second cancel",
    "cancel re-sent",
    "no cancel to re-send",
    "no turn to re-send for",
]


@pytest.mark.parametrize(("state", "call", "expected"), WRITES, ids=WRITE_IDS)
def test_exact_lines(
    state: Callable[[], Pair], call: Callable[[AcpClient], bytes], expected: bytes
) -> None:
    p = state()
    data = call(p.client)
    assert data == expected
    # The agent side reads every line as a well-formed JSON-RPC 2.0 message.
    for ev in p.to_agent(data) if data else []:
        assert isinstance(ev, IncomingRequest | IncomingNotification | Response)


# -- conversations ----------------------------------------------------------


def test_handshake_records_session_and_agent_info() -> None:
    p = in_session()
    assert p.client.session_id == SID
    assert p.client.agent_info == {"name": "fake"}
    assert state(p) is TurnState.IDLE


def test_turn_streams_then_ends() -> None:
    p = prompting()
    events = p.to_client(
        p.agent.send_notification(
            "session/update",
            update("agent_message_chunk", content={"type": "text", "text": "hel"}, messageId="m1"),
        )
        + p.agent.send_notification(
            "session/update", update("agent_message_chunk", content={"type": "text", "text": "lo"})
        )
        + p.agent.send_response(3, {"stopReason": "end_turn"})
    )
    assert events == [
        MessageChunk(text="hel", message_id="m1"),
        MessageChunk(text="lo"),
        TurnEnded(stop_reason="end_turn"),
    ]
    assert state(p) is TurnState.IDLE


def test_cancel_then_agent_answers_cancelled() -> None:
    p = prompting()
    [cancel] = p.to_agent(p.client.cancel())
    assert cancel == IncomingNotification(method="session/cancel", params={"sessionId": SID})
    assert state(p) is TurnState.CANCEL_SENT
    # Chunks already in flight still arrive, then the prompt's answer.
    events = p.to_client(
        p.agent.send_notification(
            "session/update",
            update("agent_message_chunk", content={"type": "text", "text": "late"}),
        )
        + p.agent.send_response(3, {"stopReason": "cancelled"})
    )
    assert events == [MessageChunk(text="late"), TurnEnded(stop_reason="cancelled")]
    assert state(p) is TurnState.IDLE
    # The same client runs the next turn.
    rid, _ = p.client.prompt("again")
    assert rid == 4


def test_answering_an_unknown_permission_is_a_local_error() -> None:
    with pytest.raises(LocalProtocolError):
        asked_permission().client.respond_permission("99", "allow")


def test_prompt_error_ends_the_turn_with_error() -> None:
    p = prompting()
    events = p.to_client(p.agent.send_error(3, -32603, "model exploded"))
    assert events == [TurnEnded(stop_reason="error", error="model exploded")]
    assert state(p) is TurnState.IDLE


@pytest.mark.parametrize(
    ("result", "stop"),
    [
        ({"stopReason": "max_tokens"}, "max_tokens"),
        ({"stopReason": "refusal", "usage": None, "_meta": {}}, "refusal"),
        ({"stopReason": "brand_new_reason"}, "end_turn"),
        ({}, "end_turn"),
    ],
)
def test_prompt_results(result: dict[str, Any], stop: str) -> None:
    p = prompting()
    events = p.to_client(p.agent.send_response(3, result))
    assert events[-1] == TurnEnded(stop_reason=stop)  # type: ignore[arg-type]


# session/update -> event; liberal: unknown kinds and odd shapes pass through.
UPDATES: list[tuple[str, dict[str, Any], list[object]]] = [
    (
        "agent chunk",
        update("agent_message_chunk", content={"type": "text", "text": "a"}),
        [MessageChunk(text="a")],
    ),
    (
        "thought chunk",
        update("agent_thought_chunk", content={"type": "text", "text": "t"}),
        [MessageChunk(text="t", channel="thought")],
    ),
    (
        # Outside a history replay: the agent echoing the prompt, not its answer.
        "user chunk",
        update("user_message_chunk", content={"type": "text", "text": "u"}, messageId="u1"),
        [UserEcho(text="u", message_id="u1")],
    ),
    (
        "image chunk",
        update(
            "agent_message_chunk",
            content={"type": "image", "data": "AA==", "mimeType": "image/png"},
        ),
        [OtherUpdate(kind="agent_message_chunk", payload=None)],
    ),
    (
        "tool call",
        update("tool_call", toolCallId="t", title="grep", kind="search"),
        [ToolCallStarted(tool_call_id="t", title="grep", status="pending", kind="search")],
    ),
    (
        "tool update",
        update("tool_call_update", toolCallId="t", status="failed"),
        [ToolCallUpdated(tool_call_id="t", status="failed")],
    ),
    (
        "plan",
        update("plan", entries=[{"content": "a", "priority": "high", "status": "pending"}]),
        [PlanUpdated(entries=({"content": "a", "priority": "high", "status": "pending"},))],
    ),
    (
        "usage_update",
        update("usage_update", used=11, size=200000),
        [UsageUpdated(usage={"input_tokens": None, "output_tokens": None, "context_used": 11,
                             "context_size": 200000, "cost": None})],
    ),
    (
        "unknown kind",
        update("brand_new_kind", x=1),
        [OtherUpdate(kind="brand_new_kind", payload=None)],
    ),
    (
        "known kind, wrong shape",
        update("tool_call", title=5),
        [OtherUpdate(kind="tool_call", payload=None), AgentNotice],
    ),
    ("no update kind", {"sessionId": SID, "update": {}}, [AgentNotice]),
]


@pytest.mark.parametrize(
    ("params", "expected"), [u[1:] for u in UPDATES], ids=[u[0] for u in UPDATES]
)
def test_session_updates(params: dict[str, Any], expected: list[object]) -> None:
    p = prompting()
    events = p.to_client(p.agent.send_notification("session/update", params))
    assert [
        type(e) if isinstance(x, type) else e for e, x in zip(events, expected, strict=True)
    ] == expected
    if isinstance(events[0], OtherUpdate):
        assert events[0].payload == params["update"]  # passed through untouched


def test_other_notifications_pass_through() -> None:
    p = prompting()
    events = p.to_client(p.agent.send_notification("_vendor/thing", {"a": 1}))
    assert events == [OtherUpdate(kind="_vendor/thing", payload=None)]


def test_garbage_line_is_a_notice_and_the_stream_goes_on() -> None:
    p = prompting()
    events = p.to_client(
        b"this is not JSON {\n" + p.agent.send_response(3, {"stopReason": "end_turn"})
    )
    assert isinstance(events[0], AgentNotice)
    assert "not JSON" in events[0].message
    assert events[1:] == [TurnEnded(stop_reason="end_turn")]


def test_turn_lines_parse_back() -> None:
    """What the core writes is what the ACP schema expects on the agent side."""
    p = asked_permission()
    [answer, cancel] = parse_lines(p.client.cancel())
    assert answer["result"] == {"outcome": {"outcome": "cancelled"}}
    assert cancel["params"] == {"sessionId": SID}


# -- request cancellation ($/cancel_request) --------------------------------



def test_withdrawal_of_an_answered_request_needs_no_answer() -> None:
    p = asked_permission()
    p.client.respond_permission("0", "allow")
    drain(p.client)
    [notice] = p.to_client(AGENT_WITHDRAWS)
    assert isinstance(notice, AgentNotice) and notice.level == "info"
    assert p.client.data_to_send() == b""


@pytest.mark.parametrize(
    "params", [None, {}, {"requestId": None}, {"requestId": [0]}, {"requestId": True}]
)
def test_malformed_withdrawal_is_a_notice(params: Any) -> None:
    p = asked_permission()
    [notice] = p.to_client(p.agent.send_notification("$/cancel_request", params))
    assert isinstance(notice, AgentNotice)
    assert p.client.pending_permissions == ("0",)


WE_WITHDRAW_INITIALIZE = (
    b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}\n'
)


def test_we_withdraw_a_request_that_timed_out() -> None:
    p = fresh()
    rid, _ = p.client.initialize()
    data = p.client.cancel_request(rid)
    assert data == WE_WITHDRAW_INITIALIZE
    assert p.to_agent(data) == [
        IncomingNotification(method="$/cancel_request", params={"requestId": 1})
    ]
    assert p.client.rpc.pending == {}
    # Withdrawing it twice, or a request already answered, writes nothing.
    assert p.client.cancel_request(rid) == b""
    assert in_session().client.cancel_request(2) == b""


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":-32800,"message":"Request cancelled"}}\n',
         "confirmed the withdrawal of initialize"),
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}\n',
         "answered the withdrawn initialize (1) with an error"),
        (b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}\n',
         "late answer to the withdrawn initialize"),
    ],
    ids=["-32800", "other error", "late result"],
)
def test_the_answer_to_a_withdrawn_request_is_reported(answer: bytes, said: str) -> None:
    p = fresh()
    rid, _ = p.client.initialize()
    p.client.cancel_request(rid)
    [notice] = p.to_client(answer)
    assert isinstance(notice, AgentNotice)
    assert said in notice.message
    assert notice.level == "info"
    assert p.client.agent_info == {}  # a late result is not taken as the answer
    # Reported once: the same id again is an unknown reply.
    [again] = p.to_client(answer)
    assert isinstance(again, AgentNotice) and "unknown request id" in again.message


def test_withdrawn_session_new_does_not_open_the_session() -> None:
    p = initialized()
    rid, _ = p.client.new_session("/work")
    assert p.client.cancel_request(rid) == (
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}\n'
    )
    [notice] = p.to_client(p.agent.send_response(rid, {"sessionId": SID}))
    assert isinstance(notice, AgentNotice)
    assert p.client.session_id is None


# -- what a permission request is about --------------------------------------


def test_permission_details_carry_the_tool_call() -> None:
    p = prompting()
    tool = {
        "toolCallId": "call-2", "title": "Run make", "kind": "execute", "status": "pending",
        "rawInput": {"command": ["make", "test"], "cwd": "/work"},
        "content": [{"type": "content", "content": {"type": "text", "text": "make test"}}],
        "locations": [{"path": "/work/Makefile"}],
    }
    params = {**PERMISSION_PARAMS, "toolCall": tool}
    [req] = p.to_client(p.agent.send_request("session/request_permission", params)[1])
    assert isinstance(req, PermissionRequested)
    assert req.details == {
        "kind": "execute",
        "raw_input": {"command": ["make", "test"], "cwd": "/work"},
        "content": tool["content"],
        "locations": [{"path": "/work/Makefile"}],
    }


def test_bare_permission_has_no_details() -> None:
    p = prompting()
    [req] = p.to_client(p.agent.send_request("session/request_permission", PERMISSION_PARAMS)[1])
    assert isinstance(req, PermissionRequested)
    assert req.details == {}


# -- the user's words: an echo, or history ----------------------------------


def test_user_chunk_is_history_while_replaying() -> None:
    p = in_session()
    chunk = p.agent.send_notification(
        "session/update", update("user_message_chunk", content={"type": "text", "text": "hi"})
    )
    p.client.replaying = True
    assert p.to_client(chunk) == []  # consumed: the supervisor has the history
    p.client.replaying = False
    assert p.to_client(chunk) == [UserEcho(text="hi")]


_TEXT = {"type": "text", "text": "hi"}


@pytest.mark.parametrize(("update", "plain"), [
    ({"sessionUpdate": "agent_message_chunk", "content": _TEXT}, True),
    ({"sessionUpdate": "agent_message_chunk", "content": _TEXT, "messageId": "m1"}, True),
    ({"sessionUpdate": "agent_thought_chunk", "content": _TEXT}, True),
    ({"sessionUpdate": "agent_message_chunk", "_meta": {"a": 1},
      "content": {**_TEXT, "_meta": {"b": 2}}}, True),
    # Any other shape is the schema model's to judge.
    ({"sessionUpdate": "agent_message_chunk",
      "content": {**_TEXT, "annotations": {"priority": 0.5}}}, False),
    ({"sessionUpdate": "agent_message_chunk", "content": _TEXT, "extra": 1}, False),
    ({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": 5}}, False),
    ({"sessionUpdate": "agent_message_chunk", "content": _TEXT, "messageId": 7}, False),
    ({"sessionUpdate": "agent_message_chunk", "content": _TEXT, "_meta": "no"}, False),
    ({"sessionUpdate": "agent_message_chunk",
      "content": {"type": "image", "data": "AAAA", "mimeType": "image/png"}}, False),
])
def test_plain_text_chunks_map_as_the_schema_model_maps_them(update: dict[str, Any],
                                                             plain: bool) -> None:
    """The field-by-field path for plain text chunks gives what the model's
    path gives, and takes nothing else."""
    from protocols import acp_incoming

    kind = update["sessionUpdate"]
    fast = acp_incoming.plain_text_chunk(acp_incoming.TEXT_CHUNK_CHANNELS[kind], update)
    assert (fast is not None) == plain
    if fast is not None:
        parsed = acp_incoming.models().UPDATE_MODELS[kind].model_validate(update)
        assert fast == acp_incoming._from_model(kind, parsed, update, {})


@pytest.mark.parametrize(("result", "plain"), [
    ({"stopReason": "cancelled"}, True),
    ({"stopReason": "end_turn", "_meta": {"a": 1}}, True),
    ({"stopReason": "max_turn_requests", "_meta": None}, True),
    # Any other shape is the schema model's to judge.
    ({"stopReason": "end_turn", "usage": {"totalTokens": 3, "inputTokens": 1,
                                          "outputTokens": 2}}, False),
    ({"stopReason": "error"}, False),
    ({"stopReason": "finished"}, False),
    ({"stopReason": 5}, False),
    ({"stopReason": "cancelled", "_meta": "no"}, False),
    ({}, False),
    (None, False),
])
def test_plain_prompt_answers_read_as_the_schema_model_reads_them(result: Any,
                                                                  plain: bool) -> None:
    """The field-by-field path for a prompt's plain answer gives the model's
    stop reason, and takes nothing else."""
    from protocols import acp_incoming

    fast = acp_incoming.plain_stop_reason(result)
    assert (fast is not None) == plain
    if fast is not None:
        assert fast == acp_incoming.models().PromptResponse.model_validate(result).stop_reason


def test_a_cancelled_turn_ends_without_the_schema_models(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancel's plain answer (and a plain text chunk before it) never waits
    for the models: a first cancel while they are still being built (the
    server's warm-up, on a worker thread, holds the import) is not held up."""
    from protocols import acp_incoming

    p = prompting()

    def unbuilt() -> None:
        raise AssertionError("the schema models were asked for")

    monkeypatch.setattr(acp_incoming, "models", unbuilt)
    chunk = p.agent.send_notification(
        "session/update", update("agent_message_chunk", content={"type": "text", "text": "hi"}))
    assert p.to_client(chunk) == [MessageChunk(text="hi", channel="agent")]
    p.to_agent(p.client.cancel())
    assert p.to_client(p.agent.send_response(3, {"stopReason": "cancelled"})) == [
        TurnEnded(stop_reason="cancelled")]
