"""The lifecycle manager: agent executions, turns, and every turn's end — cancel included.

Nursery tree (one function each, so the shape reads at a glance)::

    LifecycleManager.run            executions nursery: owns every Execution
    ├── take_over                   after a restart, per turn an agentctl ran on:
    │                               starts its execution (below), bounded
    └── _run_execution              per-execution nursery, one per running agent
        ├── connection.run          the agent link's reader → protocol core → events
        ├── _drain_stderr           stderr → log (bounded lines)
        ├── _pump                   events → transcript (store → bus), in order; ends turns
        ├── _stop_when_idle         stops the agent after ``idle_agent_s`` without a turn
        ├── _watch                  per turn: the stall watchdog
        └── _run_turn               the pending prompt (its CancelScope is the
                                    turn's handle: escalation cancels it alone),
                                    after restoring the conversation in a fresh
                                    agent (supervisor.restore; its own scope, which
                                    a cancel or shutdown cancels)

Who cancels what: the executions nursery is cancelled only at supervisor
shutdown (after ``shutdown`` has stopped turns); an execution's nursery is
cancelled when its agent's output ends or it is stopped; a turn's scope only
by escalation.  Every wait on an agent is bounded by a ``Timeouts`` field.
The agent is torn down by its executor when ``_run_execution`` leaves the
launcher's context (local: SIGTERM to its group, grace, SIGKILL), shielded
with its own deadline.

The lifecycle owns every session-state write and a cancel's whole outcome
(``cancel_turn``): the protocol cancel, the join window, escalation, and the
reconciliation of a turn the store still shows running with no agent behind
it.  ``Execution.turn`` is the one answer to "is a turn running here".  Turn
ends are idempotent: ``close_turn`` closes the turn in the store
conditionally, so the pump, an escalation, a crash and a cancel's
reconciliation can all try and exactly one wins.

An agent that outlives the backend (``LaunchedAgent.handover``: an agentctl
at a configured URL) keeps its running turn across a restart: the pump
records how far the turn's event stream is written down, shutdown leaves the
turn to agentctl (``_detach``) instead of stopping it, and the next backend
takes it over (``take_over``): same turn id, the events of the gap replayed,
its real end, cancellable again (a cancel that was pending is gone).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import trio

from protocols.adapters import AgentAdapter, AgentClosed, AgentRefused, AgentTimeout
from protocols.events import (
    AgentNotice,
    MessageChunk,
    PermissionRequested,
    PermissionResolved,
    PlanUpdated,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
)
from protocols.jsonrpc import LocalProtocolError
from protocols.process import clean_stderr_line, drain_stderr

from .config import Config
from .db import StoreError, StoreUnavailable
from .errors import AgentStartError, CancelFailed, Conflict, NotFound
from .executors import LaunchedAgent, Launcher, default_launcher
from .models import (
    CANCELLED_STATUS,
    INTERRUPTED_STATUS,
    AgentSessionRef,
    Message,
    Session,
    SessionState,
    StopReason,
    TextAppend,
    TurnState,
)
from .notify import Notifier
from .profiles import AgentProfile
from .recovery import RESTART_META, RESTART_STATUS, Handover
from .restore import RESTORE_FAILED_META, RESTORE_FAILED_STATUS, reopen
from .retries import Retries, contained
from .store import Store
from .text_writer import TextWriter
from .transcript import Transcript, TurnText
from .turn_checkpoints import TurnCheckpoints

__all__ = [
    "NEVER_STARTED_STATUS",
    "SHUTDOWN_STATUS",
    "CancelOutcome",
    "CancelPhase",
    "CancelResult",
    "Execution",
    "ExecutionStatus",
    "LifecycleManager",
    "StopRequest",
    "TurnClosed",
    "TurnHandle",
]

log = logging.getLogger(__name__)

#: Turn row state for each stop reason.
_TURN_STATE: dict[str, TurnState] = {
    "end_turn": "completed", "cancelled": "cancelled", "error": "failed"}

#: The status message of a turn stopped because Turnvisor shut down.
SHUTDOWN_STATUS = "Turn interrupted: Turnvisor shut down"

#: The status message of a turn the agent never started (DESIGN.md §9).
NEVER_STARTED_STATUS = "The agent never started the turn"

#: Agent events that show a turn is alive (the stall watchdog's progress);
#: metadata (usage, modes, notices, echoes) is not progress.
PROGRESS_EVENTS = (MessageChunk, ToolCallStarted, ToolCallUpdated, PlanUpdated,
                   PermissionRequested)

#: Lines of an agent's stderr kept for its start failure's message.
STDERR_TAIL = 8

#: A cancel's progress on a running turn (DESIGN.md §9): written to the agent,
#: join window passed without an answer, force-stopped.
CancelPhase = Literal["sent", "late", "escalated"]


class ExecutionStatus(StrEnum):
    STARTING = "STARTING"
    READY = "READY"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"


class StopRequest(StrEnum):
    """Who asked a running turn to stop; it decides the turn's status message."""

    #: The user (``agent.cancel``, REST cancel, Esc).
    USER = "user"
    #: Turnvisor is shutting down.
    SHUTDOWN = "shutdown"
    #: A "send now" replaces the turn (DESIGN.md §9): not the user's cancel.
    INTERRUPT = "interrupt"


#: Told of every turn close (session id, turn id, stop reason, who asked for
#: the stop): the queue decides from it whether its head runs or it parks.
TurnClosed = Callable[[str, str, StopReason, "StopRequest | None"], Awaitable[None]]


class CancelOutcome(StrEnum):
    #: No execution (never started, crashed, gone): the store was reconciled.
    NO_EXECUTION = "no_execution"
    #: No turn was running.
    IDLE = "idle"
    #: The turn ended within the join window.
    ACKNOWLEDGED = "acknowledged"
    #: Not acknowledged within the join window, but ended before escalation.
    LATE = "late"
    #: Never ended: synthetic completion, execution marked ready.
    ESCALATED = "escalated"


@dataclass(frozen=True, slots=True)
class CancelResult:
    outcome: CancelOutcome
    #: The turn the cancel acted on (None: none was running, in memory or in the store).
    turn_id: str | None = None
    #: ``trio.current_time()`` when the protocol cancel was written, and when the
    #: agent's end of turn reached the pump (the cancel's stage breakdown).
    sent_at: float | None = None
    answered_at: float | None = None
    #: The agent stopped, but the store refused the record of it (why): the
    #: record is written by the store retries nursery when the store can again.
    record_error: str | None = None


@dataclass(eq=False)
class TurnHandle:
    id: str
    session_id: str
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    done: trio.Event = field(default_factory=trio.Event)
    stop_reason: StopReason | None = None
    stop_request: StopRequest | None = None
    cancel_phase: CancelPhase | None = None
    #: When the agent's end of turn reached the pump.
    answered_at: float | None = None
    #: Agent events of this turn since its cancel was sent (it keeps going?).
    events_after_cancel: int = 0
    #: Whether this turn's close moved the session out of RUNNING (nothing left
    #: for a cancel to reconcile).
    settled_session: bool = False
    text: TurnText | None = None
    #: Set while the turn restores its agent's conversation (before the prompt
    #: is written): a cancel or shutdown cancels it, abandoning the restore.
    restoring: trio.CancelScope | None = None
    #: The stall watchdog: when the last progress event came, how many came,
    #: the open "no output" notice, and whether the turn never started.
    last_event_at: float = field(default_factory=trio.current_time)
    events: int = 0
    stall_notice: Message | None = None
    never_started: bool = False
    #: Taken over from a previous backend and not settled yet: if it cannot
    #: be, it ends as interrupted by the restart, not as this agent's error.
    adopting: bool = False
    #: The stream position last recorded for the next backend (``handover``).
    recorded: int | None = None
    #: When the protocol cancel was written to the agent.
    cancel_sent_at: float | None = None
    #: The cancel operation waiting for this turn, told from the close itself
    #: once the close settled the session (no task woken in between).
    on_cancel_closed: Callable[[CancelResult], None] | None = None
    #: Checkpointed before its prompt and after its end (a session with a project).
    checkpointed: bool = False
    #: The late cancel's wait for the agent (phase ``late``): ``stop_now``
    #: cancels it, so the same operation escalates at once (DESIGN.md §15).
    late_wait: trio.CancelScope | None = None

    @property
    def cancel_sent_early(self) -> bool:
        """Written by ``cancel_at_once`` in the cancel's admission and not yet
        taken up by its ``cancel_turn`` (which sets the phase in the very step
        it writes, so a write with no phase is the admission's)."""
        return self.cancel_sent_at is not None and self.cancel_phase is None


