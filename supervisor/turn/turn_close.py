"""Every turn's end, in one place: the store, the settle, the publication.

Turn ends are idempotent: ``close_turn`` closes the turn in the store
conditionally, so the pump, an escalation, a crash, a withheld prompt and a
cancel's reconciliation can all try and exactly one wins.  The closer owns
what the end does, in this order: ``decide`` (supervisor.turn.turn_outcome) says
what the end is, one store transaction writes it (publishing nothing), the
cancel operation waiting for the turn is settled by a call down
(``Settler``), the queue gate is told, and then the close is published once:
its notifications and the settled cancel's answers in one batch.
``finish_turn`` is the pump's (and an escalation's) close, with the in-memory
half: the execution's turn released and ``TurnHandle.done`` set.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

import trio

from protocols.events import TurnEnded
from protocols.scopes import shielded_for

from ..bus import Note
from ..config import Timeouts
from ..models import Message, SessionState, TextAppend
from ..notify import Notifier
from ..storage.db import StoreError
from ..storage.retries import Retries
from ..storage.store import ClosedTurn, Store
from ..workspace.turn_checkpoints import TurnCheckpoints
from .cancel_op import Settled, Settler
from .execution_state import Execution, ExecutionStatus, TurnHandle
from .queue_gate import QueueGate
from .receipts import Receipts
from .recovery import RESTART_META, RESTART_STATUS
from .transcript import Transcript, TurnText
from .turn_outcome import TurnFacts, decide, result_of, settles_on_close

__all__ = ["TurnCloser"]

log = logging.getLogger(__name__)


class TurnCloser:
    def __init__(self, timeouts: Timeouts, store: Store, notifier: Notifier, gate: QueueGate,
                 settler: Settler, retries: Retries,
                 checkpoints: TurnCheckpoints | None, receipts: Receipts) -> None:
        self.receipts = receipts
        self.timeouts = timeouts
        self.store = store
        self.notify = notifier
        self.gate = gate
        self.settler = settler
        self.retries = retries
        self.checkpoints = checkpoints
        #: How long a close may take: its store writes wait up to ``store_wait_s``
        #: for the database (on a worker thread, not cancellable), then cleanup.
        self.close_s = timeouts.store_wait_s + timeouts.cancel_cleanup_s

    async def close_turn(self, session_id: str, turn_id: str, facts: TurnFacts,
                         ended: TurnEnded, *,
                         text: Sequence[tuple[Message, TextAppend | None]] = ()) -> bool:
        """Close the turn in the store as ``decide`` says (its status message and
        ``text``, its last streamed text, in the same transaction), and publish
        its end; idempotent (only the first close of a running turn does
        anything).  Returns whether this close moved the session out of RUNNING."""
        settled, notes, _closed = await self._close(session_id, turn_id, facts, ended, text)
        self.notify.publish(notes)
        return settled

    async def _close(self, session_id: str, turn_id: str, facts: TurnFacts, ended: TurnEnded,
                     text: Sequence[tuple[Message, TextAppend | None]]
                     ) -> tuple[bool, list[Note], ClosedTurn | None]:
        """The store's half of a close, what it publishes (not yet), and what it did."""
        outcome = decide(facts, ended)
        closed = await self.store.close_turn(
            turn_id, state=outcome.state, stop_reason=outcome.stop_reason,
            status=outcome.status, park_queue=outcome.park, text=text)
        # In the store's step (no checkpoint since its commit).
        notes = self.notify.close_notes(
            session_id, turn_id, text,
            closed=None if closed is None else (closed.status, closed.session, closed.queue),
            stop_reason=outcome.stop_reason, acknowledged=outcome.acknowledged)
        if closed is None:
            return False, notes, None
        self.gate.turn_closed(session_id, outcome.park, facts.request, outcome.stop_reason)
        return (closed.session is not None and closed.session.state is not SessionState.RUNNING,
                notes, closed)

    async def finish_turn(self, ex: Execution, turn: TurnHandle, ended: TurnEnded) -> None:
        """Close the turn exactly once: store, settle, one publication, waiters woken."""
        text: list[tuple[Message, TextAppend | None]] = []
        notes: list[Note] = []
        facts = TurnFacts(request=turn.stop_request, phase=turn.cancel_phase,
                          never_started=turn.never_started,
                          prompt_withheld=turn.prompt_withheld)
        refused: str | None = None
        closed: ClosedTurn | None = None
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
                    turn.settled_session, notes, closed = await self._close(
                        turn.session_id, turn.id, facts, ended, text)
                    if self.settler.trace is not None and turn.cancel is not None:
                        self.settler.trace.mark(turn.cancel, "committed")
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
                    functools.partial(self.close_turn, turn.session_id, turn.id, facts, ended,
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
            turn.step_over.set()  # a stop after the step has no step left to wait for
            settled = self._settle(turn, ex, closed)
            # The close's one publication: its notifications, then pending=false
            # and the settled cancel's answers.
            self.notify.publish(notes + settled.notes, settled.replies)
            if self.settler.trace is not None and settled.op is not None:
                self.settler.trace.published(settled.op)
            if self.checkpoints is not None and turn.checkpointed and turn.id:
                # After the close and its settle, in the checkpoints' own nursery.
                # With the agent's own id of the turn (Codex), for a rewind later.
                self.checkpoints.turn_ended(turn.session_id, turn.id,
                                            ex.adapter.agent_turn_id)

    def _settle(self, turn: TurnHandle, ex: Execution, closed: ClosedTurn | None) -> Settled:
        """The cancel waiting for this turn, settled by its close when the cancel
        was written and the close moved the session out of RUNNING (a close
        before the write is the operation task's to report)."""
        op, turn.cancel = turn.cancel, None
        if op is None or op.done.is_set() or not settles_on_close(turn.cancel_phase,
                                                                  turn.settled_session):
            return Settled([], [])
        assert turn.cancel_phase is not None
        op.record(result_of(turn.cancel_phase, turn.id, turn.cancel_sent_at,
                            turn.answered_at))
        self.receipts.settling(
            op, turn, ex, None if closed is None else closed.status,
            0 if closed is None or closed.queue is None else len(closed.queue.entries))
        return self.settler.settle(op, by_close=True)

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
        self.notify.publish(self.notify.close_notes(
            session_id, turn_id, (),
            closed=None if closed is None else (closed.status, closed.session, closed.queue),
            stop_reason="cancelled", acknowledged=False))
