"""The lifecycle: agent executions and their turns, as one object for its callers.

Its parts, each a module of its own, constructed here from what
``open_supervisor`` passes in (nothing is patched on afterwards)::

    execution_state   Execution, TurnHandle, the Agents registry (plain state)
    execution         Executions: start, pump, idle stop, takeover, shutdown
    turns             Turns: a prompt's turn up to its write, steering
    takeover          a running turn adopted from the previous backend
    watchdog          the stall watchdog, one task per turn
    turn_close        TurnCloser: every turn's end (turn_outcome.decide: what it is)
    cancellation      Cancellations: the cancel path (given, shared with the queue)

A session's state changes in a turn's own open and close transactions (the
store's), at startup recovery, and otherwise only through ``states`` (starting,
started, start failed, unstuck), each from the states it names;
``Execution.turn`` is the one answer to "is a turn running here".
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from ..config import Config
from ..executors import Launcher
from ..models import Message, Session
from ..notify import Notifier
from ..storage.retries import Retries
from ..storage.store import Store
from ..subagents import Subagents
from ..turn.execution_state import (
    NEVER_STARTED_STATUS,
    SHUTDOWN_STATUS,
    Agents,
    CancelOutcome,
    CancelPhase,
    CancelResult,
    Execution,
    ExecutionStatus,
    StopRequest,
    TurnHandle,
)
from ..turn.recovery import Handover
from ..turn.takeover import Takeover
from ..turn.text_writer import TextWriter
from ..turn.turn_close import TurnCloser
from ..turn.watchdog import Watchdog
from ..workspace.attachments import NO_REFS, PromptRefs
from ..workspace.turn_checkpoints import TurnCheckpoints
from .cancellation import Cancellations
from .execution import Executions
from .offers import Offers
from .turns import Turns

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
    "TurnHandle",
]


class LifecycleManager:
    def __init__(self, config: Config, store: Store, notifier: Notifier, agents: Agents,
                 closer: TurnCloser, cancellations: Cancellations, retries: Retries,
                 launcher: Launcher, checkpoints: TurnCheckpoints | None,
                 subagents: Subagents) -> None:
        t = config.timeouts
        self.agents = agents
        self.executions = agents.executions
        self.retries = retries
        self.checkpoints = checkpoints
        self.cancellations = cancellations
        #: Writes the streamed text of every session's turn together.
        self.texts = TextWriter(store, t.stream_flush_s)
        watchdog = Watchdog(t, store, notifier, closer)
        #: DESIGN.md §19: the agent's options, commands, usage and title; the person's choices.
        self.offers = Offers(t, store, notifier)
        self.execution = Executions(config, store, notifier, agents, closer, cancellations,
                                    watchdog, Takeover(t, store, closer), self.texts, launcher,
                                    subagents, self.offers)
        self.turns = Turns(t, store, agents, self.execution, closer, watchdog, checkpoints,
                           self.offers)
        self.closer = closer

    # -- the nursery and the agents ---------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The executions nursery (``Executions.run``)."""
        await self.execution.run(task_status=task_status)

    def agent_live(self, session_id: str) -> bool:
        return self.agents.agent_live(session_id)

    def reachable(self, session_id: str) -> bool:
        """False while the session's remote agent's host does not answer (§20)."""
        return self.agents.status.reachable(session_id)

    def turn_running(self, session_id: str) -> bool:
        return self.agents.turn_running(session_id)

    def running_turn_id(self, session_id: str) -> str | None:
        return self.agents.running_turn_id(session_id)

    def live_and_idle(self, session_id: str) -> bool:
        return self.agents.live_and_idle(session_id)

    async def ensure_execution(self, session: Session) -> Execution:
        return await self.execution.ensure_execution(session)

    async def stop_execution(self, session_id: str) -> None:
        await self.execution.stop_execution(session_id)

    def start_take_over(self, handover: Handover) -> None:
        self.execution.start_take_over(handover)

    async def take_over(self, handover: Handover) -> None:
        await self.execution.take_over(handover)

    async def shutdown(self) -> None:
        await self.execution.shutdown()

    # -- turns ------------------------------------------------------------------------

    async def send_prompt(self, session: Session, text: str, *,
                          guard: Callable[[], bool] | None = None,
                          resume_queue: bool = False,
                          client_message_id: str | None = None,
                          refs: PromptRefs = NO_REFS) -> Message:
        return await self.turns.send_prompt(session, text, guard=guard,
                                            resume_queue=resume_queue,
                                            client_message_id=client_message_id, refs=refs)

    async def check_parts(self, session_id: str, refs: PromptRefs) -> None:
        await self.turns.check_parts(session_id, refs)

    async def steer(self, session_id: str, text: str,
                    client_message_id: str | None = None,
                    refs: PromptRefs = NO_REFS) -> Message:
        return await self.turns.steer(session_id, text, client_message_id, refs)

    async def respond_permission(self, session_id: str, request_id: str,
                                 option_id: str | None) -> None:
        await self.turns.respond_permission(session_id, request_id, option_id)
