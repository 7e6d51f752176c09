"""The cancel path, one way (DESIGN.md §2, §9).

A session has at most one cancel operation at a time (``Cancellations.operations``).
``begin`` is synchronous: it registers the operation, writes the cancel to the
agent (the protocol cancel if the pipe takes it at once; the prompt withheld
if it is not written yet), raises the session's pending flag and starts the
operation's task in the operations nursery.  Whatever fails in it, the
operation is either run by that task or settled before ``begin`` returns:
none is left registered with nobody to settle it.  ``_operate`` (the task)
runs the rest under ``cancel_operation_s``: the join window, the re-sends,
escalation and the reconciliation of the store, then settles.

Theory of operation: a turn's cancel moves through ``PHASES``
(supervisor.turn.turn_outcome, with every rule of a turn's end), one row per
phase.  A row says whether the phase is published (``session.cancel.progress``),
how a turn that ends in it is reported, what bounds the wait in it (a
``Timeouts`` field, counted from when the cancel began) and which phase comes
when that wait runs out.  Everything that decides an outcome reads this table
(``_result``), from the operation's task and from the turn's close alike.

Exactly one writer sends the cancel to the agent (``_write``/``_write_now``),
and exactly one function settles an operation (``Settler.settle``, in
supervisor/turn/cancel_op.py, below this module and the closer: pending released,
the queue told, every joined request's answer handed back to publish).  The
turn's close settles the operation waiting for it in the close's own step, by
a call down, and publishes the answers with the close; so a prompt answer
needs no task woken to settle it.  This task settles what the close did not
(no turn, a failure, a timeout).  Authorization and which requests may join
stay with the orchestrator.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging

import trio

from protocols.adapters import AgentClosed, AgentTimeout
from protocols.events import TurnEnded

from ..bus import Note
from ..config import Timeouts
from ..errors import CancelFailed, NotFound, SupervisorError
from ..executors.agentctl_turn import FrameAnswer
from ..executors.link_hold import LinkDown, LinkHold
from ..models import SessionState
from ..notify import Notifier
from ..storage.db import StoreError
from ..storage.retries import Retries
from ..storage.store import Store
from ..subagents import Subagents
from ..turn.cancel_op import CancelOperation, Settler
from ..turn.execution_state import Agents, Execution, TurnHandle
from ..turn.queue_gate import QueueGate
from ..turn.steps import StepWait
from ..turn.subagent_traces import write_ended
from ..turn.turn_close import TurnCloser
from ..turn.turn_outcome import (
    PHASES,
    CancelOutcome,
    CancelPhase,
    CancelResult,
    StopRequest,
    StopWhen,
    TurnFacts,
    result_of,
)
from . import states
from .cancellation_link import LinkDownCancels

__all__ = ["CancelOperation", "Cancellations"]

log = logging.getLogger(__name__)


class Cancellations(LinkDownCancels):
    def __init__(self, timeouts: Timeouts, store: Store, notifier: Notifier, agents: Agents,
                 closer: TurnCloser, gate: QueueGate, settler: Settler, retries: Retries,
                 subagents: Subagents) -> None:
        self.timeouts = timeouts
        self.store = store
        self.notify = notifier
        self.projection = notifier.projection
        self.agents = agents
        self.closer = closer
        self.gate = gate
        self.retries = retries
        self.subagents = subagents
        self.settler = settler
        #: The operation in flight per session (the settler's).
        self.operations = settler.operations
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The operations nursery: accepted cancels live here, not in requests,
        so a client that disconnects does not abort one.  Each operation's task
        contains its own failures (``_operate``)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    # -- admission: synchronous, no checkpoint ----------------------------------------

    def admit(self, session_id: str, owner: tuple[str, str], received: float, *,
              request: StopRequest = StopRequest.USER, turn_id: str | None = None,
              when: StopWhen = StopWhen.NOW, by: str = "user") -> CancelOperation:
        """The session's operation in flight (joined), or a new one begun.  A
        stop now joining a stop after the step makes it a cancel now."""
        op = self.operations.get(session_id)
        if op is not None:
            op.joined += 1
            if when is StopWhen.NOW and op.when is StopWhen.AFTER_STEP:
                op.when = StopWhen.NOW
                ex = self.agents.running(session_id)
                if ex is not None and ex.turn is not None:
                    self.step_due(ex, ex.turn)
            return op
        return self.begin(session_id, owner, received, request=request, turn_id=turn_id,
                          when=when, by=by)

    def begin(self, session_id: str, owner: tuple[str, str], received: float, *,
              request: StopRequest = StopRequest.USER, turn_id: str | None = None,
              when: StopWhen = StopWhen.NOW, by: str = "user") -> CancelOperation:
        """Register the operation, write the cancel to the agent (or, after the
        step, wait for it), raise pending, start the operation's task.  Returns
        it running, or settled (failed)."""
        assert session_id not in self.operations, "one operation per session"
        op = CancelOperation(session_id=session_id, workspace_id=owner[0], task_id=owner[1],
                             request=request, turn_id=turn_id, when=when, by=by,
                             received=received)
        self.settler.begun(op, received)
        try:
            # The agent first: its cancel is on its stdin before pending=true is
            # written to anyone (a fan-out to 1,000 subscribers does not delay it).
            written = self._cancel_at_once(op)
            moved = self.projection.begin(session_id)
            op.pending = True
            notes = [] if moved is None else self.notify.cancellation_notes(session_id, moved)
            if written is not None:
                notes += self._progress(written)
            self.notify.publish(notes)
            assert self._nursery is not None, "Cancellations.run is not running"
            self._nursery.start_soon(self._operate, op)
        except Exception as exc:
            log.exception("the cancel of session %s could not begin", session_id)
            op.fail(CancelFailed(f"the cancel could not begin: {exc}"))
            self._settle(op)
        return op

    def user_joins(self, op: CancelOperation) -> None:
        """A user cancel joined the operation: whatever it was (a send now's),
        it now ends the turn as the user's cancel, and the queue parks."""
        self.gate.user_cancelled(op.session_id)
        if op.request is not StopRequest.USER:
            op.request = StopRequest.USER
            op.by = "user"
            ex = self.agents.executions.get(op.session_id)
            if ex is not None and ex.turn is not None:
                ex.turn.stop_request = StopRequest.USER

    def stop_for_user(self, session_id: str, owner: tuple[str, str]) -> CancelOperation:
        """A user cancel asked for from inside (the user answered "Deny and
        stop"): the same single-flight operation as a request's."""
        op = self.admit(session_id, owner, trio.current_time(), by="permission")
        self.user_joins(op)
        return op

    def _cancel_at_once(self, op: CancelOperation) -> TurnHandle | None:
        """The cancel written in the admission's own step when nothing has to
        come before it: a running turn (the one aimed at) not cancelled yet, no
        takeover under way, a pipe that takes it whole.  Returns the turn it
        was written for (its phase not yet published), or None: ``_operate``
        does it all."""
        if op.session_id in self.agents.taking_over:
            return None
        ex = self.agents.running(op.session_id)
        turn = ex.turn if ex is not None else None
        if (ex is None or turn is None or (op.turn_id is not None and turn.id != op.turn_id)
                or turn.cancel_phase is not None or turn.done.is_set()):
            return None
        self._claim(turn, op.request, op)
        if op.when is StopWhen.AFTER_STEP and self._await_step(turn):
            return turn
        return turn if self._write_now(ex, turn) else None

    # -- the operation's task ---------------------------------------------------------

    async def _operate(self, op: CancelOperation) -> None:
        bound = self.timeouts.cancel_operation_s + (
            self.timeouts.after_step_timeout_s if op.when is StopWhen.AFTER_STEP else 0.0)
        try:
            with trio.move_on_after(bound) as scope:
                op.scope = scope
                if op.done.is_set():
                    # Written at admission, and the turn's close settled it
                    # before this task ran: nothing is left to do.
                    return
                result = await self._cancel(op)
                if not op.done.is_set():
                    op.record(result)
            if scope.cancelled_caught:
                op.fail(CancelFailed(
                    f"the cancel did not complete within {bound:g}s;"
                    " the turn may still be running, try again"))
        except SupervisorError as exc:
            op.fail(exc)
        except AgentTimeout as exc:
            op.fail(CancelFailed(f"the agent did not take the cancel: {exc}"))
        except Exception as exc:
            log.exception("cancel of session %s failed", op.session_id)
            op.fail(CancelFailed(f"the cancel failed: {exc}"))
        finally:
            self._settle(op)

    async def _cancel(self, op: CancelOperation) -> CancelResult:
        """Stop the session's running turn and settle the session.

        With an agent running a turn: its cancel through ``PHASES``.  In every
        case the session is then reconciled: a turn the store still shows
        running with no agent behind it is closed as cancelled by the user, and
        a RUNNING session with no turn is unstuck.  Raises ``AgentTimeout`` if
        the cancel could not even be written, ``CancelFailed`` if the session
        is still running afterwards (it may be retried)."""
        sid = op.session_id
        taking_over = self.agents.taking_over.get(sid)
        if taking_over is not None:
            # The turn is being taken over after a restart: cancel it once that
            # is settled (bounded), through its agent, not the store alone.
            await self._held_wait(op, taking_over)
        ex = self.agents.running(sid)
        if ex is None:
            return await self._reconcile(sid, CancelResult(CancelOutcome.NO_EXECUTION),
                                         op.request)
        turn = ex.turn
        if turn is None or (op.turn_id is not None and turn.id != op.turn_id):
            # (A send now aims at one turn: a successor is not its to stop.)
            return await self._reconcile(sid, CancelResult(CancelOutcome.IDLE, op.turn_id),
                                         op.request)
        result = await self.stop(ex, turn, op.request, op)
        if turn.settled_session or ex.detached:
            # This very turn's close moved the session out of RUNNING, or shutdown
            # left the turn to agentctl for the next backend: nothing to reconcile.
            return result
        return await self._reconcile(sid, result, op.request)

    async def stop(self, ex: Execution, turn: TurnHandle, request: StopRequest,
                   op: CancelOperation | None = None) -> CancelResult:
        """The turn's cancel, phase by phase (``PHASES``), until it ends or is
        escalated.  Shutdown uses it too (``request`` SHUTDOWN, no operation)."""
        self._claim(turn, request, op)
        if (turn.cancel_phase is None and op is not None and op.when is StopWhen.AFTER_STEP
                and self._await_step(turn)):
            self._publish(turn)
        if turn.cancel_phase is CancelPhase.AFTER_STEP:
            await self._after_step(ex, turn)
        if turn.cancel_phase is CancelPhase.LINK_DOWN:
            await self._link_down(ex, turn, op, None)
        elif turn.cancel_phase is None:
            try:
                await self._write(ex, turn)
                if op is not None and op.held:
                    turn.held_sent_at = turn.cancel_sent_at  # held across a restart
            except LinkDown as down:
                await self._link_down(ex, turn, op, down)
            except AgentClosed:
                # The agent is going away; its turn ends with the pump.
                with trio.move_on_after(self.timeouts.cancel_cleanup_s):
                    await turn.done.wait()
                return CancelResult(CancelOutcome.NO_EXECUTION, turn.id)
        assert turn.cancel_began_at is not None and turn.cancel_phase is not None
        while not turn.done.is_set():
            row = PHASES[turn.cancel_phase]
            if row.until is None or row.then is None:
                break
            refused: str | None = None
            with trio.move_on_at(turn.cancel_began_at
                                 + getattr(self.timeouts, row.until)) as wait:
                if turn.cancel_phase is CancelPhase.LATE:
                    turn.late_wait = wait
                try:
                    refused = await self._ended_or_refused(ex, turn, op)
                finally:
                    turn.late_wait = None
            if turn.done.is_set():
                break
            if refused is not None:
                # The agent's host could not write it (agentctl's CancelFailed):
                # failed as a cancel whose write failed fails, the turn left as
                # if it had not been written (a retry writes it again).
                turn.cancel_phase = None
                turn.cancel_sent_at = None
                raise CancelFailed(f"the agent did not take the cancel: {refused}")
            hold: LinkHold | None = getattr(ex.adapter, "link_hold", None)
            if row.then is CancelPhase.ESCALATED and hold is not None and not hold.reachable:
                # DESIGN.md §20: its host went silent after the cancel went out: it is
                # waited for (and the cancel sent again), never escalated unreached.
                turn.link_hold = hold
                await self._link_down(ex, turn, op, None)
            elif row.then is CancelPhase.ESCALATED:
                await self._escalate(ex, turn)
            else:
                log.warning("session %s: agent did not acknowledge cancel within %.1fs",
                            ex.session_id, self.timeouts.cancel_join_s)
                self._set_phase(turn, row.then)
        return self._result(turn)

    async def _ended_or_refused(self, ex: Execution, turn: TurnHandle,
                                op: CancelOperation | None) -> str | None:
        """Wait for the turn's end (re-sending the cancel while it is SENT) or,
        when the operation's cancel went as a frame to a remote agent's host
        (agentctl's ``Cancel``), for the host's answer that it could not write
        it: then its words.  The answer is data the adapter records per frame
        (``cancel_frame``, an agentctl_turn.FrameAnswer), read here: no callback."""
        # (``ex.agent.adapter``: an attribute read, not ``Execution.adapter``'s
        # call, so a local agent's wait costs its path no call.)  Only once the
        # cancel went to the agent (SENT, LATE): a withheld prompt's turn sent
        # nothing, and the adapter's frame is then its previous turn's.
        frame: FrameAnswer | None = (
            getattr(ex.agent.adapter, "cancel_frame", None)
            if op is not None and turn.cancel_phase in (CancelPhase.SENT, CancelPhase.LATE)
            else None)
        if frame is None:
            if turn.cancel_phase is CancelPhase.SENT:
                await self._persist(ex, turn)
            await turn.done.wait()
            return None
        async with trio.open_nursery() as nursery:
            async def ended() -> None:
                if turn.cancel_phase is CancelPhase.SENT:
                    await self._persist(ex, turn)
                await turn.done.wait()
                nursery.cancel_scope.cancel()
            nursery.start_soon(ended)
            await frame.came.wait()
            if frame.error is not None:
                nursery.cancel_scope.cancel()
        return frame.error if not turn.done.is_set() else None

    # -- stop after the step (DESIGN.md §18) -------------------------------------------

    @staticmethod
    def _await_step(turn: TurnHandle) -> bool:
        """Enter the wait for the running step (phase set, not published).
        False: no tool call runs, the stop is a cancel now."""
        wait = StepWait.of(turn.tools)
        if wait is None:
            return False
        turn.step_wait = wait
        turn.cancel_phase = CancelPhase.AFTER_STEP
        turn.step_over = trio.Event()
        return True

    async def _after_step(self, ex: Execution, turn: TurnHandle) -> None:
        """Wait (bounded from acceptance) until the cancel is due; past the
        bound it is a cancel now."""
        assert turn.cancel_began_at is not None
        row = PHASES[CancelPhase.AFTER_STEP]
        assert row.until is not None
        with trio.move_on_at(turn.cancel_began_at + getattr(self.timeouts, row.until)):
            await turn.step_over.wait()
        if turn.cancel_phase is CancelPhase.AFTER_STEP and not turn.done.is_set():
            log.info("session %s: the step outlasted %gs; cancelling now", ex.session_id,
                     getattr(self.timeouts, row.until))
            self._step_ended(turn)

    def step_due(self, ex: Execution, turn: TurnHandle) -> None:
        """The step a stop waited for is over (its tool calls finished, a
        permission came, or a stop now joined): the cancel, in the caller's
        step when the pipe takes it at once (else the operation's task writes it)."""
        if turn.cancel_phase is not CancelPhase.AFTER_STEP or turn.done.is_set():
            return
        if self.settler.trace is not None and turn.cancel is not None:
            self.settler.trace.mark(turn.cancel, "step_over")
        self._step_ended(turn)
        if self._write_now(ex, turn):
            self._publish(turn)
        turn.step_over.set()

    @staticmethod
    def _step_ended(turn: TurnHandle) -> None:
        """Out of the wait: the cancel's own bounds count from now."""
        turn.step_wait = None
        turn.cancel_phase = None
        turn.cancel_began_at = trio.current_time()

    def stop_now(self, session_id: str, turn_id: str | None = None) -> bool:
        """The person asks not to wait out a late cancel (DESIGN.md §15): the
        operation waiting for the agent escalates at once, through the same
        phases (no second cancel).  False: no cancel of that turn is late."""
        ex = self.agents.running(session_id)
        turn = ex.turn if ex is not None else None
        if turn is None or (turn_id is not None and turn.id != turn_id) \
                or turn.late_wait is None:
            return False
        log.info("session %s: stopping the agent now (asked during the late cancel)",
                 session_id)
        turn.late_wait.cancel()
        return True

    async def stop_for_shutdown(self, ex: Execution) -> None:
        """Shutdown's stop of the running turn: the same writer, then at most
        ``cancel_cleanup_s`` for its end, then escalation.  Nothing published."""
        turn = ex.turn
        if turn is None:
            return
        turn.stop_request = StopRequest.SHUTDOWN
        self._claim(turn, StopRequest.SHUTDOWN, None)
        with trio.move_on_after(self.timeouts.cancel_cleanup_s):
            if turn.cancel_phase is None:
                with contextlib.suppress(AgentClosed, AgentTimeout):
                    await self._write(ex, turn)
            await turn.done.wait()
        if not turn.done.is_set():
            await self._escalate(ex, turn)

    # -- the one writer -----------------------------------------------------------------

    def _claim(self, turn: TurnHandle, request: StopRequest,
               op: CancelOperation | None) -> None:
        if turn.stop_request is not StopRequest.USER:
            turn.stop_request = request
        if op is not None and not op.done.is_set():
            turn.cancel = op
        if turn.cancel_began_at is None:
            turn.cancel_began_at = trio.current_time()

    def _write_now(self, ex: Execution, turn: TurnHandle) -> bool:
        """The cancel in the caller's step, phase set but not published: the
        prompt withheld if it is not written yet (a protocol cancel would meet
        an agent that runs no turn), else the protocol cancel if the pipe takes
        it at once.  False: nothing done, ``_write`` waits for the pipe."""
        if turn.before_prompt is not None:
            turn.before_prompt.cancel()
            turn.cancel_phase = CancelPhase.WITHHELD
            return True
        if not ex.adapter.cancel_now():
            return False
        turn.cancel_sent_at = trio.current_time()
        turn.cancel_phase = CancelPhase.SENT
        return True

    async def _write(self, ex: Execution, turn: TurnHandle) -> None:
        if not self._write_now(ex, turn):
            await ex.adapter.cancel()
            turn.cancel_sent_at = trio.current_time()
            turn.cancel_phase = CancelPhase.SENT
        self._publish(turn)

    async def _persist(self, ex: Execution, turn: TurnHandle) -> None:
        """Re-send the protocol cancel (twice at most, never after the turn ended)
        while the agent keeps streaming the cancelled turn: pi-acp and vibe drop
        a cancel that comes right after the prompt and would otherwise run on
        until escalation."""
        assert turn.cancel_sent_at is not None
        for after in (self.timeouts.cancel_resend_s, self.timeouts.cancel_resend_again_s):
            with trio.move_on_at(turn.cancel_sent_at + after):
                await turn.done.wait()
            if turn.done.is_set():
                return
            if turn.events_after_cancel == 0:
                continue  # quiet: it may be stopping; a re-send would say nothing new
            log.info("session %s: agent still streaming %.2fs after the cancel; sending "
                     "it again", ex.session_id, after)
            turn.events_after_cancel = 0
            turn.cancel_resends += 1
            with contextlib.suppress(AgentClosed, AgentTimeout):
                await ex.adapter.resend_cancel()

    def _set_phase(self, turn: TurnHandle, phase: CancelPhase) -> None:
        turn.cancel_phase = phase
        self._publish(turn)

    def _publish(self, turn: TurnHandle) -> None:
        self.notify.publish(self._progress(turn))

    def _progress(self, turn: TurnHandle) -> list[Note]:
        """The turn's cancel phase, if it is one a person sees."""
        phase = turn.cancel_phase
        if (phase is not None and PHASES[phase].published
                and turn.stop_request in (StopRequest.USER, StopRequest.INTERRUPT)):
            extra = turn.step_wait.payload() if turn.step_wait is not None else None
            return [self.notify.progress_note(turn.session_id, turn.id, phase.value, extra)]
        return []

    async def _escalate(self, ex: Execution, turn: TurnHandle) -> None:
        """Synthetic completion of a turn the agent will not end; the execution
        is marked ready (and its agent replaced before the next prompt), the
        turn's children cancelled with it.  The close is bounded by
        ``cancel_cleanup_s``."""
        log.warning("session %s: escalating cancel of turn %s", ex.session_id, turn.id)
        self._set_phase(turn, CancelPhase.ESCALATED)
        turn.scope.cancel()
        ex.adapter.abandon_turn()
        ex.abandoned = True
        # Its children stop with it (DESIGN.md §13), whether the agent confirmed
        # their own cancels (while this turn's cancel waited) or not (now): the
        # status message counts them as a confirmed cancel's does.
        stopped = set(turn.subagents_stopped)
        for subagent in self.subagents.parent_stopped(ex.session_id):
            self.notify.subagent_changed(ex.session_id, subagent)
            stopped.add(str(subagent["id"]))
        await write_ended(self.store, self.subagents, ex.session_id)
        await self.closer.finish_turn(ex, turn, TurnEnded(
            stop_reason="cancelled", turn_id=turn.id, subagents_cancelled=len(stopped)))

    # -- outcome and settle -------------------------------------------------------------

    @staticmethod
    def _result(turn: TurnHandle) -> CancelResult:
        """The one outcome derivation: the phase the turn ended in (``PHASES``)."""
        assert turn.cancel_phase is not None
        return result_of(turn.cancel_phase, turn.id, turn.cancel_sent_at, turn.answered_at)

    def _settle(self, op: CancelOperation) -> None:
        """The operation's task settles it (or its begin, failed): published at
        once, with a receipt when it stopped a turn its close did not settle
        (a record reconciled with no agent behind it)."""
        if not op.done.is_set():
            self.closer.receipts.settling(op, None, None)
        self.settler.publish(self.settler.settle(op))

    # -- reconciliation -----------------------------------------------------------------

    async def _reconcile(self, session_id: str, result: CancelResult,
                         request: StopRequest) -> CancelResult:
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
            await self.closer.close_turn(session_id, turn_id, TurnFacts(request=request),
                                         TurnEnded(stop_reason="cancelled", turn_id=turn_id))
        after = await self.store.get_session(session_id)
        if after is not None and after.state is SessionState.RUNNING and (
            after.current_turn_id is None or after.current_turn_id == turn_id
        ):
            # RUNNING with no turn behind it (or a turn the store could not close):
            # unstick it.  A successor turn (another id) is never touched.
            after = await states.unstuck(self.store, session_id)
        if after is not None and after.state is SessionState.RUNNING and (
            after.current_turn_id == turn_id
        ):
            raise CancelFailed("the session is still running after reconciliation")
        return CancelResult(result.outcome, turn_id, result.sent_at, result.answered_at)

