"""The cancel path's rules for a remote agent whose link is down (DESIGN.md §20).

A mixin of ``Cancellations`` (supervisor/session/cancellation.py), kept apart
so each module stays small: the cancel held while the link is down (phase
``link_down``, no escalation, bounded by ``link_down_cancel_s``), its record
in the store so that a restart during the cut still has it, the same held
cancel taken up again by the next backend while it takes the turn over, and
the turn the host cancelled by itself (``offline_cancel_s``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from ..config import Timeouts
from ..errors import CancelFailed
from ..executors.link_hold import LinkDown
from ..models import Session
from ..notify import Notifier
from ..storage.db import StoreError
from ..storage.store import Store
from ..turn.cancel_op import CancelOperation
from ..turn.execution_state import Agents, Execution, TurnHandle
from ..turn.recovery import Handover
from ..turn.turn_outcome import CancelPhase, StopRequest, StopWhen
from .start_text import leaf

__all__ = ["LinkDownCancels", "take_over_attempts"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class LinkDownCancels:
    """What ``Cancellations`` does when the link to a remote agent is down."""

    timeouts: Timeouts
    store: Store
    notify: Notifier
    agents: Agents

    def admit(self, session_id: str, owner: tuple[str, str], received: float, *,
              request: StopRequest = StopRequest.USER, turn_id: str | None = None,
              when: StopWhen = StopWhen.NOW, by: str = "user") -> CancelOperation:
        raise NotImplementedError  # Cancellations'

    def _set_phase(self, turn: TurnHandle, phase: CancelPhase) -> None:
        raise NotImplementedError  # Cancellations'

    async def _link_down(self, ex: Execution, turn: TurnHandle, op: CancelOperation | None,
                         down: LinkDown | None) -> None:
        """The cancel met a remote agent's link that is down: held by the
        adapter (sent first when the link returns), pending with phase
        ``link_down``, recorded for a restart.  No escalation while it waits:
        the operation's own bound is lifted, ``link_down_cancel_s`` bounds the
        wait instead; past it the operation fails (pending clears) and the
        cancel stays held.  On the link's return the cancel is SENT, its
        bounds counting from then."""
        if down is not None:
            turn.link_hold = down.hold
        hold = turn.link_hold
        assert hold is not None
        entered = trio.current_time()
        self._set_phase(turn, CancelPhase.LINK_DOWN)
        if op is not None:
            await self._record_held(turn.id, op)
        bound = self.timeouts.link_down_cancel_s
        with self._lifted(op), trio.move_on_after(bound):
            while not turn.done.is_set() and (not hold.reachable or hold.owed_sent_at is None):
                if hold.reachable:
                    # Back, but the held cancel did not go out: now, as usual.
                    try:
                        await ex.adapter.cancel()
                        break
                    except LinkDown:
                        continue
                await _first(hold.until_changed, turn.done.wait)
        if turn.done.is_set():
            return
        if not hold.reachable:
            raise _unanswered(bound)
        # A cancel sent before the host went silent (not held) is sent again on its
        # return by the loop above; a held one went out first (its time, not older).
        now = trio.current_time()
        sent = hold.owed_sent_at
        turn.cancel_began_at = now
        turn.cancel_sent_at = turn.held_sent_at = sent if sent is not None and sent >= entered \
            else now
        self._set_phase(turn, CancelPhase.SENT)

    async def _record_held(self, turn_id: str, op: CancelOperation) -> None:
        """The held cancel in the store (when it was accepted), so a backend
        restarted during the cut sends it when it takes the turn over."""
        accepted = time.time() - (trio.current_time() - op.received)
        try:
            if not await self.store.hold_turn_cancel(turn_id, accepted):
                log.warning("turn %s: no stream position is recorded yet, so the held cancel "
                            "is not either; a restart during the cut would lose it", turn_id)
        except StoreError as exc:
            log.warning("turn %s: the held cancel is not recorded (%s); a restart during the "
                        "cut would lose it", turn_id, exc)

    def _lifted(self, op: CancelOperation | None) -> _Lifted:
        return _Lifted(op, self.timeouts.cancel_operation_s)

    def hold_restored(self, handover: Handover, session: Session | None) -> None:
        """After a restart: the previous backend held a cancel of the turn taken
        over (its host did not answer).  The same user's cancel is pending again
        at once, phase ``link_down``, until the takeover settles; then it is
        sent (``_held_wait``, ``stop``)."""
        if handover.cancel_held_at is None or session is None:
            return
        sid = handover.session_id
        received = trio.current_time() - max(0.0, time.time() - handover.cancel_held_at)
        # Unreachable while the takeover tries (its link, once up, says for itself).
        self.agents.status.reach(sid, lambda: sid not in self.agents.taking_over)
        op = self.admit(sid, (session.workspace_id, session.task_id), received,
                        turn_id=handover.turn_id)
        op.held = True
        if not op.done.is_set():
            self.notify.publish([self.notify.progress_note(sid, handover.turn_id, "link_down")])

    async def _held_wait(self, op: CancelOperation, settled: trio.Event) -> None:
        """A cancel waits for the turn's takeover: ``agentctl_takeover_s``, or
        for a held one ``link_down_cancel_s`` (the operation's bound lifted)."""
        if not op.held:
            with trio.move_on_after(self.timeouts.agentctl_takeover_s):
                await settled.wait()
            return
        bound = self.timeouts.link_down_cancel_s
        with self._lifted(op), trio.move_on_after(bound):
            await settled.wait()
        if not settled.is_set():
            raise _unanswered(bound)

    def stopped_offline(self, ex: Execution, turn_id: str) -> None:
        """The agent's host cancelled the turn itself, no backend connected for
        ``offline_cancel_s`` (DESIGN.md §20): an operation by ``offline``
        whose cancel is already sent; the turn's end (replayed next) settles it."""
        turn = ex.turn
        if turn is None or turn.id != turn_id or turn.done.is_set():
            return
        self.admit(ex.session_id, ex.owner, trio.current_time(), by="offline")
        if turn.cancel_phase is None:
            turn.cancel_sent_at = trio.current_time()
            self._set_phase(turn, CancelPhase.SENT)


class _Lifted:
    """The operation's bound lifted while it waits for a host (which has its
    own); on leaving, ``cancel_operation_s`` counts again from then."""

    def __init__(self, op: CancelOperation | None, again_s: float) -> None:
        self.scope = op.scope if op is not None else None
        self.again_s = again_s

    def __enter__(self) -> None:
        if self.scope is not None:
            self.scope.deadline = math.inf

    def __exit__(self, *exc: object) -> None:
        if self.scope is not None:
            self.scope.deadline = trio.current_time() + self.again_s


def _unanswered(bound: float) -> CancelFailed:
    return CancelFailed(f"the agent's host has not answered for {bound:g}s; the stop stays "
                        "held and is sent first when it answers (try again to wait on)")


async def take_over_attempts(start: Callable[[], Awaitable[_T]], handover: Handover,
                             timeouts: Timeouts) -> _T | None:
    """Start the execution that takes ``handover``'s turn over: one attempt
    bounded by ``agentctl_takeover_s``; with a held cancel, attempts until
    its host answers, for ``link_down_cancel_s`` at most (None: not taken over)."""
    sid, turn_id = handover.session_id, handover.turn_id
    held = handover.cancel_held_at is not None
    with trio.move_on_after(timeouts.link_down_cancel_s if held else math.inf):
        while True:
            with trio.move_on_after(timeouts.agentctl_takeover_s):
                try:
                    return await start()
                except Exception as exc:
                    log.warning("session %s: turn %s not taken over: %s", sid, turn_id,
                                leaf(exc))
            if not held:
                log.warning("session %s: turn %s not taken over within %gs", sid, turn_id,
                            timeouts.agentctl_takeover_s)
                return None
            await trio.sleep(1.0)  # its host does not answer: again, the cancel held
    return None


async def _first(*waits: Callable[[], Awaitable[object]]) -> None:
    """Return once any of ``waits`` returns."""
    async with trio.open_nursery() as nursery:
        async def wait(fn: Callable[[], Awaitable[object]]) -> None:
            await fn()
            nursery.cancel_scope.cancel()
        for fn in waits:
            nursery.start_soon(wait, fn)
