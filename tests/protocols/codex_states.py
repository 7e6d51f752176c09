"""CodexClient joined to an agent-side RpcConnection (the Codex dialect: no
``jsonrpc`` member), in the states the Codex tests start from."""

from __future__ import annotations

from typing import Any

from protocols.codex import CodexClient
from protocols.events import PermissionOption
from protocols.jsonrpc import Dialect, IncomingRequest
from protocols.turnstate import TurnState

from .helpers import ConnectionPair

THREAD, TURN = "thr-1", "turn-1"
Pair = ConnectionPair[CodexClient]


def state(p: Pair) -> TurnState:
    # A call, not an attribute: mypy would narrow ``turn.state`` across asserts.
    return p.client.turn.state


# -- states to start from -------------------------------------------------


def fresh() -> Pair:
    return ConnectionPair(CodexClient(), Dialect.CODEX)


def initialized() -> Pair:
    p = fresh()
    [req] = p.to_agent(p.client.initialize()[1])
    assert isinstance(req, IncomingRequest)
    p.to_client(p.agent.send_response(req.id, {"userAgent": "fake/1.0"}))
    return p


def in_thread() -> Pair:
    p = initialized()
    p.to_agent(p.client.initialized())
    [req] = p.to_agent(p.client.thread_start("/work")[1])
    assert isinstance(req, IncomingRequest)
    p.to_client(p.agent.send_response(req.id, {"thread": {"id": THREAD, "ephemeral": True}}))
    return p


def turn_sent() -> Pair:
    """turn/start written (id 3), its answer, and so the turn id, not back yet."""
    p = in_thread()
    p.to_agent(p.client.turn_start("hi")[1])
    return p


def turn_result(turn_id: str = TURN) -> dict[str, Any]:
    return {"turn": {"id": turn_id, "items": [], "status": "inProgress", "error": None}}


def in_turn() -> Pair:
    p = turn_sent()
    p.to_client(p.agent.send_response(3, turn_result()))
    return p


APPROVAL_PARAMS = {
    "threadId": THREAD,
    "turnId": TURN,
    "itemId": "item-7",
    "command": "touch file.txt",
    "reason": "Write to disk",
}


def asked_approval() -> Pair:
    p = in_turn()
    _, data = p.agent.send_request("item/commandExecution/requestApproval", APPROVAL_PARAMS)
    p.to_client(data)  # agent request id 0
    return p


PERMISSIONS_PARAMS = {
    "threadId": THREAD,
    "turnId": TURN,
    "itemId": "item-8",
    "cwd": "/work",
    "reason": "Needs the network",
    "permissions": {"network": {"enabled": True}, "fileSystem": {"write": ["/work/out"]}},
    "startedAtMs": 1767000000000,
}


def asked_permissions() -> Pair:
    p = in_turn()
    _, data = p.agent.send_request("item/permissions/requestApproval", PERMISSIONS_PARAMS)
    p.to_client(data)  # agent request id 0
    return p


def cancelled_before_turn_id() -> Pair:
    p = turn_sent()
    p.client.cancel()
    return p


def interrupted() -> Pair:
    p = in_turn()
    p.client.cancel()
    return p


def notify(p: Pair, method: str, params: dict[str, Any]) -> list[object]:
    return p.to_client(p.agent.send_notification(method, params))


def completed(p: Pair, status: str, turn_id: str = TURN, error: Any = None) -> list[object]:
    return notify(
        p,
        "turn/completed",
        {
            "threadId": THREAD,
            "turn": {"id": turn_id, "items": [], "status": status, "error": error},
        },
    )


# -- lines the tests of both dialects compare against --------------------

INTERRUPT = b'{"id":4,"method":"turn/interrupt","params":{"threadId":"thr-1","turnId":"turn-1"}}\n'
DECLINE = b'{"id":0,"result":{"decision":"decline"}}\n'
#: The agent resolves its request 0 itself.
RESOLVED = b'{"method":"serverRequest/resolved","params":{"threadId":"thr-1","requestId":0}}\n'
#: The four answers to a v2 approval.
V2_OPTIONS = (
    PermissionOption(option_id="accept", name="Allow", kind="allow_once"),
    PermissionOption(
        option_id="acceptForSession", name="Allow for this session", kind="allow_always"
    ),
    PermissionOption(option_id="decline", name="Deny", kind="reject_once"),
    PermissionOption(option_id="cancel", name="Deny and stop", kind="reject_always"),
)
