"""Sans-IO client side of the Agent Client Protocol (ACP, JSON-RPC 2.0).

The methods that start something return the bytes to write (and the request id, where an answer
is expected); ``receive_data``/``next_event`` turn the agent's output into ``protocols.events``
values. What a message says is read by protocols/acp_incoming.py, the one parser of incoming
ACP (v1 and v2), liberally: a message that fails validation or names an update kind we do not
know is passed through as ``OtherUpdate``/``AgentNotice``, never an error.

Cancel rules (ACP "Cancellation"): the client MUST answer every pending
``session/request_permission`` with ``{"outcome":{"outcome":"cancelled"}}`` and SHOULD mark
unfinished tool calls cancelled; it then sends the ``session/cancel`` notification, and the
pending ``session/prompt`` returns ``stopReason: cancelled``. All of that is ``cancel()``,
tested without a process.

Request cancellation (``$/cancel_request {requestId}``), both ways: an agent's withdrawn
permission request gets error -32800 and the supervisor a ``PermissionWithdrawn``; a request of
ours that timed out is withdrawn (``cancel_request``), its late answer reported, never taken.

``user_message_chunk`` outside a replay is the agent repeating the prompt (``UserEcho``), not
agent text. Restoring a conversation in a new agent process: ``initialize``'s answer says what
the agent can do (``can_resume``: ``sessionCapabilities.resume``; ``can_load``:
``loadSession``). ``resume_session`` (``session/resume``) makes no replay; ``load_session``
(``session/load``) makes the agent replay the history as ``session/update`` notifications
before it answers. While that load is pending (``replaying``) the history updates (messages,
thoughts, tool calls, plans) are consumed, not surfaced as live output (the supervisor has the
conversation stored): counted, and the answer is preceded by one ``HistoryReplayed``. Either
way ``session_id`` names the restored session once the agent has answered.

Steering (claude-agent-acp's extension, ``can_steer``: ``_meta.steering.supported``):
``_session/steering {sessionId, prompt, _meta.steering.idleBehavior: "promptRequired"}`` puts
user input into the running turn (``injected``), or, with none running, leaves it to us
(``promptRequired``). A ``session/prompt`` sent during a turn is a queued turn of its own.

Options, commands, usage, titles, ``set_option``: acp_session.py; ``initialize``'s answer:
acp_setup.py; ``authMethods``, ``authenticate``: acp_auth.py (a session answered
``auth_required``, -32000, is the caller's to log in and retry).  ``mcp_servers`` go with
every session opened or restored (``McpUnsupported`` before anything is sent): mcp.py.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from . import acp_v2
from .acp_auth import AuthMethod, authenticate_params
from .acp_incoming import (
    HISTORY_KINDS,
    is_request_id,
    load_schema,
    read_permission,
    read_prompt_answer,
    read_update,
    stop_reason,
    withdrawn_answer,
)
from .acp_session import SESSION_KINDS, SessionState
from .acp_setup import read_initialized
from .acp_subagents import ChildSessions
from .acp_v2 import AcpVersion
from .core import ClientEvent, CoreBase
from .events import (
    AgentNotice,
    HistoryReplayed,
    OtherUpdate,
    PermissionRequested,
    PermissionResolved,
    PermissionWithdrawn,
    ToolCallUpdated,
    TurnEnded,
)
from .framing import DEFAULT_MAX_LINE_BYTES
from .jsonrpc import (
    METHOD_NOT_FOUND,
    NEED_DATA,
    REQUEST_CANCELLED,
    Dialect,
    ErrorResponse,
    IncomingNotification,
    IncomingRequest,
    InvalidLine,
    LocalProtocolError,
    NeedData,
    PeerClosed,
    RequestId,
    Response,
    RpcEvent,
    UnmatchedResponse,
    error_text,
)
from .mcp import McpServer, acp_servers
from .prompt_parts import PromptPart, acp_blocks, acp_prompt_caps
from .turnstate import Trigger, TurnState

__all__ = ["CANCEL_REQUEST", "PROTOCOL_VERSION", "AcpClient", "AcpVersion", "ClientEvent",
           "load_schema"]

#: The highest ACP version this client speaks (``acp_version = "auto"`` offers it).
PROTOCOL_VERSION: Final = 2
CANCEL_REQUEST: Final = "$/cancel_request"


class AcpClient(CoreBase):
    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
                 acp_version: AcpVersion = "auto") -> None:
        super().__init__(Dialect.JSONRPC2, max_line_bytes=max_line_bytes)
        if acp_version not in ("auto", 1, 2):
            raise ValueError(f"acp_version must be \"auto\", 1 or 2, not {acp_version!r}")
        #: What the profile asked for; ``version`` is what was negotiated.
        self.acp_version: AcpVersion = acp_version
        #: The version ``initialize``'s answer settled (1 until then).
        self.version = 1
        #: v2: the running prompt was accepted (its ``{}`` answer came).
        self._accepted = False
        #: v2: tool calls the current turn has reported (the first
        #: ``tool_call_update`` of an id starts it).
        self._seen_tools: set[str] = set()
        self.session_id: str | None = None
        self.agent_info: dict[str, Any] = {}
        #: The top-level ``_meta`` of ``initialize``'s answer (extensions it offers).
        self.agent_meta: dict[str, Any] = {}
        self._prompt_id: int | None = None
        self._new_session_id: int | None = None
        self._initialize_id: int | None = None
        #: Permission requests the agent is waiting on: our request id → rpc id.
        self._permissions: dict[str, int | str] = {}
        #: Tool calls of the current turn that have not finished.
        self._open_tools: dict[str, str] = {}
        #: Our requests withdrawn with ``$/cancel_request``: rpc id → method.
        self._withdrawn: dict[RequestId, str] = {}
        #: True while the agent replays a session's history (``session/load``
        #: sent, not answered): its history updates are consumed and counted.
        self.replaying = False
        #: What ``initialize``'s answer advertised (``agentCapabilities``).
        self.agent_capabilities: dict[str, Any] = {}
        #: Pending ``session/load`` / ``session/resume``: rpc id → (method,
        #: session id, whether the agent replays the history first).
        self._restores: dict[RequestId, tuple[str, str, bool]] = {}
        #: History updates consumed during the pending load, by update kind.
        self._replayed: dict[str, int] = {}
        #: How many the last successful load consumed.
        self.last_replayed = 0
        #: Sessions whose load we withdrew: a replay still in flight for them
        #: is history too, never live output.
        self._abandoned_loads: set[str] = set()
        #: Child sessions (subagents) the agent announced (protocols/acp_subagents.py);
        #: the session each pending permission request is for; the children the
        #: running turn's cancel stopped with it.
        self.children = ChildSessions()
        self._permission_sessions: dict[str, str] = {}
        self._children_cancelled = 0
        #: The session's options (protocols/acp_session.py).
        self.session = SessionState()
        self.mcp_servers: tuple[McpServer, ...] = ()  # every session's (protocols/mcp.py)
        #: How the agent logs in (``initialize``'s ``authMethods``: protocols/acp_auth.py).
        self.auth_methods: tuple[AuthMethod, ...] = ()

    # -- requests we make ---------------------------------------------------

    def initialize(self) -> tuple[int, bytes]:
        rid, data = self.rpc.send_request(
            "initialize", acp_v2.initialize_params(self.acp_version))
        self._initialize_id = rid
        return rid, data

    def new_session(self, cwd: str) -> tuple[int, bytes]:
        rid, data = self.rpc.send_request("session/new", {"cwd": cwd, "mcpServers": acp_servers(
            self.mcp_servers, self.agent_capabilities, self.version)})
        self._new_session_id = rid
        return rid, data

    @property
    def protocol(self) -> Literal["acp/1", "acp/2"]:
        """The negotiated dialect, as the session DTO names it."""
        return "acp/2" if self.version == 2 else "acp/1"

    @property
    def can_load(self) -> bool:
        """The agent advertised ``agentCapabilities.loadSession`` (v1), or
        ``capabilities.session`` (v2: ``session/resume`` with ``replayFrom``)."""
        if self.version == 2:
            return isinstance(self.agent_capabilities.get("session"), dict)
        return self.agent_capabilities.get("loadSession") is True

    @property
    def can_resume(self) -> bool:
        """The agent advertised ``agentCapabilities.sessionCapabilities.resume``
        (an object; its presence is the capability); v2: ``capabilities.session``,
        which commits the agent to ``session/resume``."""
        if self.version == 2:
            return isinstance(self.agent_capabilities.get("session"), dict)
        session = self.agent_capabilities.get("sessionCapabilities")
        return isinstance(session, dict) and isinstance(session.get("resume"), dict)

    @property
    def can_steer(self) -> bool:
        """The agent advertised the steering extension (``_meta.steering.supported``)."""
        steering = self.agent_meta.get("steering")
        return isinstance(steering, dict) and steering.get("supported") is True

    def steer(self, text: str, parts: tuple[PromptPart, ...] = ()) -> tuple[int, bytes]:
        """``_session/steering``: ``text`` into the running turn.  The answer's
        ``outcome`` says whether the agent took it (``injected``) or had no
        turn running (``promptRequired``: nothing was delivered)."""
        if not self.can_steer:
            raise LocalProtocolError("the agent did not advertise _meta.steering")
        if self.turn.state is not TurnState.PROMPTING:
            raise LocalProtocolError(f"no turn to steer (turn state {self.turn.state.name})")
        return self.rpc.send_request("_session/steering", {
            "sessionId": self.session_id,
            "prompt": acp_blocks(text, parts, acp_prompt_caps(self.agent_capabilities)),
            "_meta": {"steering": {"idleBehavior": "promptRequired"}},
        })

    def load_session(self, session_id: str, cwd: str) -> tuple[int, bytes]:
        """``session/load`` (v2: ``session/resume`` with ``replayFrom: {type:
        "start"}``): the agent replays the history (consumed) and answers."""
        if not self.can_load:
            raise LocalProtocolError("the agent did not advertise loadSession")
        if self.version == 2:
            rid, data = self._restore("session/resume", session_id, cwd, replay=True)
        else:
            rid, data = self._restore("session/load", session_id, cwd, replay=True)
        self.replaying = True
        self._replayed = {}
        return rid, data

    def resume_session(self, session_id: str, cwd: str) -> tuple[int, bytes]:
        """``session/resume``: the agent reopens the session without a replay."""
        if not self.can_resume:
            raise LocalProtocolError("the agent did not advertise sessionCapabilities.resume")
        return self._restore("session/resume", session_id, cwd)

    def _restore(self, method: str, session_id: str, cwd: str, *,
                 replay: bool = False) -> tuple[int, bytes]:
        if self.turn.running:
            raise LocalProtocolError(f"{method} while a turn is running")
        if self._restores:
            raise LocalProtocolError(f"{method} while another restore is pending")
        if not session_id:
            raise LocalProtocolError(f"{method} needs a session id")
        params: dict[str, Any] = {"sessionId": session_id, "cwd": cwd, "mcpServers": acp_servers(
            self.mcp_servers, self.agent_capabilities, self.version)}
        if replay and self.version == 2:
            params["replayFrom"] = {"type": "start"}
        rid, data = self.rpc.send_request(method, params)
        self._restores[rid] = (method, session_id, replay)
        return rid, data

    def authenticate(self, method_id: str, key: str | None = None) -> tuple[int, bytes]:
        """``authenticate {methodId}`` (the key too where the method takes it
        there); ValueError, nothing sent, for a method the agent did not list."""
        method = next((m for m in self.auth_methods if m.id == method_id), None)
        if method is None:
            raise ValueError(f"the agent offers no login method {method_id!r}")
        return self.rpc.send_request("authenticate", authenticate_params(method, key))

    def set_option(self, option_id: str, value: str) -> tuple[int, bytes]:
        """``session/set_config_option`` (legacy shapes: ``set_mode``/``set_model``);
        ValueError, nothing sent, for an option or value the agent did not offer."""
        return self.session.set_request(self.rpc, self.session_id, option_id, value,
                                        self.version)

    def prompt(self, text: str, parts: tuple[PromptPart, ...] = ()) -> tuple[int, bytes]:
        if self.session_id is None:
            raise LocalProtocolError("prompt before session/new succeeded")
        blocks = acp_blocks(text, parts, acp_prompt_caps(self.agent_capabilities))
        self.turn.fire(Trigger.PROMPT)
        self._open_tools.clear()
        self._seen_tools.clear()
        self._accepted = False
        self._children_cancelled = 0
        rid, data = self.rpc.send_request(
            "session/prompt", {"sessionId": self.session_id, "prompt": blocks})
        self._prompt_id = rid
        return rid, data

    def cancel(self) -> bytes:
        """Bytes that cancel the running turn; ``b""`` if none is running."""
        if self.turn.fire(Trigger.CANCEL) is not TurnState.PROMPTING:
            return b""
        out = bytearray()
        for request_id in list(self._permissions):
            out += self.respond_permission(request_id, None)
        for tool_call_id in list(self._open_tools):
            self._events.append(ToolCallUpdated(tool_call_id=tool_call_id, status="cancelled"))
        self._open_tools.clear()
        out += self.rpc.send_notification("session/cancel", {"sessionId": self.session_id})
        # A parent's cancel may leave its children running (claude-agent-acp
        # keeps background subagents for a client that can cancel them): the
        # user stopped the turn, so each running child gets its own cancel.
        for child_id in self.children.running_cancellable() if self.children.count else ():
            out += self._cancel_child(child_id)
            self._children_cancelled += 1
        return bytes(out)

    def cancel_subagent(self, child_id: str) -> bytes:
        """``session/cancel`` on one running child session (it advertised
        ``cancel``), after answering its pending permission requests
        ``cancelled``; the parent's turn goes on.  ``b""`` if the child is not
        running or cannot be cancelled (``children.get`` says which)."""
        if not self.children.cancellable(child_id):
            return b""
        return self._cancel_child(child_id)

    def _cancel_child(self, child_id: str) -> bytes:
        out = bytearray()
        for request_id, sid in list(self._permission_sessions.items()):
            if sid == child_id and request_id in self._permissions:
                out += self.respond_permission(request_id, None)
        self._events.append(self.children.start_cancel(child_id))
        out += self.rpc.send_notification("session/cancel", {"sessionId": child_id})
        return bytes(out)

    def resend_cancel(self) -> bytes:
        """The ``session/cancel`` again, for an agent that dropped the first
        (pi-acp, vibe: a cancel right after the prompt); ``b""`` unless a
        cancel was sent and the turn has not ended."""
        if self.turn.state is not TurnState.CANCEL_SENT:
            return b""
        return self.rpc.send_notification("session/cancel", {"sessionId": self.session_id})

    def cancel_request(self, rid: RequestId) -> bytes:
        """Withdraw a request of ours still waiting for its answer (it timed
        out): the ``$/cancel_request`` bytes, ``b""`` if it is answered already.

        The request stops being pending at once; the agent's answer to it
        (error -32800, or a late result) becomes an ``AgentNotice``."""
        method = self.rpc.pending.get(rid)
        if method is None:
            return b""
        self.rpc.forget(rid)
        restore = self._restores.pop(rid, None)
        if restore is not None and restore[2]:
            self.replaying = False
            self._abandoned_loads.add(restore[1])
        self._withdrawn[rid] = method
        return self.rpc.send_notification(CANCEL_REQUEST, {"requestId": rid})

    def respond_permission(self, request_id: str, option_id: str | None) -> bytes:
        """Answer a ``PermissionRequested``; ``option_id=None`` means cancelled."""
        rpc_id = self._permissions.pop(request_id, None)
        self._permission_sessions.pop(request_id, None)
        if rpc_id is None:
            raise LocalProtocolError(f"no pending permission request {request_id!r}")
        outcome: dict[str, Any] = (
            {"outcome": "cancelled"}
            if option_id is None
            else {"outcome": "selected", "optionId": option_id}
        )
        self._events.append(PermissionResolved(request_id=request_id, option_id=option_id))
        return self.rpc.send_response(rpc_id, {"outcome": outcome})

    def abandon_turn(self) -> bool:
        """Give up on the running turn without the agent's answer (escalation).

        A late ``session/prompt`` answer then arrives as a reply to an unknown
        id and is reported, not mistaken for the next turn's end."""
        if self.turn.state not in (TurnState.PROMPTING, TurnState.CANCEL_SENT):
            return False
        if self._prompt_id is not None:
            self.rpc.forget(self._prompt_id)
        self._prompt_id = None
        self._open_tools.clear()
        self._accepted = False
        self.turn.fire(Trigger.TURN_ENDED)
        return True

    @property
    def pending_permissions(self) -> tuple[str, ...]:
        return tuple(self._permissions)

    # -- what the agent sends -----------------------------------------------

    def next_event(self) -> ClientEvent | NeedData:
        while not self._events:  # (its own loop: the base never calls up into it)
            ev = self.rpc.next_event()
            if isinstance(ev, NeedData):
                return NEED_DATA
            self._handle(ev)
        return self._events.popleft()

    def _handle(self, ev: RpcEvent) -> None:
        match ev:
            case IncomingNotification(method="session/update", params=params):
                self._on_update(params)
            case IncomingNotification(method="$/cancel_request", params=params):
                self._on_cancel_request(params)
            case IncomingNotification(method=method):
                self._events.append(OtherUpdate(kind=method, payload=ev.params))
            case IncomingRequest(method="session/request_permission"):
                self._on_permission(ev)
            case IncomingRequest(id=rid, method=method):
                # We advertise no fs/terminal capability; say so instead of
                # leaving the agent waiting forever.
                self._outgoing += self.rpc.send_error(
                    rid, METHOD_NOT_FOUND, f"client does not implement {method}"
                )
                self._events.append(AgentNotice(message=f"refused agent call {method}"))
            case Response(id=rid) if rid == self._prompt_id and self.version == 2:
                self._on_accepted(ev.result)
            case Response(id=rid) if rid == self._prompt_id:
                self._end_turn(ev.result)
            case ErrorResponse(id=rid, code=code) if (
                    rid == self._prompt_id and self.version == 2
                    and code == REQUEST_CANCELLED and self.turn.state is TurnState.CANCEL_SENT):
                # v2: a prompt cancelled before the agent accepted it is
                # refused -32800 with no idle update to follow
                # (claude-agent-acp 0.101): our cancel's outcome, not an error.
                self._finish_turn(TurnEnded(stop_reason="cancelled"))
            case ErrorResponse(id=rid) if rid == self._prompt_id:
                self._finish_turn(TurnEnded(stop_reason="error",
                                            error=error_text(ev.message, ev.data)))
            case Response(id=rid) if rid == self._new_session_id:
                sid = ev.result.get("sessionId") if isinstance(ev.result, dict) else None
                if isinstance(sid, str):
                    self.session_id = sid
                    self._events.extend(self.session.offered(ev.result))
                    self._events.append(ev)
                else:
                    self._events.append(
                        ErrorResponse(
                            id=rid, method=ev.method, code=-32603,
                            message="session/new result has no sessionId",
                        )
                    )
            case Response(id=rid) if rid == self._initialize_id:
                self._on_initialized(ev)
            case Response(id=rid) | ErrorResponse(id=rid) if rid in self._restores:
                self._on_restored(ev, *self._restores.pop(rid))
            case Response(id=rid) | ErrorResponse(id=rid) if rid in self.session.pending:
                self._events.extend(self.session.answered(ev))
                self._events.append(ev)
            case Response() | ErrorResponse():
                self._events.append(ev)
            case UnmatchedResponse(id=rid) if is_request_id(rid) and rid in self._withdrawn:
                self._events.append(withdrawn_answer(self._withdrawn.pop(rid), ev))
            case UnmatchedResponse(id=rid):
                self._events.append(AgentNotice(message=f"reply to unknown request id {rid!r}"))
            case InvalidLine(reason=reason, line=line):
                self._events.append(
                    AgentNotice(message=f"ignored agent output ({reason}): {line[:120]!r}")
                )
            case PeerClosed():
                self._permissions.clear()
                self._restores.clear()
                self.replaying = False
                self.turn.fire(Trigger.CLOSE)
                self._events.append(ev)

    def _on_initialized(self, ev: Response) -> None:
        said = read_initialized(self.acp_version, ev)
        if isinstance(said, ErrorResponse):
            self._events.append(said)
            return
        self.version = said.version
        self.agent_info = said.agent_info
        self.agent_capabilities = said.capabilities
        self.agent_meta = said.meta
        self.auth_methods = said.auth_methods
        self._events.append(ev)

    def _on_accepted(self, result: Any) -> None:
        """v2: the prompt's ``{}`` answer says it was accepted; the turn goes
        on until the idle ``state_update``."""
        self._prompt_id = None
        self._accepted = True
        # Members beyond ``_meta`` are extensions (codex-acp 2.6 names the
        # user message: ``messageId``), not an error.
        if not isinstance(result, dict):
            self._events.append(AgentNotice(
                message=f"unexpected prompt acceptance {result!r}", level="info"))

    def _on_state(self, update: dict[str, Any]) -> None:
        """v2 ``state_update``: the idle one ends the running turn with its stop
        reason (a cancel's confirmation is the idle one with ``cancelled``)."""
        state = acp_v2.parse_state_update(update)
        if state is None:
            self._events.append(AgentNotice(message="state_update without a state"))
            return
        if state.state != "idle" or not self.turn.running:
            return  # running / requires_action, or idle with no turn of ours
        if not self._accepted:
            # Before the prompt's acceptance the idle is not this turn's: the
            # agent accepts a prompt before it runs it, so this is the state
            # it was in, or the end of a turn we gave up on (escalation).
            return
        if state.stop_reason is None:
            self._events.append(AgentNotice(
                message="idle state_update without a stopReason ended the turn", level="info"))
        self._finish_turn(TurnEnded(stop_reason=stop_reason(state.stop_reason or "end_turn")))

    def _on_restored(self, ev: Response | ErrorResponse, method: str, session_id: str,
                     replay: bool) -> None:
        if replay:
            self.replaying = False
            replayed, self._replayed = self._replayed, {}
            if isinstance(ev, Response):
                self.last_replayed = sum(replayed.values())
                self._events.append(HistoryReplayed(
                    session_id=session_id, updates=sum(replayed.values()), by_kind=replayed,
                ))
        if isinstance(ev, Response):
            self.session_id = session_id
            self._abandoned_loads.discard(session_id)
            self._events.extend(self.session.offered(ev.result))
        self._events.append(ev)

    def _on_cancel_request(self, params: Any) -> None:
        rid = params.get("requestId") if isinstance(params, dict) else None
        request_id = str(rid)
        if not is_request_id(rid) or self._permissions.get(request_id) != rid:
            # Already answered (or never asked): the answer it wants went out.
            self._events.append(AgentNotice(
                message=f"$/cancel_request for no pending request ({rid!r})", level="info"
            ))
            return
        del self._permissions[request_id]
        self._outgoing += self.rpc.send_error(rid, REQUEST_CANCELLED, "Request cancelled")
        self._events.append(PermissionWithdrawn(
            request_id=request_id, reason="the agent withdrew the request"
        ))

    def _end_turn(self, result: Any) -> None:
        stop, notice = read_prompt_answer(result)
        if notice is not None:
            self._events.append(notice)
        self._finish_turn(TurnEnded(stop_reason=stop))

    def _finish_turn(self, ended: TurnEnded) -> None:
        self._prompt_id = None
        self._accepted = False
        # The turn is over: permissions it asked are moot, tools it left open are not running.
        for request_id in list(self._permissions):
            if self._permission_sessions.get(request_id) not in self.children:
                self._outgoing += self.respond_permission(request_id, None)
        self.turn.fire(Trigger.TURN_ENDED)
        if self._children_cancelled:
            ended = TurnEnded(stop_reason=ended.stop_reason, turn_id=ended.turn_id,
                              error=ended.error, subagents_cancelled=self._children_cancelled)
            self._children_cancelled = 0
        self._events.append(ended)

    def _on_permission(self, req: IncomingRequest) -> None:
        fields = read_permission(req.params, self.version)
        if isinstance(fields, str):
            self._outgoing += self.rpc.send_error(req.id, -32602, "invalid permission request")
            self._events.append(AgentNotice(message=fields))
            return
        if self.turn.state is TurnState.CANCEL_SENT:
            # Asked after we cancelled: the answer can only be "cancelled".
            self._outgoing += self.rpc.send_response(req.id, {"outcome": {"outcome": "cancelled"}})
            return
        request_id = str(req.id)
        self._permissions[request_id] = req.id
        sid = req.params.get("sessionId") if isinstance(req.params, dict) else None
        if isinstance(sid, str):
            self._permission_sessions[request_id] = sid
        self._events.append(PermissionRequested(
            request_id=request_id, title=fields.title, tool_call_id=fields.tool_call_id,
            options=fields.options, details=fields.details,
        ))

    def _on_update(self, params: Any) -> None:
        update = params.get("update") if isinstance(params, dict) else None
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        if not isinstance(kind, str) or not isinstance(update, dict):
            self._events.append(AgentNotice(message="session/update without an update kind"))
            return
        if kind == "subagent_update" or params.get("sessionId") in self.children:
            self._on_child_update(kind, update, params.get("sessionId"))
            return
        if kind in HISTORY_KINDS or (self.version == 2 and kind in acp_v2.HISTORY_KINDS):
            if self.replaying:
                self._replayed[kind] = self._replayed.get(kind, 0) + 1
                return
            if params.get("sessionId") in self._abandoned_loads:
                return  # the tail of a replay we gave up on
        if self.version == 2 and kind == "state_update":
            self._on_state(update)
            return
        if kind in SESSION_KINDS:
            self._events.extend(self.session.read(kind, update))
            return
        self._events.extend(
            read_update(kind, update, self.version, self._seen_tools, self._open_tools))


    def _on_child_update(self, kind: str, update: dict[str, Any], sid: object) -> None:
        """A child's announcement or state (a ``SubagentChanged`` when it
        changes); the rest of a child's traffic is not the parent's transcript."""
        if self.replaying or sid in self._abandoned_loads:
            return  # a replay's children are history, not work running now
        event = self.children.read(kind, update, sid)
        if event is not None:
            self._events.append(event)
