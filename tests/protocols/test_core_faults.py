"""What both dialects' cores do with a turn that goes wrong or is misused:
open tool calls closed by a cancel, the agent's error ending the turn with its
details, a turn before a session, an open without an id, an agent call the
client does not serve, the agent's exit. What only one dialect does stays in
test_acp.py / test_codex.py."""

from __future__ import annotations

import pytest

from protocols.events import AgentNotice, ToolCallUpdated
from protocols.jsonrpc import ErrorResponse, IncomingRequest, LocalProtocolError, PeerClosed
from protocols.turnstate import TurnState

from .dialects import DIALECTS, Dialect

pytestmark = pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)


def test_cancel_marks_unfinished_tool_calls_cancelled(dialect: Dialect) -> None:
    p = dialect.with_tools()
    p.client.cancel()
    assert dialect.end(p, "cancelled") == [
        *(ToolCallUpdated(tool_call_id=t, status="cancelled") for t in dialect.open_tools),
        dialect.ended("cancelled"),
    ]


def test_turn_error_says_its_details(dialect: Dialect) -> None:
    """An ACP SDK's ``Internal error`` (and Codex's) says why only in ``data.details``."""
    p = dialect.turn_requested()
    data = {"details": "model 'x' not found"}
    events = p.to_client(p.agent.send_error(3, -32603, "Internal error", data))
    assert events == [
        *dialect.error_echo(3, "Internal error", data),
        dialect.ended("error", turn_known=False, error="Internal error: model 'x' not found"),
    ]
    assert p.client.turn.state is TurnState.IDLE


def test_turn_before_session_is_a_local_error(dialect: Dialect) -> None:
    with pytest.raises(LocalProtocolError):
        dialect.start_turn(dialect.initialized().client)


def test_open_answer_without_its_id_is_an_error(dialect: Dialect) -> None:
    p = dialect.initialized()
    [req] = p.to_agent(dialect.open_session(p.client))
    assert isinstance(req, IncomingRequest)
    [ev] = p.to_client(p.agent.send_response(req.id, dialect.open_without_id))
    assert isinstance(ev, ErrorResponse)
    assert dialect.session_id(p.client) is None


def test_unserved_agent_call_is_refused_not_left_waiting(dialect: Dialect) -> None:
    p = dialect.running()
    method, params = dialect.unserved
    _, data = p.agent.send_request(method, params)
    [notice] = p.to_client(data)
    assert isinstance(notice, AgentNotice)
    assert p.client.data_to_send() == dialect.unserved_refusal


def test_agent_exit_closes_the_core(dialect: Dialect) -> None:
    p = dialect.asked()
    [closed] = p.to_client(b"")
    assert isinstance(closed, PeerClosed)
    assert closed.pending == dialect.pending_at_exit
    assert p.client.turn.state is TurnState.CLOSED
    assert p.client.pending_permissions == ()
    assert p.client.cancel() == b""  # nothing left to cancel
