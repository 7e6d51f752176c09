"""Every turn's end, in one place: the store, the notifications, the waiters.

Turn ends are idempotent: ``close_turn`` closes the turn in the store
conditionally, so the pump, an escalation, a crash, a withheld prompt and a
cancel's reconciliation can all try and exactly one wins.  ``finish_turn``
is the in-memory half: the execution's turn released, ``TurnHandle.done``
set, and the cancel operation waiting for the turn told in the same step.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

import trio

from protocols.events import TurnEnded
from protocols.scopes import shielded_for

from .config import Timeouts
from .db import StoreError
from .execution_state import Execution, ExecutionStatus, TurnHandle
from .models import Message, SessionState, TextAppend
from .notify import Notifier
from .queue_gate import QueueGate
from .recovery import RESTART_META, RESTART_STATUS
from .retries import Retries
from .store import Store
from .transcript import Transcript, TurnText
from .turn_checkpoints import TurnCheckpoints
from .turn_outcome import TurnFacts, decide

__all__ = ["TurnCloser"]

log = logging.getLogger(__name__)


class TurnCloser:
    def __init__(self, timeouts: Timeouts, store: Store, notifier: Notifier, gate: QueueGate,
                 retries: Retries, checkpoints: TurnCheckpoints | None) -> None:
        self.timeouts = timeouts
        self.store = store
        self.notify = notifier
        self.gate = gate
        self.retries = retries
        self.checkpoints = checkpoints
        #: How long a close may take: its store writes wait up to ``store_wait_s``
        #: for the database (on a worker thread, not cancellable), then cleanup.
        self.close_s = timeouts.store_wait_s + timeouts.cancel_cleanup_s

    async def close_turn(self, session_id: str, turn_id: str, facts: TurnFacts,
                         ended: TurnEnded, *,
                         text: Sequence[tuple[Message, TextAppend | None]] = ()) -> bool:
        """Close the turn in the store as ``decide`` says (its status message and
        ``text``, its last streamed text, in the same transaction), and announce
        its end; idempotent (only the first close of a running turn does
        anything).  Returns whether this close moved the session out of RUNNING."""
        outcome = decide(facts, ended)
        closed = await self.store.close_turn(
            turn_id, state=outcome.state, stop_reason=outcome.stop_reason,
            status=outcome.status, park_queue=outcome.park, text=text)
        # In the store's step (no checkpoint): the one publication of the close.
        self.notify.turn_closed(
            session_id, turn_id, text,
            closed=None if closed is None else (closed.status, closed.session, closed.queue),
            stop_reason=outcome.stop_reason, acknowledged=outcome.acknowledged)
        if closed is None:
            return False
        self.gate.turn_closed(session_id, outcome.park, facts.request, outcome.stop_reason)
        return closed.session is not None and closed.session.state is not SessionState.RUNNING

    async def finish_turn(self, ex: Execution, turn: TurnHandle, ended: TurnEnded) -> None:
        """Close the turn exactly once: store, then notifications, then wake waiters."""
        text: list[tuple[Message, TextAppend | None]] = []
        facts = TurnFacts(request=turn.stop_request, phase=turn.cancel_phase,
                          never_started=turn.never_started,
                          prompt_withheld=turn.prompt_withheld)
        close = functools.partial(self.close_turn, turn.session_id, turn.id, facts, ended)
        refused: str | None = None
        try:
            try:
                with shielded_for(self.close_s) as bound:
                    if turn.text is not None:
                        # Text that only extends messages already written goes in
                        # the close's own transaction (one commit, not two); a new
                        # message, or a write under way, is flushed first.
                        taken = Transcript.take_updates(turn.text)
                        if taken is None:
                            await ex.transcript.flush(turn.text)
                        else:
                            text = taken
                    turn.settled_session = await close(text=text)
                if bound.cancelled_caught:
                    refused = "it did not answer in time"
            except StoreError as exc:
                refused = str(exc)
            if refused is not None:
                # Not left RUNNING until someone cancels: closed as soon as the store
                # answers, its last text with it (whole: its appends were never announced).
                log.warning("session %s: the store refused to close turn %s (%s); retrying "
                            "in the background", turn.session_id, turn.id, refused)
                self.retries.retry(
                    ("close", turn.id),
                    functools.partial(close, text=[(msg, None) for msg, _ in text]),
                    f"session {turn.session_id}: turn {turn.id}'s close")
        finally:
            turn.stop_reason = ended.stop_reason
            if ex.turn is turn:
                ex.turn = None
            if ex.status is ExecutionStatus.RUNNING:
                ex.status = ExecutionStatus.READY
            ex.idle_since = trio.current_time()
            turn.done.set()
            waiter, turn.cancel = turn.cancel, None
            if waiter is not None:
                # In this step, with the close's notifications still queued: one
                # write for all of them, and no task woken to answer.
                waiter.turn_closed(turn)
            if self.checkpoints is not None and turn.checkpointed and turn.id:
                # After the close and its settle, in the checkpoints' own nursery.
                # With the agent's own id of the turn (Codex), for a rewind later.
                self.checkpoints.turn_ended(turn.session_id, turn.id,
                                            ex.adapter.agent_turn_id)

    async def interrupt_restarted(self, session_id: str, turn_id: str,
                                  text: TurnText | None, ex: Execution | None = None) -> None:
        """A turn that could not be taken over ends as recovery ends any turn a
        restart cut: interrupted, ``RESTART_STATUS``, the session's queue parked."""
        with shielded_for(self.close_s):
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
        self.notify.turn_closed(
            session_id, turn_id, (),
            closed=None if closed is None else (closed.status, closed.session, closed.queue),
            stop_reason="cancelled", acknowledged=False)
