"""The two dialects side by side, for the tests that prove one behaviour of
both client cores (ACP's ``AcpClient``, Codex's ``CodexClient``).

A ``Dialect`` names, for one core, the starting states (from acp_states.py and
codex_states.py), the bytes its agent sends and the events and lines the core
must give back. The shared tests take ``dialect`` as a parameter over
``DIALECTS``; what only one dialect does stays in test_acp.py / test_codex.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocols.events import (
    AgentNotice,
    OtherUpdate,
    PermissionOption,
    PermissionRequested,
    TurnEnded,
)
from protocols.jsonrpc import (
    ErrorResponse,
    IncomingNotification,
    IncomingRequest,
    Response,
    RpcEvent,
)

from . import acp_states as acp
from . import codex_states as codex
from .helpers import ConnectionPair

__all__ = ["ACP", "CODEX", "DIALECTS", "AnyPair", "Dialect"]

#: A core of either dialect joined to its agent side.
AnyPair = ConnectionPair[Any]


@dataclass(frozen=True, kw_only=True)
class Dialect:
    name: str
    # -- states to start from
    initialized: Callable[[], AnyPair]
    #: The turn's request written (id 3), not answered yet.
    turn_requested: Callable[[], AnyPair]
    #: A turn running (Codex: its id known).
    running: Callable[[], AnyPair]
    #: ``running``, and the agent asked permission (agent request id 0).
    asked: Callable[[], AnyPair]
    #: ``running``, and the client's cancel written.
    cancelled: Callable[[], AnyPair]
    #: ``running`` with tool calls: some unfinished, one finished.
    with_tools: Callable[[], AnyPair]
    #: The unfinished tool calls of ``with_tools``, in the order a cancel closes them.
    open_tools: tuple[str, ...]
    # -- the client's side
    #: Start a turn (refused before a session / thread is open).
    start_turn: Callable[[Any], object]
    #: Open a session / thread in ``/w``: its request's bytes.
    open_session: Callable[[Any], bytes]
    #: The id of the open session / thread, or None.
    session_id: Callable[[Any], str | None]
    # -- the agent's side
    #: The agent ends the turn: ``end(pair, "end_turn" | "cancelled")``.
    end: Callable[[AnyPair, str], list[object]]
    #: The permission request ``asked`` sends, and the event it must surface as.
    ask: Callable[[AnyPair], bytes]
    asked_event: PermissionRequested
    #: A permission request the agent sends after the cancel.
    late_ask: Callable[[AnyPair], bytes]
    #: An open-session answer without its id.
    open_without_id: dict[str, Any]
    #: An agent call the client does not serve, and the exact refusal.
    unserved: tuple[str, dict[str, Any]]
    unserved_refusal: bytes
    #: The agent withdraws request 0 itself; why, as the event says; what the
    #: client owes for it.
    withdraw: bytes
    withdraw_reason: str
    withdraw_answer: bytes
    #: ``withdraw`` naming the string "0" rather than request 0: not a
    #: withdrawal of it (an exact event, or an event type).
    withdraw_string_id_events: list[object]
    # -- what the client writes and what the agent reads
    #: The cancel of a running turn, the line and as the agent reads it.
    cancel_line: bytes
    cancel_read: RpcEvent
    #: A pending permission refused by a cancel or a turn end, the line and
    #: as the agent reads it.
    refusal_line: bytes
    refusal_read: Response
    #: Does the cancel go out before the refusal (Codex: the interrupt first,
    #: so the agent stops before it hears a decline that alone lets it go on)?
    cancel_first: bool
    #: What ends a turn the agent answered with an error, before ``TurnEnded``.
    error_echo: Callable[[int, str, Any], list[object]]
    #: The requests left unanswered when the agent exits in ``asked``.
    pending_at_exit: tuple[tuple[int, str], ...]

    def ended(self, stop_reason: str, *, turn_known: bool = True, **fields: Any) -> TurnEnded:
        """The ``TurnEnded`` the core gives when the agent ends ``running``'s
        turn (Codex names the turn, once its id is known)."""
        turn: dict[str, Any] = {"turn_id": codex.TURN} if self is CODEX and turn_known else {}
        return TurnEnded(stop_reason=stop_reason, **turn, **fields)  # type: ignore[arg-type]


def _acp_end(p: AnyPair, stop_reason: str) -> list[object]:
    return p.to_client(p.agent.send_response(3, {"stopReason": stop_reason}))


def _codex_end(p: AnyPair, stop_reason: str) -> list[object]:
    status = {"end_turn": "completed", "cancelled": "interrupted"}[stop_reason]
    return codex.completed(p, status)


def _acp_ask(p: AnyPair) -> bytes:
    return p.agent.send_request("session/request_permission", acp.PERMISSION_PARAMS)[1]


def _codex_ask(p: AnyPair) -> bytes:
    return p.agent.send_request("item/commandExecution/requestApproval",
                                codex.APPROVAL_PARAMS)[1]


def _codex_late_ask(p: AnyPair) -> bytes:
    return p.agent.send_request("item/fileChange/requestApproval",
                                {"threadId": codex.THREAD, "turnId": codex.TURN, "itemId": "f"})[1]


def _codex_with_tools() -> AnyPair:
    """c2 and c1 running, f1 finished."""
    p = codex.in_turn()
    for item in (
        {"type": "commandExecution", "id": "c2", "command": "sleep 9", "status": "inProgress"},
        {"type": "commandExecution", "id": "c1", "command": "make", "status": "inProgress"},
        {"type": "fileChange", "id": "f1", "status": "inProgress"},
    ):
        codex.notify(p, "item/started", {"threadId": codex.THREAD, "turnId": codex.TURN,
                                          "item": item})
    codex.notify(p, "item/completed", {
        "threadId": codex.THREAD, "turnId": codex.TURN,
        "item": {"type": "fileChange", "id": "f1", "status": "completed"}})
    return p




def _acp_error_echo(rid: int, message: str, data: Any) -> list[object]:
    return []


def _codex_error_echo(rid: int, message: str, data: Any) -> list[object]:
    return [ErrorResponse(id=rid, method="turn/start", code=-32603, message=message, data=data)]


ACP = Dialect(
    name="acp",
    initialized=acp.initialized,
    turn_requested=acp.prompting,
    running=acp.prompting,
    asked=acp.asked_permission,
    cancelled=acp.cancelled,
    with_tools=acp.with_tools,
    open_tools=("t1", "t2"),
    start_turn=lambda c: c.prompt("hi"),
    open_session=lambda c: c.new_session("/w")[1],
    session_id=lambda c: c.session_id,
    end=_acp_end,
    ask=_acp_ask,
    asked_event=PermissionRequested(
        request_id="0",
        title="Write to disk",
        tool_call_id="call-1",
        options=(
            PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
            PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
        ),
    ),
    late_ask=_acp_ask,
    open_without_id={"modes": {}},
    unserved=("fs/read_text_file", {"path": "/etc/passwd"}),
    unserved_refusal=(
        b'{"jsonrpc":"2.0","id":0,"error":{"code":-32601,'
        b'"message":"client does not implement fs/read_text_file"}}\n'
    ),
    withdraw=acp.AGENT_WITHDRAWS,
    withdraw_reason="the agent withdrew the request",
    # The receiver MUST answer the withdrawn request: error -32800.
    withdraw_answer=acp.WITHDRAWN_ANSWER,
    withdraw_string_id_events=[
        AgentNotice,  # a notice of this type (its wording is not pinned)
    ],
    cancel_line=acp.SESSION_CANCEL,
    cancel_read=IncomingNotification(method="session/cancel", params={"sessionId": acp.SID}),
    refusal_line=acp.PERMISSION_CANCELLED,
    refusal_read=Response(id=0, method="session/request_permission",
                          result={"outcome": {"outcome": "cancelled"}}),
    cancel_first=False,
    error_echo=_acp_error_echo,
    pending_at_exit=((3, "session/prompt"),),
)

CODEX = Dialect(
    name="codex",
    initialized=codex.initialized,
    turn_requested=codex.turn_sent,
    running=codex.in_turn,
    asked=codex.asked_approval,
    cancelled=codex.interrupted,
    with_tools=_codex_with_tools,
    open_tools=("c1", "c2"),
    start_turn=lambda c: c.turn_start("hi"),
    open_session=lambda c: c.thread_start("/w")[1],
    session_id=lambda c: c.thread_id,
    end=_codex_end,
    ask=_codex_ask,
    asked_event=PermissionRequested(
        request_id="0", title="touch file.txt", tool_call_id="item-7", options=codex.V2_OPTIONS
    ),
    late_ask=_codex_late_ask,
    open_without_id={"thread": {}},
    unserved=("item/tool/call", {}),
    unserved_refusal=(
        b'{"id":0,"error":{"code":-32601,"message":"client does not implement item/tool/call"}}\n'
    ),
    withdraw=codex.RESOLVED,
    withdraw_reason="the agent resolved the request itself",
    withdraw_answer=b"",  # nothing is owed for it
    withdraw_string_id_events=[
        OtherUpdate(kind="serverRequest/resolved", payload=None),
    ],
    cancel_line=codex.INTERRUPT,
    cancel_read=IncomingRequest(
        id=4, method="turn/interrupt", params={"threadId": codex.THREAD, "turnId": codex.TURN}
    ),
    refusal_line=codex.DECLINE,
    refusal_read=Response(id=0, method="item/commandExecution/requestApproval",
                          result={"decision": "decline"}),
    cancel_first=True,
    error_echo=_codex_error_echo,
    pending_at_exit=(),
)

DIALECTS = [ACP, CODEX]
