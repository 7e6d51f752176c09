"""Property: whatever bytes an agent writes, the protocol cores and the Trio
transport around them turn it into events — never an exception.

tests/protocols/test_core_fuzz.py draws well-formed messages from each
dialect's vocabulary.  This suite attacks the layer below and the one above:

- the byte stream: realistic lines (shapes taken from real agents'
  transcripts) mutated — truncated, bytes flipped or inserted, invalid UTF-8,
  lone surrogates, NaN/Infinity, numbers too long to convert, nesting deeper
  than the recursion limit, lines beyond ``max_line_bytes`` — glued with
  random separators and cut at random boundaries, with the client's own
  actions (prompt, cancel, permission answers) interleaved;
- the transport: the same streams fed to ``AgentConnection`` through a Trio
  stream while a prompt waits and a cancel is sent; the reader must end
  cleanly at EOF and the prompt must return a ``TurnEnded`` or raise one of
  the transport's own errors.
"""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.acp import AcpClient
from protocols.adapters import AcpAdapter, AdapterTimeouts, CodexAdapter
from protocols.codex import CodexClient
from protocols.events import (
    AgentNotice,
    CommandsChanged,
    MessageChunk,
    OptionsChanged,
    OtherUpdate,
    PermissionRequested,
    PermissionResolved,
    PermissionWithdrawn,
    PlanUpdated,
    TitleChanged,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    UsageUpdated,
    UserEcho,
)
from protocols.jsonrpc import ErrorResponse, NeedData, PeerClosed, Response
from protocols.transport import AgentClosed, AgentTimeout
from protocols.turnstate import TurnState

from .profiles import examples

MAX_LINE = 512
EVENT_TYPES = (AgentNotice, MessageChunk, OtherUpdate, PermissionRequested, PermissionResolved,
               PermissionWithdrawn, UserEcho, PlanUpdated, ToolCallStarted, ToolCallUpdated,
               TurnEnded, Response, ErrorResponse, PeerClosed, OptionsChanged, CommandsChanged,
               UsageUpdated, TitleChanged)

