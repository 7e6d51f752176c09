"""Sans-IO client side of the Codex app-server protocol.

JSON-RPC without the ``jsonrpc`` member.  ``initialize`` (then the
``initialized`` notification), ``thread/start`` → thread id, ``turn/start`` →
turn id; ``turn/*`` and ``item/*`` notifications stream the turn, which is over
only when ``turn/completed`` names it.  Cancel is the *request*
``turn/interrupt {threadId, turnId}`` for the active turn (the operation id);
with no active turn the cancel has already settled.  If the cancel comes after
``turn/start`` was sent but before its turn id is known, the interrupt is owed
and goes out (via ``data_to_send``) as soon as the id arrives.

Approval requests from the agent (command, file change, permissions; v2 and
the v1 names) become ``PermissionRequested`` with the whole decision set
(``DECISIONS``): "Allow", "Allow for this session", "Deny", and "Deny and
stop" (``cancel``: Codex refuses and interrupts the turn itself; the
``PermissionResolved`` says ``interrupts_turn``).  A cancel declines every
pending one.  ``serverRequest/resolved`` for an approval still pending (the
server cleared it, e.g. at an interrupt) is a ``PermissionWithdrawn``.  Every
notification carries extra members (``emittedAtMs`` and friends) that are
ignored; unknown methods pass through as ``OtherUpdate``.

A thread outlives the app-server process (its rollout is on disk):
``thread_resume`` (``thread/resume {threadId, ...}``, with ``excludeTurns``:
the client has the conversation already) reopens it in a new process, and
``thread_id`` names it once answered.  ``steer`` adds user input to the
running turn (``turn/steer {threadId, input, expectedTurnId}``); the agent
refuses it if that turn is no longer the active one.

Options (model, reasoning effort, approval policy) are offered after the
thread's answer and ``model_list``'s, and set for the next turns with
``set_option`` (protocols/codex_options.py); ``thread/tokenUsage/updated`` is
a ``UsageUpdated``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from .codex_approvals import (
    ALLOW_SESSION,
    APPROVAL_METHODS,
    DECISIONS,
    HUMAN_CHECKPOINT,
    PERMISSIONS_METHOD,
    Decision,
    Pending,
    answer,
    approval_title,
    declined,
)
from .codex_options import CodexOptions
from .codex_subagents import ChildThreads
from .core import ClientEvent, CoreBase
from .events import (
    AgentNotice,
    MessageChunk,
    OptionsChanged,
    OtherUpdate,
    PermissionOption,
    PermissionRequested,
    PermissionResolved,
    PermissionWithdrawn,
    PlanUpdated,
    StopReason,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    UsageUpdated,
)
from .framing import DEFAULT_MAX_LINE_BYTES
from .jsonrpc import (
    METHOD_NOT_FOUND,
    NEED_DATA,
    Dialect,
    ErrorResponse,
    IncomingNotification,
    IncomingRequest,
    InvalidLine,
    LocalProtocolError,
    NeedData,
    PeerClosed,
    Response,
    RpcEvent,
    UnmatchedResponse,
    error_text,
)
from .prompt_parts import PromptPart, codex_input
from .session_options import codex_usage
from .turnstate import Trigger, TurnState

__all__ = [
    "APPROVAL_METHODS",
    "DECISIONS",
    "PERMISSIONS_METHOD",
    "RESUME_PARAMS",
    "STATUS_TO_STOP",
    "CodexClient",
    "Decision",
]

#: Codex turn status → ACP stop reason.
STATUS_TO_STOP: Final[dict[str, StopReason]] = {
    "completed": "end_turn",
    "interrupted": "cancelled",
    "failed": "error",
}

#: ``thread/start`` parameters that ``thread/resume`` takes too (codex 0.169
#: schema): a profile's overrides apply to a resumed thread as to a new one.
RESUME_PARAMS: Final = frozenset({
    "approvalPolicy", "approvalsReviewer", "baseInstructions", "config", "developerInstructions",
    "model", "modelProvider", "personality", "sandbox", "serviceTier",
})

#: The item of a multi-agent tool call (spawn, wait, interrupt, close an agent).
_COLLAB: Final = "collabAgentToolCall"
#: Item types rendered as tool calls.
_TOOL_ITEMS: Final = frozenset(
    {"commandExecution", "fileChange", "mcpToolCall", "webSearch", "dynamicToolCall"}
)



class CodexClient(CoreBase):
    #: Every app-server can resume a thread (``thread/resume``); none replays
    #: history as notifications, so there is no load.
    can_resume = True
    can_load = False

    def __init__(
        self,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        client_name: str = "turnvisor",
        client_version: str = "0.1.0",
    ) -> None:
        super().__init__(Dialect.CODEX, max_line_bytes=max_line_bytes)
        self.client_name = client_name
        self.client_version = client_version
        self.thread_id: str | None = None
        #: The running turn's id: the operation id ``turn/interrupt`` needs.
        self.turn_id: str | None = None
        #: The id of the turn now running or last run (kept after its end, an
        #: abandoned one's too): what ``thread/revert`` names it by.
        self.last_turn_id: str | None = None
        self._thread_start_id: int | None = None
        self._thread_resume_id: int | None = None
        self._turn_start_id: int | None = None
        self._interrupt_owed = False
        #: Pending approvals: our request id → what answering it needs.
        self._approvals: dict[str, Pending] = {}
        self._open_tools: set[str] = set()
        #: Open tool items as last seen, for what an approval of them is about.
        self._items: dict[str, dict[str, Any]] = {}
        #: Child threads (multi-agent) the agent spawned (protocols/codex_subagents.py);
        #: how many running ones the turn's cancel interrupted too.
        self.children = ChildThreads()
        self._children_cancelled = 0
        #: The thread's options (protocols/codex_options.py); ``model/list``'s request id.
        self.options = CodexOptions()
        self._model_list_id: int | None = None

    # -- requests we make ---------------------------------------------------

    def initialize(self) -> tuple[int, bytes]:
        return self.rpc.send_request(
            "initialize",
            {"clientInfo": {"name": self.client_name, "title": None,
                            "version": self.client_version}},
        )

    def initialized(self) -> bytes:
        return self.rpc.send_notification("initialized")

    def thread_start(self, cwd: str, **extra: Any) -> tuple[int, bytes]:
        rid, data = self.rpc.send_request("thread/start", {"cwd": cwd, **extra})
        self._thread_start_id = rid
        return rid, data

    def thread_resume(self, thread_id: str, cwd: str | None = None,
                      **extra: Any) -> tuple[int, bytes]:
        """``thread/resume``: reopen a thread from its rollout.  ``extra``
        keys outside ``RESUME_PARAMS`` (``thread/start``-only ones) are left out."""
        if self.turn.running:
            raise LocalProtocolError("thread/resume while a turn is running")
        if not thread_id:
            raise LocalProtocolError("thread/resume needs a thread id")
        params: dict[str, Any] = {"threadId": thread_id}
        if cwd is not None:
            params["cwd"] = cwd
        params.update({k: v for k, v in extra.items() if k in RESUME_PARAMS})
        params["excludeTurns"] = True
        rid, data = self.rpc.send_request("thread/resume", params)
        self._thread_resume_id = rid
        return rid, data

    def model_list(self) -> tuple[int, bytes]:
        """``model/list``: the models (and their efforts) the options offer."""
        rid, data = self.rpc.send_request("model/list", {})
        self._model_list_id = rid
        return rid, data

    def set_option(self, option_id: str, value: str) -> OptionsChanged:
        """Keep ``value`` for every later ``turn/start``; the options as they now
        are.  ValueError for an option or value that is not offered."""
        return self.options.set(option_id, value)

    def steer(self, text: str, parts: Sequence[PromptPart] = ()) -> tuple[int, bytes]:
        """``turn/steer``: more user input for the running turn, which the
        agent checks is still the active one (``expectedTurnId``)."""
        if self.turn.state is not TurnState.PROMPTING:
            raise LocalProtocolError(
                f"no turn to steer (turn state {self.turn.state.name})"
            )
        if self.turn_id is None:
            raise LocalProtocolError("the running turn's id is not known yet")
        return self.rpc.send_request("turn/steer", {
            "threadId": self.thread_id,
            "input": codex_input(text, parts),
            "expectedTurnId": self.turn_id,
        })

    def thread_revert(self, before_turn_id: str) -> tuple[int, bytes]:
        """``thread/revert``: the thread's history without ``before_turn_id``
        and every later turn (Codex 0.171; it leaves files alone: Turnvisor's
        checkpoints restore those).  Not while a turn runs."""
        if self.thread_id is None:
            raise LocalProtocolError("thread/revert before the thread is open")
        if self.turn.running:
            raise LocalProtocolError("thread/revert while a turn is running")
        if not before_turn_id:
            raise LocalProtocolError("thread/revert needs a turn id")
        return self.rpc.send_request("thread/revert", {"threadId": self.thread_id,
                                                       "beforeTurnId": before_turn_id})

    def turn_start(self, text: str, parts: Sequence[PromptPart] = ()) -> tuple[int, bytes]:
        if self.thread_id is None:
            raise LocalProtocolError("turn/start before thread/start succeeded")
        # Built first: a part Codex cannot take (PartRefused) starts no turn.
        items = codex_input(text, parts)
        self.turn.fire(Trigger.PROMPT)
        self.turn_id = self.last_turn_id = None
        self._interrupt_owed = False
        self._children_cancelled = 0
        self._open_tools.clear()
        self._items.clear()
        rid, data = self.rpc.send_request(
            "turn/start",
            {"threadId": self.thread_id, "input": items,
             **self.options.turn_params()},
        )
        self._turn_start_id = rid
        return rid, data

    def cancel(self) -> bytes:
        """Bytes that interrupt the active turn; ``b""`` if none is active
        (or if its id is not known yet: then the interrupt is owed)."""
        if self.turn.fire(Trigger.CANCEL) is not TurnState.PROMPTING:
            return b""
        out = bytearray()
        # The interrupt goes first: a declined approval alone lets the turn go
        # on (the agent reports the refusal and continues), so the agent must
        # already know the turn is being stopped when it reads the decline.
        if self.turn_id is None:
            self._interrupt_owed = True
        else:
            out += self._interrupt()
        for request_id in list(self._approvals):
            out += self.respond_permission(request_id, None)
        for item_id in sorted(self._open_tools):
            self._events.append(ToolCallUpdated(tool_call_id=item_id, status="cancelled"))
        self._open_tools.clear()
        self._items.clear()
        # Spawned agents are threads of their own: the parent's interrupt leaves
        # them working, and the user stopped the turn, so each gets its own.
        for child_id in self.children.running_cancellable() if self.children.count else ():
            out += self._interrupt_child(child_id)
            self._children_cancelled += 1
        return bytes(out)

    def cancel_subagent(self, child_id: str) -> bytes:
        """``turn/interrupt`` of one child thread's running turn; the parent's
        turn goes on.  ``b""`` if the child is unknown, idle or its turn's id
        is not known (``children.get`` says which)."""
        if not self.children.cancellable(child_id):
            return b""
        return self._interrupt_child(child_id)

    def _interrupt_child(self, child_id: str) -> bytes:
        changed, params = self.children.start_cancel(child_id)
        self._events.append(changed)
        _, data = self.rpc.send_request("turn/interrupt", params)
        return data

    def resend_cancel(self) -> bytes:
        """``turn/interrupt`` again, for an agent that went on after the first;
        ``b""`` unless a cancel was sent, the turn has not ended and its id is
        known (an owed interrupt goes out when the id arrives)."""
        if self.turn.state is not TurnState.CANCEL_SENT or self.turn_id is None:
            return b""
        return self._interrupt()

    def _interrupt(self) -> bytes:
        self._interrupt_owed = False
        _, data = self.rpc.send_request(
            "turn/interrupt", {"threadId": self.thread_id, "turnId": self.turn_id}
        )
        return data

    def respond_permission(self, request_id: str, option_id: str | None) -> bytes:
        """Answer an approval.  ``option_id`` is one of the decisions offered;
        None declines it as part of a cancel (``decline``, v1 ``denied``)."""
        pending = self._approvals.get(request_id)
        if pending is None:
            raise LocalProtocolError(f"no pending approval {request_id!r}")
        offered = {d.option_id: d for d in pending.decisions}
        decision = declined(pending) if option_id is None else offered.get(option_id)
        if decision is None:
            raise LocalProtocolError(f"{option_id!r} is not a decision for {pending.method}")
        del self._approvals[request_id]
        self._events.append(PermissionResolved(
            request_id=request_id, option_id=option_id,
            interrupts_turn=decision.interrupts_turn,
        ))
        return self.rpc.send_response(pending.rpc_id, answer(pending, decision))

    def abandon_turn(self) -> bool:
        """Give up on the running turn without its ``turn/completed`` (escalation).
        A late completion then names an unknown turn and is reported."""
        if self.turn.state not in (TurnState.PROMPTING, TurnState.CANCEL_SENT):
            return False
        self.turn.fire(Trigger.TURN_ENDED)
        self.turn_id = None
        self._turn_start_id = None
        self._interrupt_owed = False
        self._open_tools.clear()
        self._items.clear()
        return True

    @property
    def pending_permissions(self) -> tuple[str, ...]:
        return tuple(self._approvals)


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
            case IncomingNotification(method=method, params=params):
                self._on_notification(method, params if isinstance(params, dict) else {})
            case IncomingRequest(method=method) if method in DECISIONS:
                self._on_approval(ev)
            case IncomingRequest(id=rid, method=method):
                self._outgoing += self.rpc.send_error(
                    rid, METHOD_NOT_FOUND, f"client does not implement {method}"
                )
                self._events.append(AgentNotice(message=f"refused agent call {method}"))
            case Response(id=rid) if rid in (self._thread_start_id, self._thread_resume_id):
                thread = ev.result.get("thread") if isinstance(ev.result, dict) else None
                tid = thread.get("id") if isinstance(thread, dict) else None
                if isinstance(tid, str):
                    self.thread_id = tid
                    self._events.append(self.options.thread_answered(ev.result))
                    self._events.append(ev)
                else:
                    self._events.append(ErrorResponse(
                        id=rid, method=ev.method, code=-32603,
                        message=f"{ev.method} result has no thread id",
                    ))
            case Response(id=rid) if rid == self._model_list_id:
                self._events.append(self.options.models_listed(ev.result))
                self._events.append(ev)
            case Response(id=rid) if rid == self._turn_start_id:
                turn = ev.result.get("turn") if isinstance(ev.result, dict) else None
                self._learn_turn_id(turn.get("id") if isinstance(turn, dict) else None)
                self._events.append(ev)
            case ErrorResponse(id=rid) if rid == self._turn_start_id:
                self._events.append(ev)
                if self.turn.state is not TurnState.IDLE:
                    self._finish_turn(TurnEnded(stop_reason="error",
                                                error=error_text(ev.message, ev.data)))
            case Response() | ErrorResponse():
                self._events.append(ev)
            case UnmatchedResponse(id=rid):
                self._events.append(AgentNotice(message=f"reply to unknown request id {rid!r}"))
            case InvalidLine(reason=reason, line=line):
                self._events.append(
                    AgentNotice(message=f"ignored agent output ({reason}): {line[:120]!r}")
                )
            case PeerClosed():
                self._approvals.clear()
                self.turn.fire(Trigger.CLOSE)
                self._events.append(ev)

    def _learn_turn_id(self, tid: object) -> None:
        if not isinstance(tid, str) or self.turn.state is TurnState.IDLE:
            return
        if self.turn_id is None:
            self.turn_id = self.last_turn_id = tid
            # rpc.closed: the id came in the agent's last words; it is gone.
            if self._interrupt_owed and not self.rpc.closed:
                self._outgoing += self._interrupt()

    def _finish_turn(self, ended: TurnEnded) -> None:
        for request_id in list(self._approvals):
            self._outgoing += self.respond_permission(request_id, None)
        self.turn.fire(Trigger.TURN_ENDED)
        self.turn_id = None
        self._turn_start_id = None
        self._interrupt_owed = False
        if self._children_cancelled:
            ended = TurnEnded(stop_reason=ended.stop_reason, turn_id=ended.turn_id,
                              error=ended.error, subagents_cancelled=self._children_cancelled)
            self._children_cancelled = 0
        self._events.append(ended)

    def _on_approval(self, req: IncomingRequest) -> None:
        params = req.params if isinstance(req.params, dict) else {}
        request_id = str(req.id)
        decisions = DECISIONS[req.method]
        if req.method == "item/commandExecution/requestApproval" and (
            params.get("kind") == HUMAN_CHECKPOINT
        ):
            decisions = tuple(d for d in decisions if d is not ALLOW_SESSION)
        pending = Pending(req.id, req.method, decisions, params.get("permissions"))
        if self.turn.state is TurnState.CANCEL_SENT:
            self._outgoing += self.rpc.send_response(req.id, answer(pending, declined(pending)))
            return
        self._approvals[request_id] = pending
        item = params.get("itemId") or params.get("callId")
        details = self._approval_details(req.method, params, item)
        self._events.append(
            PermissionRequested(
                request_id=request_id,
                title=approval_title(req.method, details),
                tool_call_id=item if isinstance(item, str) else None,
                options=tuple(
                    PermissionOption(option_id=d.option_id, name=d.name, kind=d.kind)
                    for d in decisions
                ),
                details=details,
            )
        )

    def _approval_details(
        self, method: str, params: dict[str, Any], item_id: object
    ) -> dict[str, Any]:
        details: dict[str, Any] = {}
        command = params.get("command")
        if isinstance(command, list):  # v1: argv
            command = " ".join(str(c) for c in command)
        if command:
            details["command"] = str(command)
        for wire, key in (("cwd", "cwd"), ("reason", "reason"), ("grantRoot", "grant_root"),
                          ("permissions", "permissions"), ("fileChanges", "changes"),
                          ("networkApprovalContext", "network")):
            if params.get(wire):
                details[key] = params[wire]
        if params.get("kind") not in (None, "command"):
            details["kind"] = params["kind"]
        item = self._items.get(item_id) if isinstance(item_id, str) else None
        if "changes" not in details and item is not None and item.get("changes"):
            # v2 file changes travel in the item, not in the approval request.
            details["changes"] = item["changes"]
        return details

    def _on_resolved(self, params: dict[str, Any]) -> None:
        rid = params.get("requestId")
        pending = self._approvals.get(str(rid))
        if pending is None or pending.rpc_id != rid:
            # The usual case: a request we answered ourselves.
            self._events.append(OtherUpdate(kind="serverRequest/resolved", payload=params))
            return
        del self._approvals[str(rid)]
        self._events.append(PermissionWithdrawn(
            request_id=str(rid), reason="the agent resolved the request itself"
        ))

    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        thread = params.get("threadId")
        if isinstance(thread, str) and self.thread_id is not None and thread != self.thread_id:
            self._on_other_thread(method, params)
            return
        match method:
            case "thread/started":
                changed = self.children.thread_started(params.get("thread"), self.thread_id)
                self._events.append(changed or OtherUpdate(kind=method, payload=params))
            case "turn/started":
                turn = params.get("turn")
                self._learn_turn_id(turn.get("id") if isinstance(turn, dict) else None)
                self._events.append(OtherUpdate(kind=method, payload=params))
            case "turn/completed":
                turn = params.get("turn")
                if not isinstance(turn, dict):
                    self._events.append(AgentNotice(message="turn/completed without a turn"))
                    return
                tid, status = turn.get("id"), turn.get("status")
                if self.turn.state is TurnState.IDLE or (
                    self.turn_id is not None and tid != self.turn_id
                ):
                    self._events.append(AgentNotice(message=f"completion of unknown turn {tid!r}"))
                    return
                if self.turn_id is None and isinstance(tid, str):
                    self.turn_id = self.last_turn_id = tid
                error = turn.get("error")
                self._finish_turn(TurnEnded(
                    stop_reason=STATUS_TO_STOP.get(str(status), "error"),
                    turn_id=self.turn_id,
                    error=str(error.get("message", error)) if isinstance(error, dict) else None,
                ))
            case "item/agentMessage/delta":
                delta = params.get("delta")
                if isinstance(delta, str):
                    item = params.get("itemId")
                    self._events.append(MessageChunk(
                        text=delta, message_id=item if isinstance(item, str) else None
                    ))
            case "item/reasoning/textDelta" | "item/reasoning/summaryTextDelta":
                delta = params.get("delta")
                if isinstance(delta, str):
                    self._events.append(MessageChunk(text=delta, channel="thought"))
            case "item/started" | "item/completed":
                self._on_item(method, params.get("item"))
            case "turn/plan/updated":
                plan = params.get("plan")
                entries = tuple(
                    {"content": str(p.get("step", "")), "status": _plan_status(p.get("status")),
                     "priority": "medium"}
                    for p in (plan if isinstance(plan, list) else [])
                    if isinstance(p, dict)
                )
                self._events.append(PlanUpdated(entries=entries))
            case "serverRequest/resolved":
                self._on_resolved(params)
            case "thread/tokenUsage/updated" if (usage := codex_usage(params)) is not None:
                self._events.append(UsageUpdated(usage=usage))
            case "error":
                self._events.append(AgentNotice(message=f"agent error: {params.get('error')}"))
            case _:
                self._events.append(OtherUpdate(kind=method, payload=params))

    def _on_other_thread(self, method: str, params: dict[str, Any]) -> None:
        """Traffic of another thread: a child's (its turn, its work), or one
        this client does not know (passed on as it came)."""
        event = self.children.child_traffic(method, params)
        if event is None and params.get("threadId") not in self.children:
            self._events.append(OtherUpdate(kind=method, payload=params))
        elif event is not None:
            self._events.append(event)
        item = params.get("item")
        if isinstance(item, dict) and item.get("type") == _COLLAB:
            self._events.extend(self.children.collab_item(item, self.thread_id))

    def _on_item(self, method: str, item: object) -> None:
        if isinstance(item, dict) and item.get("type") == _COLLAB:
            self._events.extend(self.children.collab_item(item, self.thread_id))
        if not isinstance(item, dict) or item.get("type") not in _TOOL_ITEMS:
            self._events.append(OtherUpdate(kind=method, payload=item))
            return
        item_id = str(item.get("id"))
        raw_status = str(item.get("status") or "")
        if method == "item/started":
            self._open_tools.add(item_id)
            self._items[item_id] = item
            command = item.get("command")
            title = command if isinstance(command, str) else str(item.get("type"))
            self._events.append(ToolCallStarted(
                tool_call_id=item_id, title=title, status="in_progress",
                kind="execute" if item.get("type") == "commandExecution" else "other", raw=item,
            ))
        else:
            self._open_tools.discard(item_id)
            self._items.pop(item_id, None)
            status = {"failed": "failed", "declined": "failed"}.get(raw_status, "completed")
            self._events.append(ToolCallUpdated(tool_call_id=item_id, status=status, raw=item))


def _plan_status(value: object) -> str:
    return {"inProgress": "in_progress", "completed": "completed"}.get(str(value), "pending")
