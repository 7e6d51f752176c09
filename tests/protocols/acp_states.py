"""AcpClient joined to an agent-side RpcConnection, in the states the ACP tests
start from (the agent side writes what a real ACP agent would)."""

from __future__ import annotations

from typing import Any

from protocols.acp import AcpClient
from protocols.jsonrpc import Dialect, IncomingRequest
from protocols.turnstate import TurnState

from .helpers import ConnectionPair

SID = "sess-1"
Pair = ConnectionPair[AcpClient]


def state(p: Pair) -> TurnState:
    # A call, not an attribute: mypy would narrow ``turn.state`` across asserts.
    return p.client.turn.state


# -- states to start from -------------------------------------------------


def fresh() -> Pair:
    return ConnectionPair(AcpClient(), Dialect.JSONRPC2)


def fresh_v1() -> Pair:
    return ConnectionPair(AcpClient(acp_version=1), Dialect.JSONRPC2)


def fresh_v2() -> Pair:
    return ConnectionPair(AcpClient(acp_version=2), Dialect.JSONRPC2)


def initialized() -> Pair:
    p = fresh()
    [req] = p.to_agent(p.client.initialize()[1])
    assert isinstance(req, IncomingRequest)
    p.to_client(
        p.agent.send_response(
            req.id,
            {
                "protocolVersion": 1,
                "agentCapabilities": {},
                "agentInfo": {"name": "fake"},
                "authMethods": [],
            },
        )
    )
    return p


def in_session() -> Pair:
    p = initialized()
    [req] = p.to_agent(p.client.new_session("/work")[1])
    assert isinstance(req, IncomingRequest)
    p.to_client(p.agent.send_response(req.id, {"sessionId": SID}))
    return p


def prompting() -> Pair:
    p = in_session()
    p.to_agent(p.client.prompt("hi")[1])
    return p


PERMISSION_PARAMS = {
    "sessionId": SID,
    "toolCall": {"toolCallId": "call-1", "title": "Write to disk", "status": "pending"},
    "options": [
        {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
        {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    ],
}


def asked_permission() -> Pair:
    p = prompting()
    _, data = p.agent.send_request("session/request_permission", PERMISSION_PARAMS)  # agent id 0
    p.to_client(data)
    return p


def update(session_update: str, /, **fields: Any) -> dict[str, Any]:
    return {"sessionId": SID, "update": {"sessionUpdate": session_update, **fields}}


def with_tools() -> Pair:
    """t1 pending, t2 in progress, t3 finished."""
    p = prompting()
    for params in (
        update("tool_call", toolCallId="t1", title="read", status="pending"),
        update("tool_call", toolCallId="t2", title="edit", kind="edit"),
        update("tool_call_update", toolCallId="t2", status="in_progress"),
        update("tool_call", toolCallId="t3", title="ls", status="in_progress"),
        update("tool_call_update", toolCallId="t3", status="completed"),
    ):
        p.to_client(p.agent.send_notification("session/update", params))
    return p


def cancelled() -> Pair:
    p = prompting()
    p.client.cancel()
    return p


# -- lines the tests of both dialects compare against --------------------

SESSION_CANCEL = b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}\n'
PERMISSION_CANCELLED = b'{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}\n'
#: The agent withdraws its request 0 ($/cancel_request), and the answer it is owed.
AGENT_WITHDRAWS = b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":0}}\n'
WITHDRAWN_ANSWER = (
    b'{"jsonrpc":"2.0","id":0,"error":{"code":-32800,"message":"Request cancelled"}}\n'
)