# Shapes of real agent output (tests/protocols has the full transcripts).
ACP_SEEDS: list[dict[str, Any]] = [
    {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {}}},
    {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}},
    {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}},
    {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess-1", "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hel"}}}},
    {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess-1", "update": {
        "sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}}},
    {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess-1", "update": {
        "sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls", "kind": "execute",
        "status": "pending"}}},
    {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess-1", "update": {
        "sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}}},
    {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess-1", "update": {
        "sessionUpdate": "plan", "entries": [{"content": "a", "priority": "high",
                                              "status": "pending"}]}}},
    {"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": {
        "sessionId": "sess-1", "toolCall": {"toolCallId": "t2", "title": "write"},
        "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]}},
    {"jsonrpc": "2.0", "id": 8, "method": "fs/read_text_file", "params": {"path": "/etc/x"}},
    {"jsonrpc": "2.0", "id": 99, "error": {"code": -32603, "message": "boom"}},
]
CODEX_SEEDS: list[dict[str, Any]] = [
    {"id": 0, "result": {"userAgent": "codex"}},
    {"id": 2, "result": {"turn": {"id": "turn-1", "status": "inProgress", "items": []}}},
    {"method": "turn/started", "params": {"threadId": "thr-1", "turn": {"id": "turn-1"}}},
    {"method": "item/agentMessage/delta", "params": {"threadId": "thr-1", "turnId": "turn-1",
                                                      "itemId": "m1", "delta": "Hel"}},
    {"method": "item/started", "params": {"threadId": "thr-1", "turnId": "turn-1", "item": {
        "type": "commandExecution", "id": "c1", "command": "ls", "status": "inProgress"}}},
    {"method": "item/completed", "params": {"threadId": "thr-1", "turnId": "turn-1", "item": {
        "type": "commandExecution", "id": "c1", "status": "completed", "exitCode": 0}}},
    {"method": "turn/plan/updated", "params": {"turnId": "turn-1", "plan": [
        {"step": "a", "status": "pending"}]}},
    {"id": 5, "method": "item/commandExecution/requestApproval", "params": {
        "threadId": "thr-1", "turnId": "turn-1", "itemId": "c2", "command": "rm -rf /"}},
    {"method": "turn/completed", "params": {"threadId": "thr-1", "turn": {
        "id": "turn-1", "status": "interrupted", "items": []}}},
    {"method": "turn/completed", "params": {"threadId": "thr-1", "turn": {
        "id": "turn-1", "status": "completed", "items": []}}},
    {"id": 3, "result": {}},
    {"method": "error", "params": {"error": {"message": "stream failed"}, "willRetry": False}},
]

#: Values no well-behaved agent writes, each a known way to break a parser.
NASTY_TEXT = [
    "NaN", "Infinity", "-Infinity", "1e99999", "-0", "1" * 5000,  # too many digits for int()
    "[" * 3000 + "]" * 3000,  # deeper than the recursion limit
    '"\\ud800"', '"\\u0000"', '""', "null", "true", "{}", "[]", '{"__proto__": 1}',
]
INSERTS = [b"\n", b"\r", b"\r\n", b"\x00", b"\xff", b"\xc3", b'"', b"{", b"}", b"\\", b" "]


@st.composite
def agent_stream(draw: st.DrawFn, seeds: list[dict[str, Any]]) -> list[bytes | str]:
    """Pieces of output (bytes) and client actions (str), in order."""
    out: list[bytes | str] = []
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["line", "line", "mutated", "nasty", "long", "raw",
                                     "action"]))
        if kind == "action":
            out.append(draw(st.sampled_from(["prompt", "cancel", "answer"])))
            continue
        msg = dict(draw(st.sampled_from(seeds)))
        if kind == "nasty":
            key = draw(st.sampled_from(["id", "result", "params", "method", "error"]))
            raw = json.dumps(msg)
            line = raw[:-1] + f', "{key}": {draw(st.sampled_from(NASTY_TEXT))}}}'
            data = line.encode("utf-8", "surrogatepass")
        elif kind == "long":
            msg["pad"] = "x" * draw(st.integers(MAX_LINE - 64, MAX_LINE * 3))
            data = json.dumps(msg).encode()
        elif kind == "raw":
            data = draw(st.binary(max_size=80))
        else:
            data = json.dumps(msg).encode()
        if kind == "mutated" and data:
            for _ in range(draw(st.integers(1, 3))):
                at = draw(st.integers(0, len(data)))
                how = draw(st.sampled_from(["cut", "flip", "insert"]))
                if how == "cut":
                    data = data[:at]
                elif how == "flip" and at < len(data):
                    data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
                else:
                    data = data[:at] + draw(st.sampled_from(INSERTS)) + data[at:]
        out.append(data + draw(st.sampled_from([b"\n", b"\n", b"\r\n", b"", b"\n\n"])))
    return out


def _check_written(data: bytes) -> None:
    for line in data.splitlines():
        json.loads(line)  # what the core writes back is one JSON document per line


def _drain(core: AcpClient | CodexClient) -> list[object]:
    events: list[object] = []
    while not isinstance(ev := core.next_event(), NeedData):
        assert isinstance(ev, EVENT_TYPES), ev
        events.append(ev)
    return events


def _acp() -> AcpClient:
    c = AcpClient(max_line_bytes=MAX_LINE)
    c.initialize()
    c.new_session("/w")
    c.receive_data(b'{"jsonrpc":"2.0","id":2,"result":{"sessionId":"sess-1"}}\n')
    _drain(c)
    assert c.session_id == "sess-1"
    return c


def _codex() -> CodexClient:
    c = CodexClient(max_line_bytes=MAX_LINE)
    c.initialize()
    c.thread_start("/w")
    c.receive_data(b'{"id":2,"result":{"thread":{"id":"thr-1"}}}\n')
    _drain(c)
    assert c.thread_id == "thr-1"
    return c


