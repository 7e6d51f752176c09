"""Property: whatever an agent writes, the client cores return events, never raise.

h11's fuzz invariant ("parse it, or else throw RemoteProtocolError, never any
other error"), made stricter by STYLE.md: a bad agent becomes events.  The
messages are drawn from the dialects' own vocabulary (method names, member
names, status words), so the deep mapping paths are reached, not just the
JSON parser; client actions (prompt, cancel, answers) are interleaved.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols.acp import AcpClient
from protocols.codex import APPROVAL_METHODS, CodexClient
from protocols.jsonrpc import Dialect, LocalProtocolError, RpcConnection
from protocols.turnstate import TurnState

from .helpers import drain

KEYS = [
    "sessionId",
    "update",
    "sessionUpdate",
    "content",
    "type",
    "text",
    "messageId",
    "toolCallId",
    "title",
    "status",
    "kind",
    "entries",
    "priority",
    "toolCall",
    "options",
    "requestId",
    "permissions",
    "changes",
    "rawInput",
    "optionId",
    "name",
    "stopReason",
    "turn",
    "id",
    "items",
    "error",
    "message",
    "item",
    "itemId",
    "delta",
    "plan",
    "step",
    "command",
    "callId",
    "reason",
    "thread",
    "threadId",
    "turnId",
]
WORDS = [
    "agent_message_chunk",
    "agent_thought_chunk",
    "user_message_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
    "usage_update",
    "text",
    "image",
    "pending",
    "in_progress",
    "completed",
    "failed",
    "cancelled",
    "allow_once",
    "reject_once",
    "end_turn",
    "refusal",
    "interrupted",
    "inProgress",
    "commandExecution",
    "fileChange",
    "agentMessage",
    "declined",
    "edit",
    "execute",
    "high",
    "t1",
    "turn-1",
    "thr-1",
    "sess-1",
]
scalars = (
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(WORDS) | st.text(max_size=5)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=3), inner, max_size=5)
    ),
    max_leaves=8,
)
ACP_METHODS = [
    "session/update", "session/request_permission", "$/cancel_request", "fs/read_text_file", "x",
]
CODEX_METHODS = [
    "turn/started",
    "turn/completed",
    "item/started",
    "item/completed",
    "item/agentMessage/delta",
    "item/reasoning/textDelta",
    "turn/plan/updated",
    "error",
    "serverRequest/resolved",
    *APPROVAL_METHODS,
    "x",
]


@st.composite
def agent_lines(draw: st.DrawFn, dialect: Dialect) -> bytes:
    methods = ACP_METHODS if dialect is Dialect.JSONRPC2 else CODEX_METHODS
    msg: dict[str, Any] = {"jsonrpc": "2.0"} if dialect is Dialect.JSONRPC2 else {}
    shape = draw(st.sampled_from(["notification", "request", "response", "error", "garbage"]))
    if shape == "garbage":
        return draw(st.binary(max_size=30)).replace(b"\n", b"") + b"\n"
    if shape in ("response", "error"):
        msg["id"] = draw(st.integers(0, 8) | st.sampled_from(["1", None, True]))
        if shape == "response":
            msg["result"] = draw(values)
        else:
            msg["error"] = draw(values)
    else:
        msg["method"] = draw(st.sampled_from(methods))
        msg["params"] = draw(values)
        if shape == "request":
            # Includes a lone surrogate: legal JSON, no UTF-8 form.
            msg["id"] = draw(st.integers(0, 3) | st.sampled_from(["a", "\ud800"]))
    return json.dumps(msg).encode() + b"\n"


def _check_bytes(data: bytes) -> None:
    for line in data.splitlines():
        json.loads(line)  # everything the core writes is one valid JSON document per line


def _acp_session() -> AcpClient:
    c = AcpClient()
    c.initialize()
    c.receive_data(b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":'
                   b'{"loadSession":true,"sessionCapabilities":{"resume":{}}}}}\n')
    c.new_session("/w")
    c.receive_data(b'{"jsonrpc":"2.0","id":2,"result":{"sessionId":"sess-1"}}\n')
    drain(c)
    return c


def _codex_thread() -> CodexClient:
    c = CodexClient()
    c.initialize()
    c.thread_start("/w")
    c.receive_data(b'{"id":2,"result":{"thread":{"id":"thr-1"}}}\n')
    drain(c)
    return c


actions = st.sampled_from(
    ["feed", "feed", "feed", "prompt", "cancel", "answer", "withdraw", "restore", "steer"]
)


def _run(core: AcpClient | CodexClient, dialect: Dialect, data: st.DataObject) -> None:
    steps = data.draw(st.lists(actions, max_size=12), label="actions")
    for step in steps:
        if step == "feed":
            line = data.draw(agent_lines(dialect), label="line")
            cut = data.draw(st.integers(0, len(line)), label="cut")
            for piece in (line[:cut], line[cut:]):
                if piece:
                    core.receive_data(piece)
                    drain(core)
        elif step == "prompt" and core.turn.state is TurnState.IDLE:
            if isinstance(core, AcpClient):
                _check_bytes(core.prompt("go")[1])
            else:
                _check_bytes(core.turn_start("go")[1])
        elif step == "cancel":
            _check_bytes(core.cancel())
        elif step == "answer" and core.pending_permissions:
            if isinstance(core, AcpClient):
                option: str | None = "allow"
            else:
                option = data.draw(st.sampled_from([None, "decline", "cancel"]), label="option")
            with contextlib.suppress(LocalProtocolError):  # not offered (v1 names)
                _check_bytes(core.respond_permission(core.pending_permissions[0], option))
        elif step == "restore" and not core.turn.running and core.turn.state is not (
            TurnState.CLOSED
        ):
            if isinstance(core, CodexClient):
                _check_bytes(core.thread_resume("thr-old", "/w")[1])
            else:
                load = data.draw(st.booleans(), label="load")
                restore = core.load_session if load else core.resume_session
                pending = core.rpc.pending.values()
                if "session/load" in pending or "session/resume" in pending:
                    with pytest.raises(LocalProtocolError, match="another restore"):
                        restore("sess-old", "/w")
                else:
                    _check_bytes(restore("sess-old", "/w")[1])
        elif step == "steer" and isinstance(core, CodexClient):
            can = core.turn.state is TurnState.PROMPTING and core.turn_id is not None
            if can:
                _check_bytes(core.steer("more")[1])
            else:
                with pytest.raises(LocalProtocolError):
                    core.steer("more")
        elif step == "withdraw" and isinstance(core, AcpClient) and core.rpc.pending:
            # One of our requests timed out: withdrawn with $/cancel_request.
            _check_bytes(core.cancel_request(next(iter(core.rpc.pending))))
        _check_bytes(core.data_to_send())
    core.receive_data(b"")
    drain(core)
    assert core.turn.state is TurnState.CLOSED
    assert core.pending_permissions == ()
    assert not (isinstance(core, AcpClient) and core.replaying)
    assert core.cancel() == b""


@given(data=st.data())
def test_acp_core_never_raises(data: st.DataObject) -> None:
    _run(_acp_session(), Dialect.JSONRPC2, data)


@given(data=st.data())
def test_codex_core_never_raises(data: st.DataObject) -> None:
    _run(_codex_thread(), Dialect.CODEX, data)


def test_agent_side_rpc_reads_what_the_cores_write() -> None:
    """Sanity for the helper above: the cores' output is parseable by a peer core."""
    peer = RpcConnection(Dialect.JSONRPC2)
    c = _acp_session()
    peer.receive_data(c.prompt("go")[1] + c.cancel())
    assert len(drain(peer)) == 2
