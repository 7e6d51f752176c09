"""The lifecycle manager: agent executions, turns, and the lifecycle side of cancel.

Nursery tree (one function each, so the shape reads at a glance)::

    LifecycleManager.run            executions nursery: owns every Execution
    └── _run_execution              per-execution nursery, one per running agent
        ├── connection.run          stdout reader → protocol core → events
        ├── _drain_stderr           stderr → log (bounded lines)
        ├── _pump                   events → store → bus, in order; ends turns
        └── _run_turn               the pending prompt (its CancelScope is the
                                    turn's handle: escalation cancels it alone)

Who cancels what: the executions nursery is cancelled only at supervisor
shutdown (after ``shutdown`` has cancelled turns); an execution's nursery is
cancelled when its agent's stdout ends or it is stopped; a turn's scope only
by escalation.  Every wait on an agent is bounded by a ``Timeouts`` field.
The agent process is torn down in the execution's ``finally`` (SIGTERM to its
group, grace, SIGKILL), shielded with its own deadline.

Turn ends are idempotent: ``_finish_turn`` closes the turn in the store
conditionally, so the pump, an escalation, a crash and the orchestrator's
reconciliation can all try and exactly one wins.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import trio

from protocols.adapters import AgentAdapter, AgentClosed, AgentTimeout
from protocols.events import (
    AgentNotice,
    MessageChunk,
    OtherUpdate,
    PermissionRequested,
    PermissionResolved,
    PlanUpdated,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
)
from protocols.jsonrpc import LocalProtocolError
from protocols.process import drain_stderr

from .config import Config
from .errors import AgentStartError, Conflict, NotFound
from .executors import LaunchedAgent, Launcher, default_launcher
from .models import CANCELLED_STATUS, Message, Session, SessionState
from .notify import Notifier
from .profiles import AgentProfile
from .store import Store
from .tool_details import finished_stamp, tool_details

__all__ = ["CancelOutcome", "Execution", "ExecutionStatus", "LifecycleManager", "TurnHandle"]

log = logging.getLogger(__name__)

#: Turn row state for each stop reason.
_TURN_STATE = {"end_turn": "completed", "cancelled": "cancelled", "error": "failed"}


class ExecutionStatus(StrEnum):
    STARTING = "STARTING"
    READY = "READY"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"


class CancelOutcome(StrEnum):
    #: No execution (never started, crashed, gone): the caller reconciles.
    NO_EXECUTION = "no_execution"
    #: No turn was running.
    IDLE = "idle"
    #: The turn ended within the join window.
    ACKNOWLEDGED = "acknowledged"
    #: Not acknowledged within the join window, but ended before escalation.
    LATE = "late"
    #: Never ended: synthetic completion, execution marked ready.
    ESCALATED = "escalated"


@dataclass(eq=False)
class TurnHandle:
    id: str
    session_id: str
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    done: trio.Event = field(default_factory=trio.Event)
    stop_reason: str | None = None
    cancel_requested: bool = False
    #: When the agent's end of turn reached the pump (for the cancel stage breakdown).
    answered_at: float | None = None
    #: The agent text message being streamed, per channel (agent / thought).
    text: dict[str, Message] = field(default_factory=dict)
    pending_text: dict[str, str] = field(default_factory=dict)
    tools: dict[str, Message] = field(default_factory=dict)
    plan: Message | None = None


@dataclass(eq=False)
class Execution:
    session_id: str
    profile: AgentProfile
    agent: LaunchedAgent
    nursery: trio.Nursery
    status: ExecutionStatus = ExecutionStatus.STARTING
    turn: TurnHandle | None = None
    #: The turn holding the prompt gate (released early when a cancel is not
    #: acknowledged, so an agent that ignores cancel never blocks the next prompt).
    gate: str | None = None
    permissions: dict[str, Message] = field(default_factory=dict)
    stopped: trio.Event = field(default_factory=trio.Event)
    #: An escalation abandoned a turn this agent never ended: it is replaced
    #: before the next prompt (it would refuse it, or answer it with the old turn).
    abandoned: bool = False

    @property
    def adapter(self) -> AgentAdapter:
        return self.agent.adapter


class LifecycleManager:
    def __init__(self, config: Config, store: Store, notifier: Notifier,
                 launcher: Launcher | None = None) -> None:
        self.config = config
        self._launch = launcher or default_launcher(config)
        self.timeouts = config.timeouts
        self.store = store
        self.notify = notifier
        self.executions: dict[str, Execution] = {}
        #: session → the last turn closed here that moved the session out of RUNNING.
        self.closed_turns: dict[str, str] = {}
        self._starting: dict[str, trio.Event] = {}
        self._nursery: trio.Nursery | None = None

    # -- the executions nursery -----------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own every execution until cancelled (supervisor shutdown)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    async def ensure_execution(self, session: Session) -> Execution:
        """The session's running agent, started if needed (bounded by agent_start_s)."""
        existing = self.executions.get(session.id)
        if existing is not None and existing.status is not ExecutionStatus.STOPPED:
            return existing
        starting = self._starting.get(session.id)
        if starting is not None:
            with trio.move_on_after(self.timeouts.agent_start_s):
                await starting.wait()
            existing = self.executions.get(session.id)
            if existing is None:
                raise AgentStartError("the agent failed to start")
            return existing
        profile = self.config.profiles.get(session.agent)
        if profile is None:
            raise AgentStartError(f"unknown agent profile {session.agent!r}")
        assert self._nursery is not None, "LifecycleManager.run is not running"
        self._starting[session.id] = started = trio.Event()
        try:
            updated = await self.store.call(
                self.store.db.set_session_state, session.id, SessionState.STARTING,
                only_from=(SessionState.CREATED, SessionState.WAITING_FOR_INPUT,
                           SessionState.FAILED),
            )
            if updated is not None:
                self.notify.state_changed(updated)
            try:
                ex: Execution = await self._nursery.start(
                    self._run_execution, session.id, profile)
            except Exception as exc:
                failed = await self.store.call(
                    self.store.db.set_session_state, session.id, SessionState.FAILED,
                    only_from=(SessionState.STARTING,),
                )
                if failed is not None:
                    self.notify.state_changed(failed)
                raise AgentStartError(f"agent {profile.name!r} failed to start: {exc}") from exc
            ready = await self.store.call(
                self.store.db.set_session_state, session.id, SessionState.WAITING_FOR_INPUT,
                only_from=(SessionState.STARTING,),
            )
            if ready is not None:
                self.notify.state_changed(ready)
            return ex
        finally:
            del self._starting[session.id]
            started.set()

    async def _run_execution(
        self, session_id: str, profile: AgentProfile,
        task_status: trio.TaskStatus[Execution] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        cwd = profile.cwd or str(self.config.work_dir)
        os.makedirs(cwd, exist_ok=True)
        ex: Execution | None = None
        running = False
        async with self._launch(profile, cwd, session_id) as agent:
            adapter = agent.adapter
            try:
                if agent.pgid is not None:
                    await self.store.call(self.store.db.record_agent_group, agent.pgid,
                                          session_id, " ".join(profile.command))
                async with trio.open_nursery() as nursery:
                    ex = Execution(session_id=session_id, profile=profile, agent=agent,
                                   nursery=nursery)
                    nursery.start_soon(adapter.connection.run)
                    if agent.stderr is not None:
                        nursery.start_soon(self._drain_stderr, ex, agent.stderr)
                    nursery.start_soon(self._pump, ex)
                    with trio.fail_after(self.timeouts.agent_start_s):
                        await adapter.initialize()
                        await adapter.new_session(cwd)
                    ex.status = ExecutionStatus.READY
                    self.executions[session_id] = ex
                    task_status.started(ex)
                    running = True
                    # The pump ends when the agent's output does; then nothing is left to run.
                    await adapter.connection.closed.wait()
                    with trio.move_on_after(self.timeouts.cancel_cleanup_s):
                        await _pumped(ex)
                    nursery.cancel_scope.cancel()
            except Exception:
                if not running:
                    raise  # to ensure_execution: the agent failed to start
                # A failure inside a running execution (e.g. the store refusing a
                # write) ends this agent, never the executions nursery and with it
                # the supervisor.  A turn the store could not close is reconciled
                # by the next cancel, or at the next start.
                log.exception("execution of session %s failed; stopping its agent", session_id)
            finally:
                if ex is not None:
                    ex.status = ExecutionStatus.STOPPED
                    if self.executions.get(session_id) is ex:
                        del self.executions[session_id]
        # The launcher has torn the agent down (its whole process group, if local).
        if agent.pgid is not None:
            with trio.CancelScope(shield=True, deadline=trio.current_time() + 5), \
                    contextlib.suppress(Exception):
                await self.store.call(self.store.db.forget_agent_group, agent.pgid)
        log.info("agent %s for session %s exited with %s", profile.name, session_id,
                 agent.returncode)
        if ex is not None:
            ex.stopped.set()

    async def stop_execution(self, session_id: str) -> None:
        ex = self.executions.get(session_id)
        if ex is None:
            return
        ex.nursery.cancel_scope.cancel()
        with trio.move_on_after(self.timeouts.term_grace_s + 6):
            await ex.stopped.wait()

    async def shutdown(self) -> None:
        """Graceful stop: cancel running turns (bounded), then stop every agent."""
        running = [ex for ex in self.executions.values() if ex.turn is not None]
        if running:
            async with trio.open_nursery() as nursery:
                for ex in running:
                    nursery.start_soon(self._cancel_for_shutdown, ex)
        async with trio.open_nursery() as nursery:
            for session_id in list(self.executions):
                nursery.start_soon(self.stop_execution, session_id)

    async def _cancel_for_shutdown(self, ex: Execution) -> None:
        turn = ex.turn
        if turn is None:
            return
        turn.cancel_requested = True
        with trio.move_on_after(self.timeouts.cancel_cleanup_s):
            with contextlib.suppress(AgentClosed, AgentTimeout):
                await ex.adapter.cancel()
            await turn.done.wait()
        if not turn.done.is_set():
            await self._escalate(ex, turn, reason="Turn interrupted: Turnvisor shut down")

    # -- stderr and the event pump -------------------------------------------

    async def _drain_stderr(self, ex: Execution, stream: trio.abc.ReceiveStream) -> None:
        await drain_stderr(
            stream, lambda line: log.debug("agent %s stderr: %s", ex.profile.name, line))

    async def _pump(self, ex: Execution) -> None:
        """Agent events → store → bus, in order.  Consecutive chunks are
        coalesced into one store write and one notification per batch."""
        events = ex.adapter.events
        try:
            while True:
                try:
                    batch = [await events.receive()]
                except trio.EndOfChannel:
                    return
                while len(batch) < 512:
                    try:
                        batch.append(events.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                for ev in batch:
                    await self._handle(ex, ev)
                if ex.turn is not None:
                    await self._flush_text(ex.turn)
        finally:
            turn = ex.turn
            if turn is not None:
                deadline = trio.current_time() + self.timeouts.cancel_cleanup_s
                with trio.CancelScope(shield=True, deadline=deadline):
                    code = ex.agent.returncode
                    if code is None and ex.agent.process is not None:
                        # Its stdout ends a moment before its exit can be seen:
                        # a crash should say so, not "closed its output".
                        with trio.move_on_after(0.2):
                            code = await ex.agent.process.wait()
                    await self._finish_turn(ex, turn, TurnEnded(
                        stop_reason="error",
                        error=f"agent exited (status {code})" if code is not None
                        else "agent closed its output",
                    ))
            ex.status = ExecutionStatus.STOPPED

    async def _handle(self, ex: Execution, ev: object) -> None:
        turn = ex.turn
        match ev:
            case MessageChunk(text=text, channel=channel) if turn is not None:
                turn.pending_text[channel] = turn.pending_text.get(channel, "") + text
            case TurnEnded() if turn is not None:
                turn.answered_at = trio.current_time()
                await self._finish_turn(ex, turn, ev)
            case ToolCallStarted() if turn is not None:
                await self._flush_text(turn, close=True)
                msg = await self.store.call(
                    self.store.db.add_message, ex.session_id, turn.id, "agent", "tool_call",
                    ev.title, {"tool_call_id": ev.tool_call_id, "status": ev.status,
                               "kind": ev.kind, **tool_details(ev.raw),
                               **finished_stamp({}, ev.status)},
                )
                turn.tools[ev.tool_call_id] = msg
                self.notify.message_added(msg)
            case ToolCallUpdated() if turn is not None:
                tool = turn.tools.get(ev.tool_call_id)
                if tool is not None:
                    meta = {**tool.metadata, "status": ev.status or tool.metadata.get("status")}
                    meta.update(tool_details(ev.raw))  # the card's input, output, diff
                    meta.update(finished_stamp(tool.metadata, meta["status"]))
                    await self._update(turn, tool, ev.title or tool.content, meta, tools=True)
            case PlanUpdated() if turn is not None:
                content = "\n".join(str(e.get("content", "")) for e in ev.entries)
                meta = {"entries": list(ev.entries)}
                if turn.plan is None:
                    turn.plan = await self.store.call(
                        self.store.db.add_message, ex.session_id, turn.id, "agent", "plan",
                        content, meta)
                    self.notify.message_added(turn.plan)
                else:
                    await self._update(turn, turn.plan, content, meta)
            case PermissionRequested():
                # Also outside a turn: Auggie asks about workspace indexing right after
                # session/new, and takes no prompt until that question is answered.
                if turn is not None:
                    await self._flush_text(turn, close=True)
                msg = await self.store.call(
                    self.store.db.add_message, ex.session_id, turn.id if turn else None,
                    "agent", "permission",
                    ev.title, {
                        "request_id": ev.request_id, "tool_call_id": ev.tool_call_id,
                        "status": "pending", "option_id": None,
                        "options": [{"option_id": o.option_id, "name": o.name, "kind": o.kind}
                                    for o in ev.options],
                    },
                )
                ex.permissions[ev.request_id] = msg
                self.notify.message_added(msg)
                self.notify.permission_requested(msg)
            case PermissionResolved(request_id=request_id, option_id=option_id):
                resolved = ex.permissions.pop(request_id, None)
                if resolved is not None:
                    msg = resolved
                    status = "cancelled" if option_id is None else "selected"
                    meta = {**msg.metadata, "status": status, "option_id": option_id}
                    await self._update(turn, msg, msg.content, meta)
                    if option_id is None:
                        self.notify.permission_cancelled(ex.session_id, request_id)
            case AgentNotice(message=message, level=level):
                log.log(logging.WARNING if level == "warning" else logging.INFO,
                        "agent %s (session %s): %s", ex.profile.name, ex.session_id, message)
            case OtherUpdate() | TurnEnded() | MessageChunk():
                pass
            case _:
                log.debug("unhandled agent event %r", ev)

    async def _update(self, turn: TurnHandle | None, msg: Message, content: str,
                      metadata: dict[str, Any], *, tools: bool = False) -> None:
        new = Message(id=msg.id, session_id=msg.session_id, turn_id=msg.turn_id, role=msg.role,
                      kind=msg.kind, content=content, metadata=metadata,
                      created_at=msg.created_at)
        await self.store.call(self.store.db.update_message, new)
        if turn is not None:
            if tools:
                turn.tools[str(metadata.get("tool_call_id"))] = new
            elif turn.plan is msg:
                turn.plan = new
        self.notify.message_updated(new)

    async def _flush_text(self, turn: TurnHandle, *, close: bool = False) -> None:
        for channel, text in list(turn.pending_text.items()):
            if not text:
                continue
            turn.pending_text[channel] = ""
            current = turn.text.get(channel)
            if current is None:
                meta = {"channel": channel} if channel != "agent" else {}
                added = await self.store.call(self.store.db.add_message, turn.session_id, turn.id,
                                            "agent", "text", text, meta)
                turn.text[channel] = added
                self.notify.message_added(added)
            else:
                msg = current
                new = Message(id=msg.id, session_id=msg.session_id, turn_id=msg.turn_id,
                              role=msg.role, kind=msg.kind, content=msg.content + text,
                              metadata=msg.metadata, created_at=msg.created_at)
                await self.store.call(self.store.db.update_message, new)
                turn.text[channel] = new
                self.notify.message_updated(new)
        if close:
            # Text after a tool call or a permission card starts a new message.
            turn.text.clear()

    # -- turns ------------------------------------------------------------------

    async def send_prompt(self, session: Session, text: str) -> Message:
        """Open a turn (one at a time per session) and send the prompt.
        Returns the stored user message; the turn runs in the execution nursery."""
        ex = await self.ensure_execution(session)
        if ex.abandoned and ex.gate is None and ex.turn is None:
            log.warning("session %s: replacing an agent that never ended its escalated turn",
                        session.id)
            await self.stop_execution(session.id)
            ex = await self.ensure_execution(session)
        if ex.gate is not None or ex.turn is not None:
            raise Conflict("a turn is already running in this session")
        if ex.adapter.turn_running:
            raise Conflict("the agent is still finishing its previous turn")
        handle = TurnHandle(id="", session_id=session.id)
        ex.gate = "opening"
        ex.turn = handle
        try:
            turn, msg, updated = await self.store.call(self.store.db.open_turn, session.id, text)
        except BaseException:
            ex.gate = None
            ex.turn = None
            raise
        handle.id = turn.id
        ex.gate = turn.id
        ex.status = ExecutionStatus.RUNNING
        self.notify.message_added(msg)
        self.notify.state_changed(updated)
        await ex.nursery.start(self._run_turn, ex, handle, text)
        return msg

    async def _run_turn(self, ex: Execution, turn: TurnHandle, text: str,
                        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The pending prompt.  The pump ends the turn in order with its
        output; this task only reports what the pump cannot see."""
        ended: TurnEnded | None = None
        with turn.scope:
            task_status.started()
            try:
                ended = await ex.adapter.prompt(text)
            except (AgentTimeout, LocalProtocolError, RuntimeError) as exc:
                ended = TurnEnded(stop_reason="error", error=str(exc))
            except AgentClosed:
                return  # the pump ends the turn when the agent's output ends
        if turn.scope.cancelled_caught or ended is None:
            return  # escalated: the escalation closed the turn
        if ended.stop_reason == "error" and not turn.done.is_set():
            # An error the pump may never see (the prompt was never written, or
            # the turn timed out); wait briefly for the pump, then close it here.
            with trio.move_on_after(self.timeouts.cancel_cleanup_s):
                await turn.done.wait()
            if not turn.done.is_set():
                await self._finish_turn(ex, turn, ended)

    async def _finish_turn(self, ex: Execution | None, turn: TurnHandle, ended: TurnEnded,
                           *, status_text: str | None = None) -> None:
        """Close the turn exactly once: store, then notifications, then wake waiters."""
        try:
            with trio.CancelScope(shield=True,
                                  deadline=trio.current_time() + self.timeouts.cancel_cleanup_s):
                await self._flush_text(turn)
                await self.close_turn(turn.session_id, turn.id, ended.stop_reason,
                                      by_user=turn.cancel_requested, error=ended.error,
                                      status_text=status_text)
        finally:
            turn.stop_reason = ended.stop_reason
            if ex is not None:
                if ex.turn is turn:
                    ex.turn = None
                if ex.gate in (turn.id, "opening"):
                    ex.gate = None
                if ex.status is ExecutionStatus.RUNNING:
                    ex.status = ExecutionStatus.READY
            turn.done.set()

    async def close_turn(self, session_id: str, turn_id: str, stop_reason: str, *,
                         by_user: bool, error: str | None = None,
                         status_text: str | None = None) -> bool:
        """Store-side turn close + notifications; idempotent.  Also the
        orchestrator's reconciliation for a turn with no execution behind it."""
        status: tuple[str, dict[str, Any]] | None = None
        if stop_reason == "cancelled":
            text = status_text or (CANCELLED_STATUS if by_user else "Turn cancelled by the agent")
            status = (text, {"cancelled": True, "variant": "warning"})
        elif stop_reason == "error":
            status = (status_text or f"Agent error: {error or 'unknown'}", {"variant": "error"})
        elif status_text is not None:
            status = (status_text, {"variant": "warning"})
        closed, msg, session = await self.store.call(
            self.store.db.close_turn, turn_id, state=_TURN_STATE.get(stop_reason, "completed"),
            stop_reason=stop_reason, status=status,
        )
        if not closed:
            return False
        if session is not None and session.state is not SessionState.RUNNING:
            self.closed_turns[session_id] = turn_id
        if msg is not None:
            self.notify.message_added(msg)
        if session is not None:
            self.notify.state_changed(session)
        self.notify.turn_completed(session_id, turn_id, stop_reason)
        if stop_reason == "cancelled":
            self.notify.agent_cancelled(session_id, turn_id)
        return True

    async def respond_permission(self, session_id: str, request_id: str,
                                 option_id: str | None) -> None:
        ex = self.executions.get(session_id)
        if ex is None:
            raise NotFound("no running agent for this session")
        try:
            await ex.adapter.respond_permission(request_id, option_id)
        except LocalProtocolError as exc:
            raise NotFound(str(exc)) from None
        except (AgentClosed, AgentTimeout) as exc:
            raise Conflict(str(exc)) from None

    # -- cancel -----------------------------------------------------------------

    def running_turn_id(self, session_id: str) -> str | None:
        ex = self.executions.get(session_id)
        return ex.turn.id if ex is not None and ex.turn is not None else None

    async def cancel_agent(
        self, session_id: str, marks: dict[str, float] | None = None
    ) -> CancelOutcome:
        """Cancel the running turn of ``session_id`` (DESIGN.md §2, issue: lifecycle).

        Sends the protocol cancel, waits ``cancel_join_s`` for the turn to end,
        releases the prompt gate if it did not, waits up to
        ``cancel_escalate_s`` in all, then escalates.  Raises ``AgentTimeout``
        if the cancel could not even be written (the session stays RUNNING).
        """
        ex = self.executions.get(session_id)
        if ex is None or ex.status is ExecutionStatus.STOPPED:
            return CancelOutcome.NO_EXECUTION
        turn = ex.turn
        if turn is None:
            return CancelOutcome.IDLE
        turn.cancel_requested = True
        started = trio.current_time()
        try:
            await ex.adapter.cancel()
            if marks is not None:
                marks["adapter_sent"] = trio.current_time()
        except AgentClosed:
            # The agent is going away; its turn ends with the pump.
            with trio.move_on_after(self.timeouts.cancel_cleanup_s):
                await turn.done.wait()
            return CancelOutcome.NO_EXECUTION
        with trio.move_on_after(self.timeouts.cancel_join_s):
            await turn.done.wait()
        if turn.done.is_set():
            if marks is not None:
                marks["agent_answered"] = turn.answered_at or trio.current_time()
            return CancelOutcome.ACKNOWLEDGED
        log.warning("session %s: agent did not acknowledge cancel within %.1fs; prompt gate "
                    "released", session_id, self.timeouts.cancel_join_s)
        if ex.gate == turn.id:
            ex.gate = None
        left = self.timeouts.cancel_escalate_s - (trio.current_time() - started)
        with trio.move_on_after(max(left, 0)):
            await turn.done.wait()
        if turn.done.is_set():
            return CancelOutcome.LATE
        await self._escalate(ex, turn)
        return CancelOutcome.ESCALATED

    async def _escalate(self, ex: Execution, turn: TurnHandle, *,
                        reason: str | None = None) -> None:
        """Synthetic completion of a turn the agent will not end; the execution
        is marked ready.  Bounded by ``cancel_cleanup_s``."""
        log.warning("session %s: escalating cancel of turn %s", ex.session_id, turn.id)
        turn.scope.cancel()
        ex.adapter.abandon_turn()
        ex.abandoned = True
        await self._finish_turn(ex, turn, TurnEnded(stop_reason="cancelled", turn_id=turn.id),
                                status_text=reason)


async def _pumped(ex: Execution) -> None:
    if ex.turn is not None:
        await ex.turn.done.wait()
