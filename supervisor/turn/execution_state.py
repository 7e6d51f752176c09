"""What the lifecycle knows of each running agent and its turn: plain state.

``Execution`` is one running agent; ``TurnHandle`` its running turn (the
one answer to "is a turn running here": ``Execution.turn``); ``Agents`` the
registry of every session's execution, which the notifier, the checkpoints
and the cancel path read.  The tasks that change this state live in
``supervisor.session.execution`` (agents), ``supervisor.session.turns`` (prompts),
``supervisor.turn.turn_close`` (every turn's end) and ``supervisor.session.cancellation``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

import trio

from protocols.adapters import AgentAdapter
from protocols.events import (
    MessageChunk,
    PermissionRequested,
    PlanUpdated,
    ToolCallStarted,
    ToolCallUpdated,
)

from ..agent_status import AgentStatus
from ..config import Config
from ..executors import LaunchedAgent
from ..executors.link_hold import LinkHold
from ..models import AgentSessionRef, Message, StopReason
from ..profiles import AgentProfile
from ..storage.store import Store
from .cancel_op import CancelOperation
from .steps import StepWait, ToolCalls
from .transcript import Transcript, TurnText
from .turn_outcome import (
    NEVER_STARTED_STATUS,
    SHUTDOWN_STATUS,
    CancelOutcome,
    CancelPhase,
    CancelResult,
    StopRequest,
)

__all__ = [
    "NEVER_STARTED_STATUS",
    "PROGRESS_EVENTS",
    "SHUTDOWN_STATUS",
    "STDERR_TAIL",
    "Agents",
    "CancelOutcome",
    "CancelPhase",
    "CancelResult",
    "Execution",
    "ExecutionStatus",
    "StopRequest",
    "TurnHandle",
    "remember_conversation",
]

#: Agent events that show a turn is alive (the stall watchdog's progress);
#: metadata (usage, modes, notices, echoes) is not progress.
PROGRESS_EVENTS = (MessageChunk, ToolCallStarted, ToolCallUpdated, PlanUpdated,
                   PermissionRequested)

#: Lines of an agent's stderr kept for its start failure's message.
STDERR_TAIL = 8


class ExecutionStatus(StrEnum):
    STARTING = "STARTING"
    READY = "READY"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"


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
    #: How often its cancel was sent again (the agent dropped the first).
    cancel_resends: int = 0
    #: Child sessions that went ``cancelling`` or ``cancelled`` once this turn's
    #: cancel began: what an escalation of it counts as stopped with it.
    subagents_stopped: set[str] = field(default_factory=set)
    #: Whether this turn's close moved the session out of RUNNING (nothing left
    #: for a cancel to reconcile).
    settled_session: bool = False
    text: TurnText | None = None
    #: From the turn's claim until its prompt is written (the turn being
    #: opened in the store, its conversation restored, its checkpoint taken):
    #: a cancel or shutdown cancels it, and the prompt is never written.
    before_prompt: trio.CancelScope | None = None
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
    #: When a cancel began on this turn (its join window and escalation count
    #: from here), and when the protocol cancel was written to the agent.
    cancel_began_at: float | None = None
    cancel_sent_at: float | None = None
    #: DESIGN.md §20: the link its cancel was held on while down (phase
    #: ``link_down``; it says when the held cancel went out), else None.
    link_hold: LinkHold | None = None
    #: When a held cancel (link down, or across a restart) was finally sent.
    held_sent_at: float | None = None
    #: The cancel operation waiting for this turn's close.
    cancel: CancelOperation | None = None
    #: Checkpointed before its prompt and after its end (a session with a project).
    checkpointed: bool = False
    #: The late cancel's wait for the agent (phase ``late``): ``stop_now``
    #: cancels it, so the same operation escalates at once (DESIGN.md §15).
    late_wait: trio.CancelScope | None = None
    #: Its tool calls (running, finished, cut): the after-step wait and the receipt.
    tools: ToolCalls = field(default_factory=ToolCalls)
    #: A stop after the step waits for this step (phase ``after_step``), and
    #: is told here when the cancel is due (the step ended, a stop now, a permission).
    step_wait: StepWait | None = None
    step_over: trio.Event = field(default_factory=trio.Event)

    @property
    def prompt_withheld(self) -> bool:
        """A cancel came before the prompt was written: the agent never saw
        this turn, and its close says nothing the agent did not do."""
        return self.cancel_phase is CancelPhase.WITHHELD


@dataclass(eq=False)
class Execution:
    session_id: str
    profile: AgentProfile
    agent: LaunchedAgent
    nursery: trio.Nursery
    transcript: Transcript
    #: The session's (workspace, task): who may join a cancel it starts itself.
    owner: tuple[str, str] = ("", "")
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


class Agents:
    """Every session's execution in this backend, and what follows from it."""

    def __init__(self, config: Config, status: AgentStatus | None = None) -> None:
        #: What the session DTOs say of each agent (kept up to date by the executions).
        self.status = status or AgentStatus(config.profiles)
        self.executions: dict[str, Execution] = {}
        #: Sessions whose agent is being started (prompts wait for it).
        self.starting: dict[str, trio.Event] = {}
        #: Sessions whose running turn is being taken over (``take_over``).
        self.taking_over: dict[str, trio.Event] = {}

    def running(self, session_id: str) -> Execution | None:
        """The session's execution, unless there is none or it has stopped."""
        ex = self.executions.get(session_id)
        return None if ex is None or ex.status is ExecutionStatus.STOPPED else ex

    def running_adapter(self, session_id: str) -> AgentAdapter | None:
        """The adapter of the session's running agent (None: none runs)."""
        ex = self.running(session_id)
        return None if ex is None else ex.adapter

    def agent_live(self, session_id: str) -> bool:
        return self.status.agent_live(session_id)

    def turn_running(self, session_id: str) -> bool:
        """Whether a turn is running (or being opened, or taken over after a
        restart) in the session's agent."""
        if session_id in self.taking_over:
            return True
        ex = self.executions.get(session_id)
        return ex is not None and ex.turn is not None

    def running_turn_id(self, session_id: str) -> str | None:
        ex = self.executions.get(session_id)
        return ex.turn.id or None if ex is not None and ex.turn is not None else None

    def live_and_idle(self, session_id: str) -> bool:
        """The session's agent runs here and no turn is running or being opened
        in it: what memory says is the whole truth (no store to reconcile)."""
        ex = self.running(session_id)
        return session_id not in self.taking_over and ex is not None and ex.turn is None


async def remember_conversation(store: Store, ex: Execution) -> None:
    """Store the agent's own conversation id, so a later agent can restore it."""
    agent_session_id = ex.adapter.agent_session_id
    if agent_session_id is None:
        return
    await store.set_agent_session(ex.session_id, AgentSessionRef(
        agent_session_id=agent_session_id, profile=ex.profile.name, cwd=ex.cwd))
