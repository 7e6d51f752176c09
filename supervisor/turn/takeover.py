"""A running turn taken over from the previous backend (DESIGN.md §10).

An agent that outlives the backend (``LaunchedAgent.handover``: an agentctl at
a configured URL) keeps its running turn across a restart.  The new backend's
execution adopts the turn before the agent's link runs (``adopt``: same turn
id, its transcript picked up where it was left, the events of the gap
replayed), then settles it once the conversation is re-attached (``settle``):
kept if the agent still runs it, otherwise interrupted as a restart
interrupts any turn.  ``supervisor.session.execution`` runs both, in the execution's
start, bounded by ``agentctl_takeover_s``.
"""

from __future__ import annotations

from ..config import Timeouts
from ..errors import AgentStartError
from ..storage.store import Store
from .execution_state import Execution, ExecutionStatus, TurnHandle, remember_conversation
from .recovery import Handover
from .restore import RESTORE_FAILED_META, RESTORE_FAILED_STATUS, reopen
from .turn_close import TurnCloser

__all__ = ["Takeover"]


class Takeover:
    def __init__(self, timeouts: Timeouts, store: Store, closer: TurnCloser) -> None:
        self.timeouts = timeouts
        self.store = store
        self.closer = closer

    async def adopt(self, ex: Execution, handover: Handover) -> TurnHandle:
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

    async def settle(self, ex: Execution, turn: TurnHandle) -> None:
        """Re-attach the conversation (agentctl hands its owner's session back),
        then keep the adopted turn if the agent still runs it (or its end came
        with the replay); otherwise interrupt it as the restart did.  The turn
        may have ended already: its end replayed and pumped before this runs."""
        handover = ex.agent.handover
        assert handover is not None  # adopt refused an agent without one
        ref, ex.restore_from = ex.restore_from, None
        if ref is not None:
            reopened = await reopen(ex.adapter, ref, profile=ex.profile.name, cwd=ex.cwd,
                                    restore_s=self.timeouts.restore_s)
            reattached = reopened.reattached
        else:
            await ex.adapter.new_session(ex.cwd)
            reattached = False
        await remember_conversation(self.store, ex)
        if not reattached:
            await self.store.add_message(ex.session_id, None, "system", "status",
                                         RESTORE_FAILED_STATUS, dict(RESTORE_FAILED_META))
        adopted = await handover.settle_adoption()
        turn.adopting = False
        if not adopted and ex.turn is turn:
            ex.turn = None
            ex.status = ExecutionStatus.READY
            await self.closer.interrupt_restarted(ex.session_id, turn.id, turn.text, ex)
            turn.done.set()