@dataclass(eq=False)
class Execution:
    session_id: str
    profile: AgentProfile
    agent: LaunchedAgent
    nursery: trio.Nursery
    transcript: Transcript
    status: ExecutionStatus = ExecutionStatus.STARTING
    #: The running turn: the one answer to "is a turn running in this execution".
    turn: TurnHandle | None = None
    stopped: trio.Event = field(default_factory=trio.Event)
    #: The last lines the agent wrote on stderr (for a start failure's message).
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_TAIL))
    #: An escalation abandoned a turn this agent never ended: it is replaced
    #: before the next prompt (it would refuse it, or answer it with the old turn).
    abandoned: bool = False
    #: The working directory the agent runs in.
    cwd: str = ""
    #: A conversation the next turn restores before its prompt (DESIGN.md §10):
    #: this agent was started for a session that already had one.
    restore_from: AgentSessionRef | None = None
    #: ``trio.current_time()`` when the agent last became idle (no turn).
    idle_since: float = 0.0
    #: Shutdown left the running turn to the agent's host (``handover``): it
    #: stays open in the store for the next backend.
    detached: bool = False
    #: Set when the event pump has ended.
    pumped: trio.Event = field(default_factory=trio.Event)

    @property
    def adapter(self) -> AgentAdapter:
        return self.agent.adapter

    @property
    def permissions(self) -> dict[str, Message]:
        return self.transcript.permissions


