"""The stall watchdog (DESIGN.md §9): one task per turn, in its execution's nursery.

A silent turn gets a "no output" notice (resolved by its next progress
event); a turn without any agent event after ``never_started_s`` ends as an
error and its agent is replaced.  Quiet during a cancel (it has its own
bounds) and while a permission waits for the user.
"""

from __future__ import annotations

import logging

import trio

from protocols.events import TurnEnded

from ..config import Timeouts
from ..models import Message
from ..notify import Notifier
from ..storage.store import Store
from .execution_state import NEVER_STARTED_STATUS, Execution, TurnHandle
from .turn_close import TurnCloser

__all__ = ["Watchdog"]

log = logging.getLogger(__name__)


class Watchdog:
    def __init__(self, timeouts: Timeouts, store: Store, notifier: Notifier,
                 closer: TurnCloser) -> None:
        self.timeouts = timeouts
        self.store = store
        self.notify = notifier
        self.closer = closer

    async def progress(self, turn: TurnHandle) -> None:
        """A real agent event: the turn is alive; an open stall notice is resolved."""
        turn.last_event_at = trio.current_time()
        turn.events += 1
        notice, turn.stall_notice = turn.stall_notice, None
        if notice is not None:
            await self.store.update_message(Message(
                id=notice.id, session_id=notice.session_id, turn_id=notice.turn_id,
                role=notice.role, kind=notice.kind, content=notice.content,
                metadata={**notice.metadata, "resolved": True}, created_at=notice.created_at))

    async def watch(self, ex: Execution, turn: TurnHandle) -> None:
        """Until the turn is done; every wait bounded by the next thing to check."""
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
        await self.closer.finish_turn(ex, turn, TurnEnded(stop_reason="error", turn_id=turn.id,
                                                          error=NEVER_STARTED_STATUS))
        # Replaced: this agent is stopped; the next prompt starts a fresh one.
        ex.nursery.cancel_scope.cancel()
