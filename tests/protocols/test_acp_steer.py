"""ACP steering, sans-IO: the steering extension claude-agent-acp implements
(``_meta.steering.supported`` in ``initialize``'s answer, ``_session/steering``
into the running turn), exact lines, and when it is refused locally."""

from __future__ import annotations

from typing import Any

import pytest

from protocols.acp import AcpClient
from protocols.jsonrpc import Dialect, IncomingRequest, LocalProtocolError, Response

from .helpers import ConnectionPair
from .test_acp_restore import CLAUDE_AGENT_ACP

Pair = ConnectionPair[AcpClient]

STEERING = (
    b'{"jsonrpc":"2.0","id":4,"method":"_session/steering","params":'
    b'{"sessionId":"s-1","prompt":[{"type":"text","text":"also this"}],'
    b'"_meta":{"steering":{"idleBehavior":"promptRequired"}}}}\n'
)


def session(meta: dict[str, Any] | None) -> Pair:
    """Initialized (with ``meta`` as the answer's top-level ``_meta``), session s-1 open."""
    p = ConnectionPair(AcpClient(), Dialect.JSONRPC2)
    [req] = p.to_agent(p.client.initialize()[1])
    assert isinstance(req, IncomingRequest)
    result: dict[str, Any] = {"protocolVersion": 1, "agentCapabilities": CLAUDE_AGENT_ACP,
                              "authMethods": []}
    if meta is not None:
        result["_meta"] = meta
    p.to_client(p.agent.send_response(req.id, result))
    rid, data = p.client.new_session("/work")
    p.to_agent(data)
    p.to_client(p.agent.send_response(rid, {"sessionId": "s-1"}))
    return p


def test_steer_exact_line_and_the_turn_goes_on() -> None:
    # claude-agent-acp 0.101 advertises it beside agentCapabilities.
    p = session({"steering": {"supported": True}})
    assert p.client.can_steer
    p.to_agent(p.client.prompt("first")[1])
    rid, data = p.client.steer("also this")
    assert (rid, data) == (4, STEERING)
    assert p.to_client(p.agent.send_response(rid, {"outcome": "injected"})) == [
        Response(id=rid, method="_session/steering", result={"outcome": "injected"})]
    assert p.client.turn.running


@pytest.mark.parametrize("meta", [None, {}, {"steering": {"supported": False}},
                                  {"steering": True}, {"claudeCode": {"promptQueueing": True}}])
def test_no_steering_without_the_extension(meta: dict[str, Any] | None) -> None:
    # Prompt queueing (in agentCapabilities._meta) is not steering: a prompt
    # sent during a turn becomes a turn of its own with its own answer.
    p = session(meta)
    assert not p.client.can_steer
    p.to_agent(p.client.prompt("first")[1])
    with pytest.raises(LocalProtocolError, match=r"_meta\.steering"):
        p.client.steer("x")


def test_steer_needs_a_running_turn_not_being_cancelled() -> None:
    p = session({"steering": {"supported": True}})
    with pytest.raises(LocalProtocolError, match="IDLE"):
        p.client.steer("x")
    p.to_agent(p.client.prompt("first")[1])
    p.client.cancel()
    with pytest.raises(LocalProtocolError, match="CANCEL_SENT"):
        p.client.steer("x")