class LifecycleManager:
    def __init__(self, config: Config, store: Store, notifier: Notifier,
                 launcher: Launcher | None = None) -> None:
        self.config = config
        self._launch = launcher or default_launcher(config)
        self.timeouts = config.timeouts
        self.store = store
        self.notify = notifier
        self.executions: dict[str, Execution] = {}
        #: How the lifecycle asks for a user cancel it cannot run itself (a
        #: "Deny and stop" answer): the orchestrator's single-flight operation.
        self.request_user_cancel: Callable[[str], Awaitable[None]] | None = None
        #: Told of every turn close (the queue, DESIGN.md §9).
        self.on_turn_closed: TurnClosed | None = None
        #: Whether a close (final stop reason, who asked) parks the session's
        #: queue: the queue's policy, applied in the close's own transaction.
        self.close_parks_queue: Callable[[StopReason, StopRequest | None], bool] = (
            lambda _reason, _request: False)
        self._starting: dict[str, trio.Event] = {}
        #: Sessions whose running turn is being taken over (``take_over``).
        self._taking_over: dict[str, trio.Event] = {}
        self._nursery: trio.Nursery | None = None
        notifier.agent_live = self.agent_live
        notifier.agent_protocol = self.agent_protocol
        #: What each session's agent last negotiated in this backend (kept
        #: after the agent stops: the next one speaks what its profile allows).
        self._protocols: dict[str, str] = {}
        #: Writes the streamed text of every session's turn together.
        self.texts = TextWriter(store, self.timeouts.stream_flush_s)
        #: What the store refused (a turn's close, a cancel's record), written
        #: when it can again; run by the supervisor root beside this.
        self.retries = Retries(self.timeouts.store_retry_s)
        #: DESIGN.md §12: checkpoints around every turn (None: off).
        self.checkpoints: TurnCheckpoints | None = None

    def agent_live(self, session_id: str) -> bool:
        """Whether the session's agent process is running (the session DTO's
        ``agent_live``): false before its first start and once it stopped."""
        ex = self.executions.get(session_id)
        return (ex is not None and ex.status is not ExecutionStatus.STOPPED
                and not ex.adapter.connection.closed.is_set())

    def agent_protocol(self, session: Session) -> str | None:
        """``acp/1`` / ``acp/2`` / ``codex``: what the session's agent
        negotiated, else what its profile implies (None for an ACP profile
        with ``acp_version = "auto"`` whose agent has not started here)."""
        known = self._protocols.get(session.id)
        if known is not None:
            return known
        profile = self.config.profiles.get(session.agent)
        if profile is None:
            return None
        if profile.protocol == "codex":
            return "codex"
        return None if profile.acp_version == "auto" else f"acp/{profile.acp_version}"

    # -- the executions nursery -----------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own every execution until cancelled (supervisor shutdown)."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.texts.run)
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
            await self.store.set_session_state(
                session.id, SessionState.STARTING,
                only_from=(SessionState.CREATED, SessionState.WAITING_FOR_INPUT,
                           SessionState.FAILED))
            try:
                ex: Execution = await self._nursery.start(
                    self._run_execution, session.id, session.workspace_id, profile)
            except Exception as exc:
                # Unwrapped: nursery.start reports the task's failure in a group,
                # whose own text ("Exceptions from Trio nursery") says nothing.
                leaf = _leaf(exc)
                message = str(leaf) if isinstance(leaf, AgentStartError) else \
                    f"agent {profile.name!r} failed to start: {leaf}"
                await self._start_failed(session.id, message)
                raise AgentStartError(message) from exc
            await self.store.set_session_state(session.id, SessionState.WAITING_FOR_INPUT,
                                               only_from=(SessionState.STARTING,))
            return ex
        finally:
            del self._starting[session.id]
            started.set()

    async def _start_failed(self, session_id: str, message: str) -> None:
        """The session says why its agent did not start, in a sentence."""
        log.warning("session %s: %s", session_id, message)
        await self.store.set_session_state(session_id, SessionState.FAILED,
                                           only_from=(SessionState.STARTING,))
        await self.store.add_message(session_id, None, "system", "status", message,
                                     {"variant": "error", "start_failed": True})

    async def _run_execution(
        self, session_id: str, workspace_id: str, profile: AgentProfile,
        takeover: Handover | None = None,
        task_status: trio.TaskStatus[Execution] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        # DESIGN.md §12: the session's project (or worktree) wins over the profile's
        # cwd; a profile without a cwd: the session's own directory, so no two
        # sessions (and no two workspaces) share files.
        session = await self.store.get_session(session_id)
        cwd = ((session.cwd if session else None) or profile.cwd
               or str(self.config.session_work_dir(workspace_id, session_id)))
        os.makedirs(cwd, exist_ok=True)
        ex: Execution | None = None
        entered = False
        try:
            async with self._launch(profile, cwd, session_id) as agent:
                entered = True
                ex = await self._drive(session_id, profile, cwd, agent, task_status, takeover)
        except OSError as exc:
            if entered:
                raise
            if isinstance(exc, FileNotFoundError):
                raise AgentStartError(f"agent {profile.name!r} cannot start: its command "
                                      f"{profile.command[0]!r} was not found") from None
            raise AgentStartError(f"agent {profile.name!r} cannot start: {exc}") from None
        # The launcher has torn the agent down (its whole process group, if local).
        if agent.pgid is not None:
            with trio.CancelScope(shield=True,
                                  deadline=trio.current_time() + self.timeouts.cancel_cleanup_s), \
                    contextlib.suppress(Exception):
                await self.store.forget_agent_group(agent.pgid)
        log.info("agent %s for session %s exited with %s", profile.name, session_id,
                 agent.returncode)
        if ex is not None:
            ex.stopped.set()
            await self._announce_liveness(session_id)

    async def _announce_liveness(self, session_id: str) -> None:
        """Subscribers learn that the agent stopped (``agent_live`` false) even
        when the session's state did not change (an idle stop)."""
        if session_id in self.executions:
            return  # a successor already runs (and its start was announced)
        with contextlib.suppress(StoreError):
            session = await self.store.get_session(session_id)
            if session is not None:
                self.notify.state_changed(session)

    async def _drive(self, session_id: str, profile: AgentProfile, cwd: str,
                     agent: LaunchedAgent, task_status: trio.TaskStatus[Execution],
                     takeover: Handover | None = None) -> Execution | None:
        """The execution's nursery around a launched agent, until its output ends."""
        ex: Execution | None = None
        running = False
        adapter = agent.adapter
        try:
            if agent.pgid is not None:
                await self.store.record_agent_group(agent.pgid, session_id,
                                                    " ".join(profile.command), agent.tag)
            async with trio.open_nursery() as nursery:
                ex = Execution(session_id=session_id, profile=profile, agent=agent,
                               nursery=nursery, cwd=cwd,
                               transcript=Transcript(
                                   self.store, self.notify, session_id,
                                   max_turn_output=self.config.limits.max_turn_output_bytes))
                adopted = await self._adopt(ex, takeover) if takeover is not None else None
                nursery.start_soon(adapter.connection.run)
                if agent.stderr is not None:
                    nursery.start_soon(self._drain_stderr, ex, agent.stderr)
                nursery.start_soon(self._pump, ex)
                with trio.move_on_after(self.timeouts.agent_start_s) as slow:
                    await adapter.initialize()
                    ex.restore_from = await self._conversation(session_id)
                    if adopted is not None:
                        await self._settle_takeover(ex, adopted)
                    elif ex.restore_from is None:
                        await adapter.new_session(cwd)
                        await self._remember(ex)
                if slow.cancelled_caught:
                    raise AgentStartError(
                        f"agent {profile.name!r} did not start within "
                        f"{self.timeouts.agent_start_s:g}s" + _tail(ex))
                ex.status = ExecutionStatus.READY if ex.turn is None else ExecutionStatus.RUNNING
                ex.idle_since = trio.current_time()
                self.executions[session_id] = ex
                self._protocols[session_id] = adapter.wire_protocol
                nursery.start_soon(self._stop_when_idle, ex)
                if ex.turn is not None:
                    nursery.start_soon(self._watch, ex, ex.turn)  # a turn taken over
                task_status.started(ex)
                running = True
                # The pump ends when the agent's output does; then nothing is left to run.
                await adapter.connection.closed.wait()
                with trio.move_on_after(self.timeouts.cancel_cleanup_s):
                    await _pumped(ex)
                nursery.cancel_scope.cancel()
        except Exception as exc:
            if not running:
                # To ensure_execution: the agent failed to start, said in a sentence.
                raise await self._start_error(profile, agent, ex, exc) from exc
            # A failure inside a running execution (e.g. the store refusing a
            # write) ends this agent, never the executions nursery and with it
            # the supervisor.  A turn the store could not close is reconciled
            # by the next cancel, or at the next start.
            leaf = _leaf(exc)
            if isinstance(leaf, StoreError):
                # An outage (a full disk), not a bug: said in a line, no traceback.
                log.warning("session %s: the store refused a write (%s); stopping its agent",
                            session_id, leaf)
            else:
                log.exception("execution of session %s failed; stopping its agent", session_id)
        finally:
            if ex is not None:
                ex.status = ExecutionStatus.STOPPED
                if self.executions.get(session_id) is ex:
                    del self.executions[session_id]
        return ex

    # -- a running turn taken over after a restart --------------------------------

    def start_take_over(self, handover: Handover) -> None:
        """``take_over`` in the executions nursery; prompts and cancels of the
        session wait for it from now on."""
        assert self._nursery is not None, "LifecycleManager.run is not running"
        # Registered at once: a prompt or cancel that comes before the task runs waits too.
        self._starting[handover.session_id] = self._taking_over[handover.session_id] = \
            trio.Event()
        self._nursery.start_soon(contained, f"session {handover.session_id}: takeover",
                                 self.take_over, handover)

    async def take_over(self, handover: Handover) -> None:
        """After a restart: re-attach the agent (behind an agentctl at a configured
        URL) that runs ``handover``'s turn, and let the turn stream on into its
        session.  Bounded by ``agentctl_takeover_s``; if agentctl does not answer
        in time, no longer runs the turn, or lost its events since the recorded
        position, the turn is interrupted as recovery interrupts any other
        (``RESTART_STATUS``, the queue parked).  Prompts and cancels of the
        session wait for it (bounded)."""
        sid = handover.session_id
        assert self._nursery is not None, "LifecycleManager.run is not running"
        settled = self._taking_over.get(sid)
        if settled is None:
            settled = trio.Event()
        self._starting[sid] = self._taking_over[sid] = settled
        ex: Execution | None = None
        try:
            session = await self.store.get_session(sid)
            profile = self.config.profiles.get(session.agent) if session is not None else None
            with trio.move_on_after(self.timeouts.agentctl_takeover_s) as slow:
                if profile is not None:
                    try:
                        assert session is not None
                        ex = await self._nursery.start(self._run_execution, sid,
                                                       session.workspace_id, profile, handover)
                    except Exception as exc:
                        log.warning("session %s: turn %s not taken over: %s", sid,
                                    handover.turn_id, _leaf(exc))
            if slow.cancelled_caught:
                log.warning("session %s: turn %s not taken over within %gs", sid,
                            handover.turn_id, self.timeouts.agentctl_takeover_s)
            if ex is None:
                await self._interrupt_restarted(sid, handover.turn_id, None)
            elif ex.turn is not None:
                log.info("session %s: turn %s taken over from the previous backend", sid,
                         handover.turn_id)
        finally:
            del self._starting[sid], self._taking_over[sid]
            settled.set()

    async def _adopt(self, ex: Execution, handover: Handover) -> TurnHandle:
        """Before the agent's link runs: the turn to take over is this
        execution's running turn, its transcript picked up where it was left."""
        if ex.agent.handover is None:
            raise AgentStartError(f"agent {ex.profile.name!r} does not outlive the backend "
                                  "(any more): its turn cannot be taken over")
        ex.agent.handover.adopt(handover.turn_id, handover.after)
        turn = TurnHandle(id=handover.turn_id, session_id=ex.session_id, adopting=True,
                          recorded=handover.after, events=1)
        turn.text = await ex.transcript.reopen_turn(handover.turn_id)
        ex.turn = turn
        ex.status = ExecutionStatus.RUNNING
        return turn

    async def _settle_takeover(self, ex: Execution, turn: TurnHandle) -> None:
        """Re-attach the conversation (agentctl hands its owner's session back),
        then keep the adopted turn if the agent still runs it (or its end came
        with the replay); otherwise interrupt it as the restart did.  The turn
        may have ended already: its end replayed and pumped before this runs."""
        handover = ex.agent.handover
        assert handover is not None  # _adopt refused an agent without one
        ref, ex.restore_from = ex.restore_from, None
        if ref is not None:
            reopened = await reopen(ex.adapter, ref, profile=ex.profile.name, cwd=ex.cwd,
                                    restore_s=self.timeouts.restore_s)
            reattached = reopened.reattached
        else:
            await ex.adapter.new_session(ex.cwd)
            reattached = False
        await self._remember(ex)
        if not reattached:
            await self.store.add_message(ex.session_id, None, "system", "status",
                                         RESTORE_FAILED_STATUS, dict(RESTORE_FAILED_META))
        adopted = await handover.settle_adoption()
        turn.adopting = False
        if not adopted and ex.turn is turn:
            ex.turn = None
            ex.status = ExecutionStatus.READY
            await self._interrupt_restarted(ex.session_id, turn.id, turn.text, ex)
            turn.done.set()

    async def _interrupt_restarted(self, session_id: str, turn_id: str,
                                   text: TurnText | None, ex: Execution | None = None) -> None:
        """A turn that could not be taken over ends as recovery ends any turn a
        restart cut: interrupted, ``RESTART_STATUS``, the session's queue parked."""
        with trio.CancelScope(shield=True,
                              deadline=trio.current_time() + self.timeouts.cancel_cleanup_s):
            try:
                if text is not None and ex is not None:
                    await ex.transcript.flush(text)
                await self._close_restarted(session_id, turn_id)
            except StoreError as exc:
                log.warning("session %s: the store refused to close turn %s (%s); retrying "
                            "in the background", session_id, turn_id, exc)
                self.retries.retry(("close", turn_id),
                                   functools.partial(self._close_restarted, session_id, turn_id),
                                   f"session {session_id}: turn {turn_id}'s close")

    async def _close_restarted(self, session_id: str, turn_id: str) -> None:
        """The turn interrupted by the restart, its queue parked, in one transaction."""
        closed = await self.store.close_turn(
            turn_id, state="interrupted", stop_reason="cancelled",
            status=(RESTART_STATUS, dict(RESTART_META)), park_queue=True)
        if closed is not None:
            self.notify.turn_completed(session_id, turn_id, "cancelled")

    async def _conversation(self, session_id: str) -> AgentSessionRef | None:
        """The conversation a new agent of this session restores, if any.  (An
        agent behind agentctl cannot restore, but agentctl re-attaches the
        session its owner started: ``new_session`` hands back the same id.)"""
        return await self.store.get_agent_session(session_id)

    async def _remember(self, ex: Execution) -> None:
        """Store the agent's own conversation id, so a later agent can restore it."""
        agent_session_id = ex.adapter.agent_session_id
        if agent_session_id is None:
            return
        await self.store.set_agent_session(ex.session_id, AgentSessionRef(
            agent_session_id=agent_session_id, profile=ex.profile.name, cwd=ex.cwd))

    async def _stop_when_idle(self, ex: Execution) -> None:
        """Stop the agent once it ran no turn for ``idle_agent_s``, so idle
        sessions hold no processes; the next prompt starts and restores one."""
        idle_s = self.timeouts.idle_agent_s
        while True:
            await trio.sleep_until(ex.idle_since + idle_s)
            turn = ex.turn
            if turn is not None:
                await turn.done.wait()  # its end moves idle_since on
            elif trio.current_time() >= ex.idle_since + idle_s:
                log.info("session %s: agent %s idle for %gs; stopping it", ex.session_id,
                         ex.profile.name, idle_s)
                ex.nursery.cancel_scope.cancel()
                return

    async def stop_execution(self, session_id: str) -> None:
        ex = self.executions.get(session_id)
        if ex is None:
            return
        ex.nursery.cancel_scope.cancel()
        with trio.move_on_after(self.timeouts.stop_s):
            await ex.stopped.wait()

    async def shutdown(self) -> None:
        """Graceful stop: stop running turns (bounded), then every agent."""
        running = [ex for ex in self.executions.values() if ex.turn is not None]
        if running:
            async with trio.open_nursery() as nursery:
                for ex in running:
                    if self._hands_over(ex):
                        nursery.start_soon(self._detach, ex)
                    else:
                        nursery.start_soon(self._stop_for_shutdown, ex)
        async with trio.open_nursery() as nursery:
            for session_id in list(self.executions):
                nursery.start_soon(self.stop_execution, session_id)

    @staticmethod
    def _hands_over(ex: Execution) -> bool:
        """Whether shutdown leaves ``ex``'s turn running for the next backend:
        its agent outlives us, the prompt was sent, and a position is recorded.
        A cancel in flight goes with this backend (as with a crash): the agent
        may still honour it; the next backend can cancel the turn again."""
        turn = ex.turn
        return (ex.agent.handover is not None and turn is not None and turn.restoring is None
                and turn.recorded is not None)

    async def _detach(self, ex: Execution) -> None:
        """Shutdown: the turn runs on behind agentctl and stays open in the store;
        what the agent sent so far is written down (bounded), the rest is
        replayed to the next backend (``take_over``)."""
        turn, handover = ex.turn, ex.agent.handover
        assert turn is not None and handover is not None
        log.info("session %s: leaving turn %s to the agent's host for the next backend",
                 ex.session_id, turn.id)
        ex.detached = True
        handover.detach()
        with trio.move_on_after(self.timeouts.cancel_cleanup_s):
            await ex.pumped.wait()
        if ex.turn is turn:
            ex.turn = None
        turn.done.set()

    async def _stop_for_shutdown(self, ex: Execution) -> None:
        turn = ex.turn
        if turn is None:
            return
        turn.stop_request = StopRequest.SHUTDOWN
        with trio.move_on_after(self.timeouts.cancel_cleanup_s):
            if turn.restoring is not None:
                turn.restoring.cancel()
            else:
                with contextlib.suppress(AgentClosed, AgentTimeout):
                    await ex.adapter.cancel()
            await turn.done.wait()
        if not turn.done.is_set():
            await self._escalate(ex, turn)

    # -- stderr and the event pump -------------------------------------------

    async def _start_error(self, profile: AgentProfile, agent: LaunchedAgent,
                           ex: Execution | None, exc: BaseException) -> AgentStartError:
        leaf = _leaf(exc)
        if isinstance(leaf, AgentStartError):
            return leaf
        code = agent.returncode
        if code is None and agent.process is not None:
            # Its output ends a moment before its exit can be seen.
            with trio.move_on_after(self.timeouts.exit_status_s):
                code = await agent.process.wait()
        if code is None:
            return AgentStartError(f"agent {profile.name!r} failed to start: {leaf}"
                                   + _tail(ex))
        if ex is not None and agent.stderr is not None:
            # It exited: what it said last on stderr (the drain stopped with the
            # execution's nursery) says more than the protocol error.
            with trio.move_on_after(self.timeouts.exit_status_s), \
                    contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                rest = b""
                while chunk := await agent.stderr.receive_some(65536):
                    rest = (rest + chunk)[-8192:]
                ex.stderr_tail.extend(
                    clean for line in rest.split(b"\n")
                    if (clean := clean_stderr_line(line)).strip())
        return AgentStartError(f"agent {profile.name!r} exited with status {code} while "
                               "starting" + _tail(ex))

    async def _drain_stderr(self, ex: Execution, stream: trio.abc.ReceiveStream) -> None:
        def emit(line: str) -> None:
            if line.strip():
                ex.stderr_tail.append(line)
            log.debug("agent %s stderr: %s", ex.profile.name, line)

        await drain_stderr(stream, emit)

    async def _pump(self, ex: Execution) -> None:
        """Agent events → transcript, in order; a turn's end closes the turn.
        Streamed text is buffered and written by ``texts`` with every other
        session's, at most every ``stream_flush_s``."""
        events = ex.adapter.events
        not_written = functools.partial(self._text_not_written, ex)
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
                    turn = ex.turn
                    match ev:
                        case TurnEnded() if turn is not None:
                            turn.answered_at = trio.current_time()
                            await self._finish_turn(ex, turn, ev)
                        case PermissionResolved(interrupts_turn=True) if turn is not None:
                            # "Deny and stop": the agent was told; the turn ends as
                            # the user's cancel (whoever ends it first), through the
                            # one cancel operation.
                            turn.stop_request = StopRequest.USER
                            await ex.transcript.record(turn.text, ev)
                            if self.request_user_cancel is not None:
                                await self.request_user_cancel(ex.session_id)
                        case AgentNotice(message=message, level=level):
                            log.log(logging.WARNING if level == "warning" else logging.INFO,
                                    "agent %s (session %s): %s", ex.profile.name,
                                    ex.session_id, message)
                        case _:
                            if turn is not None and turn.cancel_phase is not None:
                                turn.events_after_cancel += 1
                            if turn is not None and isinstance(ev, PROGRESS_EVENTS):
                                await self._progress(turn)
                            await ex.transcript.record(turn.text if turn else None, ev)
                text = ex.turn.text if ex.turn is not None else None
                if text is not None and any(text.pending_text.values()):
                    if ex.agent.handover is not None:
                        # Behind an agentctl that outlives us every batch is written
                        # at once: the stream position recorded below must be written.
                        await ex.transcript.flush(text)
                    else:
                        self.texts.mark(ex.transcript, text, not_written)
                if ex.agent.handover is not None:
                    await self._record_position(ex, ex.agent.handover.take(len(batch)))
        finally:
            turn = ex.turn
            if turn is not None and (ex.detached or turn.adopting):
                pass  # left to the agent's host / to take_over's fallback
            elif turn is not None:
                deadline = trio.current_time() + self.timeouts.cancel_cleanup_s
                with trio.CancelScope(shield=True, deadline=deadline):
                    code = ex.agent.returncode
                    if code is None and ex.agent.process is not None:
                        # Its stdout ends a moment before its exit can be seen:
                        # a crash should say so, not "closed its output".
                        with trio.move_on_after(self.timeouts.exit_status_s):
                            code = await ex.agent.process.wait()
                    await self._finish_turn(ex, turn, TurnEnded(
                        stop_reason="error",
                        error=f"agent exited (status {code})" if code is not None
                        else "agent closed its output",
                    ))
            ex.status = ExecutionStatus.STOPPED
            ex.pumped.set()

    def _text_not_written(self, ex: Execution, exc: Exception) -> None:
        """The store refused the turn's streamed text: the execution fails as
        if its pump had (see ``_drive``), unless it is over already."""
        async def fail() -> None:
            raise exc

        with contextlib.suppress(RuntimeError):  # its nursery is closed: over
            ex.nursery.start_soon(fail)

    async def _record_position(self, ex: Execution, position: int | None) -> None:
        """Record how far the running turn's event stream is written down, for
        the backend that takes the turn over after a restart."""
        turn = ex.turn
        if turn is None or not turn.id or position is None or position == turn.recorded:
            return
        try:
            await self.store.set_turn_handover(turn.id, position)
        except StoreUnavailable as exc:
            # Not fatal: a restart would replay a little more (or interrupt the turn).
            log.warning("session %s: could not record turn %s's stream position: %s",
                        ex.session_id, turn.id, exc)
            return
        turn.recorded = position

    # -- turns ------------------------------------------------------------------

    def turn_running(self, session_id: str) -> bool:
        """Whether a turn is running (or being opened, or taken over after a
        restart) in the session's agent."""
        if session_id in self._taking_over:
            return True
        ex = self.executions.get(session_id)
        return ex is not None and ex.turn is not None

    def running_turn_id(self, session_id: str) -> str | None:
        ex = self.executions.get(session_id)
        return ex.turn.id or None if ex is not None and ex.turn is not None else None

    def live_and_idle(self, session_id: str) -> bool:
        """The session's agent runs here and no turn is running or being opened
        in it: what memory says is the whole truth (no store to reconcile)."""
        ex = self.executions.get(session_id)
        return (session_id not in self._taking_over and ex is not None
                and ex.status is not ExecutionStatus.STOPPED and ex.turn is None)

    def mark_user_stop(self, session_id: str) -> None:
        """A user cancel joined a cancel in flight (a send now's): the turn
        ends as the user's cancel."""
        ex = self.executions.get(session_id)
        if ex is not None and ex.turn is not None:
            ex.turn.stop_request = StopRequest.USER

    async def send_prompt(self, session: Session, text: str, *,
                          guard: Callable[[], bool] | None = None,
                          resume_queue: bool = False,
                          client_message_id: str | None = None) -> Message:
        """Open a turn (one at a time per session) and send the prompt.
        Returns the stored user message; the turn runs in the execution nursery.
        ``guard`` is asked at the moment the turn is claimed (no checkpoint
        after it): False refuses the start with ``Conflict``.  ``resume_queue``
        resumes a parked queue in the turn's own transaction."""
        ex = await self.ensure_execution(session)
        if ex.abandoned and ex.turn is None:
            log.warning("session %s: replacing an agent that never ended its escalated turn",
                        session.id)
            await self.stop_execution(session.id)
            ex = await self.ensure_execution(session)
        if ex.turn is not None:
            raise Conflict("a turn is already running in this session")
        if ex.adapter.turn_running:
            raise Conflict("the agent is still finishing its previous turn")
        if guard is not None and not guard():
            raise Conflict("the turn may no longer start")
        # Claimed before the first checkpoint: a concurrent prompt sees it at once.
        handle = ex.turn = TurnHandle(id="", session_id=session.id)
        # DESIGN.md §12: a session with a project has checkpoints (the shared
        # default work dir has none: a revert there would undo other sessions' edits).
        handle.checkpointed = self.checkpoints is not None and session.cwd is not None
        if ex.restore_from is not None or handle.checkpointed:
            # Armed now: a cancel that comes before the restore (or the turn's
            # checkpoint) begins abandons it too.
            handle.restoring = trio.CancelScope()
        try:
            turn, msg = await self.store.open_turn(session.id, text, resume_queue=resume_queue,
                                                   client_message_id=client_message_id)
        except BaseException:
            ex.turn = None
            raise
        handle.id = turn.id
        handle.text = TurnText(session_id=session.id, turn_id=turn.id)
        ex.status = ExecutionStatus.RUNNING
        handle.last_event_at = trio.current_time()
        await ex.nursery.start(self._run_turn, ex, handle, text)
        ex.nursery.start_soon(self._watch, ex, handle)
        return msg

    async def steer(self, session_id: str, text: str,
                    client_message_id: str | None = None) -> Message:
        """Deliver ``text`` into the running turn (Codex ``turn/steer``, ACP
        ``_session/steering`` where offered) and
        store it as a user message with ``metadata.delivery: "steer"``.

        Raises ``SteerUnsupported`` (the agent cannot), ``Conflict`` (no turn
        to steer, or the agent refused it: certainly not delivered).  A steer
        whose delivery is uncertain (no answer in time, the agent went away)
        is never sent again: it is stored with ``delivery_uncertain``."""
        ex = self.executions.get(session_id)
        turn = ex.turn if ex is not None else None
        if ex is None or turn is None or not turn.id or turn.cancel_phase is not None:
            raise Conflict("no running turn to steer")
        meta: dict[str, Any] = {"delivery": "steer"}
        if client_message_id is not None:
            meta["client_message_id"] = client_message_id
        try:
            await ex.adapter.steer(text)
        except (LocalProtocolError, AgentRefused) as exc:
            raise Conflict(f"the agent did not take the steer: {exc}") from None
        except (AgentTimeout, AgentClosed) as exc:
            log.warning("session %s: steer delivery uncertain (%s); not sent again",
                        session_id, exc)
            meta["delivery_uncertain"] = True
        return await self.store.add_message(session_id, turn.id, "user", "text", text, meta)

    # -- the stall watchdog (DESIGN.md §9) --------------------------------------

    async def _progress(self, turn: TurnHandle) -> None:
        """A real agent event: the turn is alive; an open stall notice is resolved."""
        turn.last_event_at = trio.current_time()
        turn.events += 1
        notice, turn.stall_notice = turn.stall_notice, None
        if notice is not None:
            await self.store.update_message(Message(
                id=notice.id, session_id=notice.session_id, turn_id=notice.turn_id,
                role=notice.role, kind=notice.kind, content=notice.content,
                metadata={**notice.metadata, "resolved": True}, created_at=notice.created_at))

    async def _watch(self, ex: Execution, turn: TurnHandle) -> None:
        """One per turn, in the execution's nursery: a silent turn gets a
        notice; a turn without any agent event after ``never_started_s`` ends
        as an error and its agent is replaced.  Quiet during a cancel (it has
        its own bounds) and while a permission waits for the user."""
        t = self.timeouts
        started = trio.current_time()
        while not turn.done.is_set():
            now = trio.current_time()
            waiting_for_user = bool(ex.permissions)
            if (turn.events == 0 and now >= started + t.never_started_s
                    and turn.cancel_phase is None):
                await self._never_started(ex, turn)
                return
            silent = now - turn.last_event_at
            if (turn.stall_notice is None and silent >= t.stall_notice_s
                    and turn.cancel_phase is None and not waiting_for_user):
                minutes = max(1, int(silent // 60))
                turn.stall_notice = await self.store.add_message(
                    turn.session_id, turn.id, "system", "status",
                    f"No output from the agent for {minutes} min",
                    {"stalled": True, "variant": "warning"})
                self.notify.turn_stalled(turn.session_id, turn.id, silent)
            wake = [now + min(t.stall_notice_s, 5.0)]
            if turn.stall_notice is None:
                wake.append(turn.last_event_at + t.stall_notice_s)
            if turn.events == 0:
                wake.append(started + t.never_started_s)
            with trio.move_on_at(max(min(wake), now + 0.001)):
                await turn.done.wait()

    async def _never_started(self, ex: Execution, turn: TurnHandle) -> None:
        log.warning("session %s: the agent never started turn %s within %gs; replacing it",
                    ex.session_id, turn.id, self.timeouts.never_started_s)
        turn.never_started = True
        turn.scope.cancel()
        ex.adapter.abandon_turn()
        ex.abandoned = True
        await self._finish_turn(ex, turn, TurnEnded(stop_reason="error", turn_id=turn.id,
                                                    error=NEVER_STARTED_STATUS))
        # Replaced: this agent is stopped; the next prompt starts a fresh one.
        ex.nursery.cancel_scope.cancel()

    async def _run_turn(self, ex: Execution, turn: TurnHandle, text: str,
                        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The pending prompt.  The pump ends the turn in order with its
        output; this task only reports what the pump cannot see."""
        ended: TurnEnded | None = None
        with turn.scope:
            task_status.started()
            try:
                if (ex.restore_from is not None and turn.restoring is not None
                        and not await self._restore(ex, turn)):
                    return  # abandoned by a cancel or shutdown: the turn is closed
                if turn.checkpointed:
                    prompt = await self._checkpoint_before(ex, turn, text)
                    if prompt is None:
                        return  # cancelled before the prompt: the turn is closed
                    text = prompt
                handover = ex.agent.handover
                if handover is not None:
                    # The agent's host runs it under our id, from this position.
                    handover.bind_turn(turn.id)
                    await self._record_position(ex, handover.take(0))
                ended = await ex.adapter.prompt(text)
            except (AgentTimeout, AgentRefused, LocalProtocolError, RuntimeError) as exc:
                ended = TurnEnded(stop_reason="error", error=str(exc))
            except AgentClosed:
                return  # the pump ends the turn when the agent's output ends
        if turn.scope.cancelled_caught or ended is None or ex.detached:
            return  # escalated (the escalation closed the turn), or left to agentctl
        if ended.stop_reason == "error" and not turn.done.is_set():
            # An error the pump may never see (the prompt was never written, or
            # the turn timed out); wait briefly for the pump, then close it here.
            with trio.move_on_after(self.timeouts.cancel_cleanup_s):
                await turn.done.wait()
            if not turn.done.is_set():
                await self._finish_turn(ex, turn, ended)

    async def _restore(self, ex: Execution, turn: TurnHandle) -> bool:
        """Reopen the session's conversation in this fresh agent before the
        turn's prompt (supervisor.restore), or say in the transcript that it
        starts fresh.  False when a cancel or shutdown abandoned it: the turn
        is then closed, and this agent (in an unknown state) is replaced
        before the next prompt."""
        ref, scope = ex.restore_from, turn.restoring
        assert ref is not None and scope is not None
        try:
            with scope:
                reopened = await reopen(ex.adapter, ref, profile=ex.profile.name, cwd=ex.cwd,
                                        restore_s=self.timeouts.restore_s)
        except BaseException:
            ex.abandoned = True  # the agent died, or gave no fresh session either
            raise
        finally:
            turn.restoring = None
        if scope.cancel_called:
            # Cancelled before the prompt was written (even if the restore had
            # just finished): the turn ends here, as the user's cancel.
            if scope.cancelled_caught:
                ex.abandoned = True
            else:
                ex.restore_from = None
                await self._remember(ex)
            await self._finish_turn(ex, turn, TurnEnded(stop_reason="cancelled",
                                                        turn_id=turn.id))
            return False
        ex.restore_from = None
        await self._remember(ex)
        if reopened.restored is not None:
            log.info("session %s: conversation restored (%s, %d replayed) in %.2fs",
                     ex.session_id, reopened.restored.method, reopened.restored.replayed,
                     reopened.took_s)
        elif reopened.reattached:
            log.info("session %s: the agent re-attached its conversation", ex.session_id)
        else:
            log.warning("session %s: the agent could not restore its conversation (%s); it "
                        "starts fresh", ex.session_id, reopened.reason)
            # Why is in the log (supervisor.restore); the metadata is DESIGN.md §10's.
            await self.store.add_message(ex.session_id, None, "system", "status",
                                         RESTORE_FAILED_STATUS, dict(RESTORE_FAILED_META))
        return True

    async def _checkpoint_before(self, ex: Execution, turn: TurnHandle,
                                 text: str) -> str | None:
        """The turn's checkpoint before its prompt (supervisor.turn_checkpoints),
        in the pre-prompt scope a cancel abandons (``_abandon_restore``); None:
        cancelled, and the turn is closed as the user's cancel."""
        assert self.checkpoints is not None
        scope = turn.restoring
        if scope is None:
            if turn.cancel_sent_at is not None:
                return text  # a cancel is already on its way to the agent
            scope = turn.restoring = trio.CancelScope()
        try:
            with scope:
                text = await self.checkpoints.before_prompt(ex.session_id, turn.id,
                                                            Path(ex.cwd), text)
        finally:
            turn.restoring = None
        if scope.cancel_called:
            await self._finish_turn(ex, turn, TurnEnded(stop_reason="cancelled",
                                                        turn_id=turn.id))
            return None
        return text

    async def _finish_turn(self, ex: Execution, turn: TurnHandle,
                           ended: TurnEnded) -> None:
        """Close the turn exactly once: store, then notifications, then wake waiters."""
        escalated = turn.cancel_phase == "escalated"
        text: list[tuple[Message, TextAppend | None]] = []
        try:
            with trio.CancelScope(shield=True,
                                  deadline=trio.current_time() + self.timeouts.cancel_cleanup_s):
                if turn.text is not None:
                    # Text that only extends messages already written goes in
                    # the close's own transaction (one commit, not two); a new
                    # message, or a write under way, is flushed first.
                    taken = Transcript.take_updates(turn.text)
                    if taken is None:
                        await ex.transcript.flush(turn.text)
                    else:
                        text = taken
                turn.settled_session = await self.close_turn(
                    turn.session_id, turn.id, ended.stop_reason, request=turn.stop_request,
                    error=ended.error, escalated=escalated, never_started=turn.never_started,
                    text=text)
        except StoreError as exc:
            # Not left RUNNING until someone cancels: closed as soon as the store answers,
            # its last text with it (whole: its appends were never announced).
            log.warning("session %s: the store refused to close turn %s (%s); retrying in "
                        "the background", turn.session_id, turn.id, exc)
            self.retries.retry(
                ("close", turn.id),
                functools.partial(self.close_turn, turn.session_id, turn.id, ended.stop_reason,
                                  request=turn.stop_request, error=ended.error,
                                  escalated=escalated, never_started=turn.never_started,
                                  text=[(msg, None) for msg, _ in text]),
                f"session {turn.session_id}: turn {turn.id}'s close")
        finally:
            turn.stop_reason = ended.stop_reason
            if ex.turn is turn:
                ex.turn = None
            if ex.status is ExecutionStatus.RUNNING:
                ex.status = ExecutionStatus.READY
            ex.idle_since = trio.current_time()
            turn.done.set()
            self._tell_cancel(turn)
            if self.checkpoints is not None and turn.checkpointed and turn.id:
                # After the close and its settle, in the checkpoints' own nursery.
                self.checkpoints.turn_ended(turn.session_id, turn.id)

    @staticmethod
    def _tell_cancel(turn: TurnHandle) -> None:
        """A cancelled turn whose close settled the session: its cancel
        operation settles now, in this step, with the close's notifications
        still queued (one write for all of them, and no task woken to answer)."""
        told, turn.on_cancel_closed = turn.on_cancel_closed, None
        # (Written at once and answered before its cancel_turn ran: phase "sent".)
        phase = turn.cancel_phase or ("sent" if turn.cancel_sent_early else None)
        if told is None or not turn.settled_session or phase not in ("sent", "late"):
            return
        outcome = CancelOutcome.ACKNOWLEDGED if phase == "sent" else CancelOutcome.LATE
        try:
            told(CancelResult(outcome, turn.id, turn.cancel_sent_at, turn.answered_at))
        except Exception:
            log.exception("settling the cancel of session %s failed", turn.session_id)

    async def close_turn(self, session_id: str, turn_id: str, stop_reason: StopReason, *,
                         request: StopRequest | None, error: str | None = None,
                         escalated: bool = False, never_started: bool = False,
                         text: Sequence[tuple[Message, TextAppend | None]] = ()) -> bool:
        """Close the turn in the store, with its status message (and ``text``,
        its last streamed text, in the same transaction), and announce its
        end; idempotent (only the first close of a running turn does anything).
        Returns whether this close moved the session out of RUNNING."""
        status: tuple[str, dict[str, Any]] | None = None
        acknowledged = stop_reason == "cancelled" and not escalated
        if request is StopRequest.INTERRUPT and stop_reason == "error":
            # The agent answered the send now's cancel with an error: still the
            # interruption the user asked for (its answer kept in the metadata).
            status = (INTERRUPTED_STATUS, {"interrupted": True, "variant": "info",
                                           "agent_stop_reason": stop_reason,
                                           **({"agent_error": error} if error else {})})
            stop_reason = "cancelled"
        elif never_started:
            status = (NEVER_STARTED_STATUS, {"variant": "error", "never_started": True})
        elif request is StopRequest.USER and stop_reason != "cancelled":
            # The user asked for the stop: whatever the agent answered (an error
            # to a cancel, the end it was about to reach), the turn ends as the
            # user's cancel; the agent's own answer is kept in the metadata.
            status = (CANCELLED_STATUS, {"cancelled": True, "variant": "warning",
                                         "agent_stop_reason": stop_reason,
                                         **({"agent_error": error} if error else {})})
            stop_reason = "cancelled"
        elif stop_reason == "cancelled":
            if request is StopRequest.SHUTDOWN:
                status = (SHUTDOWN_STATUS, {"interrupted": True, "variant": "warning"})
            elif request is StopRequest.INTERRUPT:
                meta_i: dict[str, Any] = {"interrupted": True, "variant": "info"}
                if escalated:
                    meta_i["escalated"] = True
                status = (INTERRUPTED_STATUS, meta_i)
            elif request is StopRequest.USER:
                meta: dict[str, Any] = {"cancelled": True, "variant": "warning"}
                if escalated:
                    meta["escalated"] = True
                status = (CANCELLED_STATUS, meta)
            else:
                status = ("Turn cancelled by the agent", {"cancelled": True, "variant": "warning"})
        elif stop_reason == "error":
            status = (f"Agent error: {error or 'unknown'}", {"variant": "error"})
        closed = await self.store.close_turn(
            turn_id, state=_TURN_STATE.get(stop_reason, "completed"), stop_reason=stop_reason,
            status=status, park_queue=self.close_parks_queue(stop_reason, request), text=text)
        if closed is None:
            return False
        self.notify.turn_completed(session_id, turn_id, stop_reason)
        if self.on_turn_closed is not None:
            await self.on_turn_closed(session_id, turn_id, stop_reason, request)
        if acknowledged:
            # Only when the agent itself said so (not an escalation, not an override).
            self.notify.agent_cancelled(session_id, turn_id)
        return closed.session is not None and closed.session.state is not SessionState.RUNNING

    async def respond_permission(self, session_id: str, request_id: str,
                                 option_id: str | None) -> None:
        ex = self.executions.get(session_id)
        if ex is None:
            raise NotFound("no running agent for this session")
        try:
            await ex.adapter.respond_permission(request_id, option_id)
        except (LocalProtocolError, AgentRefused) as exc:
            raise NotFound(str(exc)) from None
        except (AgentClosed, AgentTimeout) as exc:
            raise Conflict(str(exc)) from None

    # -- cancel -----------------------------------------------------------------

    async def cancel_turn(self, session_id: str, *,
                          request: StopRequest = StopRequest.USER,
                          turn_id: str | None = None,
                          on_closed: Callable[[CancelResult], None] | None = None,
                          ) -> CancelResult:
        """Stop the session's running turn and settle the session (DESIGN.md §2).

        With an agent running a turn: the protocol cancel, a wait of
        ``cancel_join_s`` for the turn to end (phase ``sent``), then up to
        ``cancel_escalate_s`` in all (phase ``late``), then escalation.  In
        every case the session is then reconciled: a turn the store still shows
        running with no agent behind it is closed as cancelled by the user, and
        a RUNNING session with no turn is unstuck.  Raises ``AgentTimeout`` if
        the cancel could not even be written, ``CancelFailed`` if the session
        is still running afterwards (it may be retried).

        ``on_closed``: called from the turn's close, before this returns, if
        the agent ended the turn and its close settled the session (the
        result this returns then).
        """
        taking_over = self._taking_over.get(session_id)
        if taking_over is not None:
            # The turn is being taken over after a restart: cancel it once that
            # is settled (bounded), through its agent, not the store alone.
            with trio.move_on_after(self.timeouts.agentctl_takeover_s):
                await taking_over.wait()
        ex = self.executions.get(session_id)
        if ex is None or ex.status is ExecutionStatus.STOPPED:
            return await self._reconcile(session_id, CancelResult(CancelOutcome.NO_EXECUTION),
                                         request)
        turn = ex.turn
        if turn is None or (turn_id is not None and turn.id != turn_id):
            # (A send now aims at one turn: a successor is not its to stop.)
            return await self._reconcile(session_id, CancelResult(CancelOutcome.IDLE, turn_id),
                                         request)
        result = await self._cancel_running(ex, turn, request, on_closed)
        if turn.settled_session or ex.detached:
            # This very turn's close moved the session out of RUNNING, or shutdown
            # left the turn to agentctl for the next backend: nothing to reconcile.
            return result
        return await self._reconcile(session_id, result, request)

    def cancel_at_once(self, session_id: str, *, request: StopRequest = StopRequest.USER,
                       turn_id: str | None = None,
                       on_closed: Callable[[CancelResult], None] | None = None) -> bool:
        """``cancel_turn``'s protocol cancel written in the caller's step, when
        nothing has to come before it: a running turn past its restore, not
        cancelled yet, on an agent whose pipe takes the cancel at once.  The
        cancel's admission calls it, so the agent has the cancel before any
        notification is written or any task runs; ``cancel_turn`` (still
        called, as always) then goes on from the write.  False: nothing
        written, ``cancel_turn`` does it all."""
        if session_id in self._taking_over:
            return False
        ex = self.executions.get(session_id)
        if ex is None or ex.status is ExecutionStatus.STOPPED:
            return False
        turn = ex.turn
        if (turn is None or (turn_id is not None and turn.id != turn_id)
                or turn.restoring is not None or turn.cancel_sent_at is not None
                or turn.done.is_set()):
            return False
        if not ex.adapter.cancel_now():
            return False
        if turn.stop_request is not StopRequest.USER:
            turn.stop_request = request
        turn.cancel_sent_at = trio.current_time()
        turn.on_cancel_closed = on_closed
        return True

    async def _cancel_running(self, ex: Execution, turn: TurnHandle,
                              request: StopRequest = StopRequest.USER,
                              on_closed: Callable[[CancelResult], None] | None = None,
                              ) -> CancelResult:
        if turn.stop_request is not StopRequest.USER:
            turn.stop_request = request
        started = trio.current_time()
        if turn.cancel_sent_early:
            assert turn.cancel_sent_at is not None
            sent_at = started = turn.cancel_sent_at  # (cancel_at_once wrote it)
        else:
            if turn.restoring is not None:
                return await self._abandon_restore(ex, turn)
            try:
                await ex.adapter.cancel()
            except AgentClosed:
                # The agent is going away; its turn ends with the pump.
                with trio.move_on_after(self.timeouts.cancel_cleanup_s):
                    await turn.done.wait()
                return CancelResult(CancelOutcome.NO_EXECUTION, turn.id)
            sent_at = turn.cancel_sent_at = trio.current_time()
            if not turn.done.is_set():
                turn.on_cancel_closed = on_closed
        self._set_phase(turn, "sent")
        with trio.move_on_after(self.timeouts.cancel_join_s):
            await self._persist(ex, turn, sent_at)
            await turn.done.wait()
        if turn.done.is_set():
            return CancelResult(CancelOutcome.ACKNOWLEDGED, turn.id, sent_at,
                                turn.answered_at or trio.current_time())
        log.warning("session %s: agent did not acknowledge cancel within %.1fs",
                    ex.session_id, self.timeouts.cancel_join_s)
        self._set_phase(turn, "late")
        left = self.timeouts.cancel_escalate_s - (trio.current_time() - started)
        turn.late_wait = trio.move_on_after(max(left, 0))
        try:
            with turn.late_wait:
                await turn.done.wait()
        finally:
            turn.late_wait = None
        if turn.done.is_set():
            return CancelResult(CancelOutcome.LATE, turn.id, sent_at, turn.answered_at)
        await self._escalate(ex, turn)
        return CancelResult(CancelOutcome.ESCALATED, turn.id, sent_at)

    def stop_now(self, session_id: str, turn_id: str | None = None) -> bool:
        """The person asks not to wait out a late cancel (DESIGN.md §15): the
        cancel operation waiting for the agent escalates at once.  No second
        cancel: False when no cancel of that turn is in its late phase."""
        ex = self.executions.get(session_id)
        turn = ex.turn if ex is not None else None
        if turn is None or (turn_id is not None and turn.id != turn_id) or turn.late_wait is None:
            return False
        log.info("session %s: stopping the agent now (asked during the late cancel)", session_id)
        turn.late_wait.cancel()
        return True

    async def _abandon_restore(self, ex: Execution, turn: TurnHandle) -> CancelResult:
        """A cancel while the turn restores its conversation: nothing was
        prompted yet, so the restore is abandoned (its scope cancelled; an ACP
        request is withdrawn within ``withdraw_s``) and the turn ends as the
        user's cancel within the join window."""
        assert turn.restoring is not None
        log.info("session %s: cancel during the restore; abandoning it", ex.session_id)
        sent_at = trio.current_time()
        turn.restoring.cancel()
        with trio.move_on_after(self.timeouts.cancel_join_s):
            await turn.done.wait()
        if turn.done.is_set():
            return CancelResult(CancelOutcome.ACKNOWLEDGED, turn.id, sent_at,
                                trio.current_time())
        await self._escalate(ex, turn)
        return CancelResult(CancelOutcome.ESCALATED, turn.id, sent_at)

    async def _persist(self, ex: Execution, turn: TurnHandle, sent_at: float) -> None:
        """Re-send the protocol cancel (twice at most, never after the turn ended)
        while the agent keeps streaming the cancelled turn: pi-acp and vibe drop
        a cancel that comes right after the prompt and would otherwise run on
        until escalation."""
        for after in (self.timeouts.cancel_resend_s, self.timeouts.cancel_resend_again_s):
            with trio.move_on_at(sent_at + after):
                await turn.done.wait()
            if turn.done.is_set():
                return
            if turn.events_after_cancel == 0:
                continue  # quiet: it may be stopping; a re-send would say nothing new
            log.info("session %s: agent still streaming %.2fs after the cancel; sending "
                     "it again", ex.session_id, after)
            turn.events_after_cancel = 0
            with contextlib.suppress(AgentClosed, AgentTimeout):
                await ex.adapter.resend_cancel()

    def _set_phase(self, turn: TurnHandle, phase: CancelPhase) -> None:
        turn.cancel_phase = phase
        self.notify.cancel_progress(turn.session_id, turn.id, phase)

    async def _escalate(self, ex: Execution, turn: TurnHandle) -> None:
        """Synthetic completion of a turn the agent will not end; the execution
        is marked ready.  Bounded by ``cancel_cleanup_s``."""
        log.warning("session %s: escalating cancel of turn %s", ex.session_id, turn.id)
        if turn.stop_request in (StopRequest.USER, StopRequest.INTERRUPT):
            self._set_phase(turn, "escalated")
        turn.scope.cancel()
        ex.adapter.abandon_turn()
        ex.abandoned = True
        await self._finish_turn(ex, turn, TurnEnded(stop_reason="cancelled", turn_id=turn.id))

    async def _reconcile(self, session_id: str, result: CancelResult,
                         request: StopRequest = StopRequest.USER) -> CancelResult:
        """After a cancel: the store agrees that no turn of this cancel runs.

        The agent has stopped the turn by now (or runs none): a store that
        refuses the record does not undo that, nor fail the cancel.  The result
        then says why the record is missing, and the record is written by the
        store retries nursery (its turn's close, if one is retried already)."""
        try:
            return await self._record_cancel(session_id, result, request)
        except StoreError as exc:
            log.warning("session %s: the cancel stopped the agent, but the store refused its "
                        "record (%s); retrying in the background", session_id, exc)
            key = ("close", result.turn_id) if result.turn_id else ("reconcile", session_id)
            self.retries.retry(key, functools.partial(self._record_cancel, session_id, result,
                                                      request),
                               f"session {session_id}: the cancel's record")
            return dataclasses.replace(result, record_error=str(exc))

    async def _record_cancel(self, session_id: str, result: CancelResult,
                             request: StopRequest) -> CancelResult:
        turn_id = result.turn_id
        if turn_id is None:
            session = await self.store.get_session(session_id)
            if session is None:
                raise NotFound(f"session {session_id} not found")
            if session.state is SessionState.RUNNING:
                turn_id = session.current_turn_id
            elif result.outcome is CancelOutcome.IDLE:
                return result  # idle in memory and in the store: a harmless success
        if turn_id is not None:
            await self.close_turn(session_id, turn_id, "cancelled", request=request)
        after = await self.store.get_session(session_id)
        if after is not None and after.state is SessionState.RUNNING and (
            after.current_turn_id is None or after.current_turn_id == turn_id
        ):
            # RUNNING with no turn behind it (or a turn the store could not close):
            # unstick it.  A successor turn (another id) is never touched.
            after = await self.store.set_session_state(
                session_id, SessionState.WAITING_FOR_INPUT, only_from=(SessionState.RUNNING,))
        if after is not None and after.state is SessionState.RUNNING and (
            after.current_turn_id == turn_id
        ):
            raise CancelFailed("the session is still running after reconciliation")
        return CancelResult(result.outcome, turn_id, result.sent_at, result.answered_at)


def _leaf(exc: BaseException) -> BaseException:
    """The one exception inside nursery groups (the group's text says nothing)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _tail(ex: Execution | None) -> str:
    """The agent's last stderr lines, as the end of a sentence."""
    if ex is None or not ex.stderr_tail:
        return ""
    return ": " + " | ".join(line.strip()[:300] for line in ex.stderr_tail)


async def _pumped(ex: Execution) -> None:
    if ex.turn is not None:
        await ex.turn.done.wait()
