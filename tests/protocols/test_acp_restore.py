"""Restoring an ACP conversation in a new agent process, sans-IO: the
capabilities ``initialize`` advertises, ``session/resume`` (no replay) and
``session/load`` (the replay consumed, not surfaced as live output), and the
adapter's choice between them, bounded and withdrawn on timeout.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from protocols.acp import AcpClient
from protocols.adapters import AcpAdapter, AdapterTimeouts, RestoreUnsupported
from protocols.events import (
    AgentNotice,
    CommandsChanged,
    HistoryReplayed,
    MessageChunk,
    UserEcho,
)
from protocols.jsonrpc import (
    Dialect,
    ErrorResponse,
    IncomingNotification,
    IncomingRequest,
    LocalProtocolError,
    Response,
)
from protocols.transport import AgentTimeout

from .helpers import ConnectionPair, drain, parse_lines
from .test_transport import ScriptedAgent

OLD = "sess-old"
Pair = ConnectionPair[AcpClient]

#: ``agentCapabilities`` as real agents advertise them (shared/reference
#: transcripts): claude-agent-acp 0.101.0 both ways, gemini 0.61.0 and auggie
#: 0.36.0 load only, claude-code-acp 0.16.2 both.
CLAUDE_AGENT_ACP: dict[str, Any] = {
    "_meta": {"claudeCode": {"promptQueueing": True}},
    "promptCapabilities": {"image": True, "embeddedContext": True},
    "mcpCapabilities": {"http": True, "sse": True}, "loadSession": True,
    "sessionCapabilities": {"additionalDirectories": {}, "close": {}, "delete": {}, "fork": {},
                            "list": {}, "resume": {}},
}
GEMINI: dict[str, Any] = {
    "loadSession": True,
    "promptCapabilities": {"image": True, "audio": True, "embeddedContext": True},
    "mcpCapabilities": {"http": True, "sse": True},
}
AUGGIE: dict[str, Any] = {
    "loadSession": True, "promptCapabilities": {"image": True},
    "sessionCapabilities": {"list": {}},
}
CLAUDE_CODE_ACP: dict[str, Any] = {
    "promptCapabilities": {"image": True, "embeddedContext": True},
    "mcpCapabilities": {"http": True, "sse": True}, "loadSession": True,
    "sessionCapabilities": {"fork": {}, "list": {}, "resume": {}},
}
BOTH: dict[str, Any] = {"loadSession": True, "sessionCapabilities": {"resume": {}}}
LOAD_ONLY: dict[str, Any] = {"loadSession": True}
RESUME_ONLY: dict[str, Any] = {"loadSession": False, "sessionCapabilities": {"resume": {}}}

SESSION_LOAD = (
    b'{"jsonrpc":"2.0","id":2,"method":"session/load","params":'
    b'{"sessionId":"sess-old","cwd":"/work","mcpServers":[]}}\n'
)
SESSION_RESUME = (
    b'{"jsonrpc":"2.0","id":2,"method":"session/resume","params":'
    b'{"sessionId":"sess-old","cwd":"/work","mcpServers":[]}}\n'
)


def initialized(caps: dict[str, Any]) -> Pair:
    p = ConnectionPair(AcpClient(), Dialect.JSONRPC2)
    [req] = p.to_agent(p.client.initialize()[1])
    assert isinstance(req, IncomingRequest)
    p.to_client(p.agent.send_response(req.id, {
        "protocolVersion": 1, "agentCapabilities": caps, "authMethods": [],
    }))
    return p


def update(kind: str, session_id: str = OLD, **fields: Any) -> dict[str, Any]:
    return {"sessionId": session_id, "update": {"sessionUpdate": kind, **fields}}


def text(kind: str, value: str, session_id: str = OLD) -> dict[str, Any]:
    return update(kind, session_id, content={"type": "text", "text": value})


#: A two-turn conversation as an agent replays it.
HISTORY: list[dict[str, Any]] = [
    text("user_message_chunk", "first"),
    text("agent_message_chunk", "echo first"),
    update("tool_call", toolCallId="t1", title="ls", status="pending"),
    update("tool_call_update", toolCallId="t1", status="completed"),
    text("user_message_chunk", "second"),
    text("agent_thought_chunk", "hmm"),
    text("agent_message_chunk", "echo second"),
]


def replay(p: Pair, history: list[dict[str, Any]] = HISTORY) -> list[object]:
    events: list[object] = []
    for params in history:
        events += p.to_client(p.agent.send_notification("session/update", params))
    return events


# -- capabilities ------------------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "can_resume", "can_load"),
    [
        (CLAUDE_AGENT_ACP, True, True),
        (CLAUDE_CODE_ACP, True, True),
        (GEMINI, False, True),
        (AUGGIE, False, True),
        ({}, False, False),
        ({"loadSession": False, "sessionCapabilities": {"list": {}}}, False, False),
        # Wrong shapes advertise nothing.
        ({"loadSession": "yes", "sessionCapabilities": {"resume": True}}, False, False),
        ({"sessionCapabilities": None}, False, False),
    ],
)
def test_capabilities_come_from_initialize(
    caps: dict[str, Any], can_resume: bool, can_load: bool
) -> None:
    p = initialized(caps)
    assert (p.client.can_resume, p.client.can_load) == (can_resume, can_load)
    assert p.client.agent_capabilities == caps


def test_nothing_is_advertised_before_initialize_is_answered() -> None:
    client = AcpClient()
    client.initialize()
    assert (client.can_resume, client.can_load) == (False, False)
    with pytest.raises(LocalProtocolError, match="loadSession"):
        client.load_session(OLD, "/work")
    with pytest.raises(LocalProtocolError, match="resume"):
        client.resume_session(OLD, "/work")


# -- session/load ------------------------------------------------------------


def test_load_exact_line_and_the_replay_is_consumed() -> None:
    p = initialized(BOTH)
    rid, data = p.client.load_session(OLD, "/work")
    assert (rid, data) == (2, SESSION_LOAD)
    [req] = p.to_agent(data)
    assert isinstance(req, IncomingRequest) and req.method == "session/load"
    assert p.client.replaying

    # History before the answer: nothing of it is live output.
    assert replay(p) == []
    assert p.client.session_id is None  # not until the agent answers

    events = p.to_client(p.agent.send_response(rid, {}))
    assert events == [
        HistoryReplayed(session_id=OLD, updates=7, by_kind={
            "user_message_chunk": 2, "agent_message_chunk": 2, "tool_call": 1,
            "tool_call_update": 1, "agent_thought_chunk": 1,
        }),
        Response(id=rid, method="session/load", result={}),
    ]
    assert p.client.session_id == OLD
    assert not p.client.replaying
    assert p.client.last_replayed == 7

    # After the answer, updates are live again, and a prompt names the session.
    assert p.to_client(p.agent.send_notification(
        "session/update", text("agent_message_chunk", "live"))) == [MessageChunk(text="live")]
    assert p.to_client(p.agent.send_notification(
        "session/update", text("user_message_chunk", "echo"))) == [UserEcho(text="echo")]
    [prompt] = parse_lines(p.client.prompt("/recall")[1])
    assert prompt["params"]["sessionId"] == OLD
    # The replayed tool call was not taken for an open one: nothing to mark cancelled.
    p.client.cancel()
    assert [e for e in drain(p.client) if not isinstance(e, AgentNotice)] == []


def test_session_metadata_during_a_load_passes_through() -> None:
    p = initialized(LOAD_ONLY)
    rid, data = p.client.load_session(OLD, "/work")
    p.to_agent(data)
    commands = update("available_commands_update", availableCommands=[])
    [ev] = p.to_client(p.agent.send_notification("session/update", commands))
    assert ev == CommandsChanged(commands=())
    [replayed, _] = p.to_client(p.agent.send_response(rid, {}))
    assert replayed == HistoryReplayed(session_id=OLD, updates=0, by_kind={})


def test_load_refused_by_the_agent_opens_nothing() -> None:
    p = initialized(LOAD_ONLY)
    rid, data = p.client.load_session(OLD, "/work")
    p.to_agent(data)
    assert replay(p, HISTORY[:2]) == []
    [err] = p.to_client(p.agent.send_error(rid, -32002, "session not found"))
    assert err == ErrorResponse(id=rid, method="session/load", code=-32002,
                                message="session not found")
    assert p.client.session_id is None
    assert not p.client.replaying
    with pytest.raises(LocalProtocolError):
        p.client.prompt("hi")


def test_withdrawn_load_stops_replaying_and_its_tail_is_dropped() -> None:
    p = initialized(LOAD_ONLY)
    rid, data = p.client.load_session(OLD, "/work")
    p.to_agent(data)
    assert replay(p, HISTORY[:1]) == []
    [cancel] = p.to_agent(p.client.cancel_request(rid))
    assert cancel == IncomingNotification(method="$/cancel_request", params={"requestId": rid})
    assert not p.client.replaying
    # The replay still in flight is history, not live output; the late answer is news.
    assert replay(p, HISTORY[1:]) == []
    [late] = p.to_client(p.agent.send_response(rid, {}))
    assert isinstance(late, AgentNotice) and "withdrawn session/load" in late.message
    assert p.client.session_id is None
    # A fresh session's output is live as ever.
    [req] = p.to_agent(p.client.new_session("/work")[1])
    assert isinstance(req, IncomingRequest)
    p.to_client(p.agent.send_response(req.id, {"sessionId": "sess-new"}))
    assert p.to_client(p.agent.send_notification(
        "session/update", text("agent_message_chunk", "hi", "sess-new"))) == [
        MessageChunk(text="hi")]


def test_a_later_load_of_the_abandoned_session_is_live_after_it() -> None:
    p = initialized(LOAD_ONLY)
    rid, data = p.client.load_session(OLD, "/work")
    p.client.cancel_request(rid)
    rid, data = p.client.load_session(OLD, "/work")
    p.to_agent(data)
    p.to_client(p.agent.send_response(rid, {}))
    assert p.to_client(p.agent.send_notification(
        "session/update", text("agent_message_chunk", "now"))) == [MessageChunk(text="now")]


def test_restore_misuse_is_a_local_error() -> None:
    p = initialized(BOTH)
    p.client.load_session(OLD, "/work")
    with pytest.raises(LocalProtocolError, match="another restore"):
        p.client.resume_session(OLD, "/work")
    p = initialized(BOTH)
    with pytest.raises(LocalProtocolError, match="session id"):
        p.client.resume_session("", "/work")
    p = initialized(BOTH)
    rid, data = p.client.new_session("/work")
    p.to_agent(data)
    p.to_client(p.agent.send_response(rid, {"sessionId": "s"}))
    p.client.prompt("hi")
    with pytest.raises(LocalProtocolError, match="turn is running"):
        p.client.load_session(OLD, "/work")


# -- session/resume ----------------------------------------------------------


def test_resume_exact_line_and_no_replay() -> None:
    p = initialized(RESUME_ONLY)
    rid, data = p.client.resume_session(OLD, "/work")
    assert (rid, data) == (2, SESSION_RESUME)
    [req] = p.to_agent(data)
    assert isinstance(req, IncomingRequest) and req.params == {
        "sessionId": OLD, "cwd": "/work", "mcpServers": []}
    assert not p.client.replaying
    events = p.to_client(p.agent.send_response(rid, {"modes": None}))
    assert events == [Response(id=rid, method="session/resume", result={"modes": None})]
    assert p.client.session_id == OLD
    with pytest.raises(LocalProtocolError, match="loadSession"):
        p.client.load_session(OLD, "/work")


def test_resume_refused_keeps_the_current_session() -> None:
    p = initialized(BOTH)
    rid, data = p.client.new_session("/work")
    p.to_agent(data)
    p.to_client(p.agent.send_response(rid, {"sessionId": "current"}))
    rid, data = p.client.resume_session(OLD, "/work")
    p.to_agent(data)
    [err] = p.to_client(p.agent.send_error(rid, -32002, "no such session"))
    assert isinstance(err, ErrorResponse) and err.method == "session/resume"
    assert p.client.session_id == "current"


# -- the adapter's choice, bounded -------------------------------------------


async def _adapter_against(
    caps: dict[str, Any], nursery: trio.Nursery
) -> tuple[AcpAdapter, ScriptedAgent]:
    """An AcpAdapter initialized against a scripted agent advertising ``caps``."""
    ours, theirs = trio.testing.memory_stream_pair()
    adapter = AcpAdapter(ours, ours, timeouts=AdapterTimeouts(session_s=20, withdraw_s=1))
    agent = ScriptedAgent(theirs)
    await nursery.start(adapter.connection.run)

    async def answer_initialize() -> None:
        req = await agent.receive()
        assert isinstance(req, IncomingRequest)
        await agent.send(agent.rpc.send_response(req.id, {
            "protocolVersion": 1, "agentCapabilities": caps, "authMethods": []}))

    nursery.start_soon(answer_initialize)
    await adapter.initialize()
    return adapter, agent


@pytest.mark.parametrize(("caps", "method"), [
    (CLAUDE_AGENT_ACP, "session/resume"), (GEMINI, "session/load"),
])
async def test_adapter_prefers_resume_then_load(
    caps: dict[str, Any], method: str, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nursery:
        adapter, agent = await _adapter_against(caps, nursery)

        async def serve_restore() -> None:
            req = await agent.receive()
            assert isinstance(req, IncomingRequest) and req.method == method
            if method == "session/load":
                for params in HISTORY[:2]:
                    await agent.send(agent.rpc.send_notification("session/update", params))
            await agent.send(agent.rpc.send_response(req.id, {}))

        nursery.start_soon(serve_restore)
        restored = await adapter.restore_session(OLD, "/work")
        assert restored.agent_session_id == OLD == adapter.agent_session_id
        assert restored.method == ("resume" if method == "session/resume" else "load")
        assert restored.replayed == (2 if method == "session/load" else 0)
        if method == "session/load":
            assert adapter.events.receive_nowait() == HistoryReplayed(
                session_id=OLD, updates=2,
                by_kind={"user_message_chunk": 1, "agent_message_chunk": 1})
        with pytest.raises(trio.WouldBlock):
            adapter.events.receive_nowait()
        nursery.cancel_scope.cancel()


async def test_adapter_without_either_capability_refuses(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        adapter, _ = await _adapter_against({"loadSession": False}, nursery)
        with pytest.raises(RestoreUnsupported):
            await adapter.restore_session(OLD, "/work")
        nursery.cancel_scope.cancel()


async def test_restore_times_out_and_is_withdrawn(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        adapter, agent = await _adapter_against(LOAD_ONLY, nursery)
        start = trio.current_time()
        seen: list[object] = []

        async def read_all() -> None:
            while True:
                seen.append(await agent.receive())

        nursery.start_soon(read_all)
        with pytest.raises(AgentTimeout, match="withdrawn"):
            await adapter.restore_session(OLD, "/work")
        assert trio.current_time() - start == pytest.approx(20)
        await trio.testing.wait_all_tasks_blocked()
        [load, withdraw] = seen
        assert isinstance(load, IncomingRequest) and load.method == "session/load"
        assert withdraw == IncomingNotification(
            method="$/cancel_request", params={"requestId": load.id})
        assert not adapter.core.replaying
        assert adapter.agent_session_id is None
        nursery.cancel_scope.cancel()