def _run_core(core: AcpClient | CodexClient, stream: list[bytes | str], cuts: list[int]) -> None:
    for i, piece in enumerate(stream):
        if piece == "prompt":
            if core.turn.state is TurnState.IDLE:
                data = core.prompt("go")[1] if isinstance(core, AcpClient) else \
                    core.turn_start("go")[1]
                _check_written(data)
        elif piece == "cancel":
            _check_written(core.cancel())
        elif piece == "answer":
            if core.pending_permissions:
                option = "allow" if isinstance(core, AcpClient) else None
                _check_written(core.respond_permission(core.pending_permissions[0], option))
        else:
            assert isinstance(piece, bytes)
            cut = cuts[i % len(cuts)] % (len(piece) + 1) if cuts else len(piece)
            for part in (piece[:cut], piece[cut:]):
                if part:
                    core.receive_data(part)
                    _drain(core)
        _check_written(core.data_to_send())
    core.receive_data(b"")
    events = _drain(core)
    assert any(isinstance(e, PeerClosed) for e in events) or core.turn.state is TurnState.CLOSED
    assert core.turn.state is TurnState.CLOSED
    assert core.pending_permissions == ()


@settings(max_examples=examples())
@given(stream=agent_stream(ACP_SEEDS), cuts=st.lists(st.integers(0, 2000), max_size=8))
def test_acp_core_takes_any_output(stream: list[bytes | str], cuts: list[int]) -> None:
    _run_core(_acp(), stream, cuts)


@settings(max_examples=examples())
@given(stream=agent_stream(CODEX_SEEDS), cuts=st.lists(st.integers(0, 2000), max_size=8))
def test_codex_core_takes_any_output(stream: list[bytes | str], cuts: list[int]) -> None:
    _run_core(_codex(), stream, cuts)


# -- through the Trio transport --------------------------------------------------

TIMEOUTS = AdapterTimeouts(initialize_s=2, session_s=2, request_s=2, turn_s=2, write_s=2)


async def _transport(protocol: str, stream: list[bytes | str]) -> None:
    to_agent_send, to_agent_recv = trio.testing.memory_stream_one_way_pair()
    from_agent_send, from_agent_recv = trio.testing.memory_stream_one_way_pair()
    adapter: AcpAdapter | CodexAdapter
    if protocol == "acp":
        adapter = AcpAdapter(to_agent_send, from_agent_recv, timeouts=TIMEOUTS,
                             max_line_bytes=MAX_LINE)
        adapter.core.session_id = "sess-1"
    else:
        adapter = CodexAdapter(to_agent_send, from_agent_recv, timeouts=TIMEOUTS,
                               max_line_bytes=MAX_LINE)
        adapter.core.thread_id = "thr-1"
    outcomes: list[object] = []

    async def prompt() -> None:
        try:
            outcomes.append(await adapter.prompt("go"))
        except (AgentClosed, AgentTimeout) as exc:
            outcomes.append(exc)

    async def swallow_stdin() -> None:
        while await to_agent_recv.receive_some(65536):
            pass

    async def collect() -> None:
        async for ev in adapter.events:
            assert isinstance(ev, EVENT_TYPES), ev

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(swallow_stdin)
            nursery.start_soon(collect)
            await nursery.start(adapter.connection.run)
            nursery.start_soon(prompt)
            await trio.testing.wait_all_tasks_blocked()
            for piece in stream:
                if piece == "cancel":
                    try:
                        await adapter.cancel()
                    except (AgentClosed, AgentTimeout):
                        pass
                elif piece in ("prompt", "answer"):
                    continue  # one prompt per connection here; answers need ids
                else:
                    assert isinstance(piece, bytes)
                    await from_agent_send.send_all(piece)
                    await trio.testing.wait_all_tasks_blocked()
            await from_agent_send.aclose()
            with trio.fail_after(5):
                await adapter.connection.closed.wait()
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    (outcome,) = outcomes
    assert isinstance(outcome, TurnEnded | AgentClosed | AgentTimeout), outcome


@settings(max_examples=examples(0.5))
@given(protocol=st.sampled_from(["acp", "codex"]), data=st.data())
def test_transport_takes_any_output(protocol: str, data: st.DataObject) -> None:
    stream = data.draw(agent_stream(ACP_SEEDS if protocol == "acp" else CODEX_SEEDS))
    trio.run(_transport, protocol, stream)
