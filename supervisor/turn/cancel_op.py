"""A cancel operation as a value, and its settle (DESIGN.md §2, §9).

Below both of its callers: the operation's task (``supervisor.session.cancellation``)
and the turn's close (``supervisor.turn.turn_close``) settle an operation by
calling down into ``Settler``, which does the settle's own bookkeeping
(pending released, the queue told) and hands back what is to be published
(pending=false and every joined request's answer) instead of publishing it:
the close publishes it with its own notifications, in one batch.  The
requests that joined are data here (``replies``: a connection's mailbox and
the request's id), not callbacks: nothing on the settle calls up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import trio

from ..bus import Note, Reply, Subscriber
from ..errors import SupervisorError
from ..notify import Notifier
from .queue_gate import QueueGate
from .tracing import CancelTrace
from .turn_outcome import CancelOutcome, CancelResult, StopRequest, StopWhen, wire_outcome

__all__ = ["CancelOperation", "Settled", "Settler", "answer_of"]


@dataclass(eq=False)
class CancelOperation:
    session_id: str
    #: Who may join it without a store read (the session's owner, captured at admission).
    workspace_id: str = ""
    task_id: str = ""
    #: Why: the user's cancel, or a send now's interruption of ``turn_id``.
    request: StopRequest = StopRequest.USER
    turn_id: str | None = None
    #: When it lands (a stop after the step waits for the running tool calls).
    when: StopWhen = StopWhen.NOW
    #: Who asked, as the receipt says it: user, stop_all, permission, interrupt.
    by: str = "user"
    #: ``trio.current_time()`` when it was received (the receipt's latency counts from it).
    received: float = 0.0
    done: trio.Event = field(default_factory=trio.Event)
    error: SupervisorError | None = None
    joined: int = 0
    #: Requests answered when it settles (a connection's mailbox, the request's
    #: id), with no task of their own waiting: a storm of duplicates is then
    #: answers queued in one loop, not a task woken per duplicate.
    replies: list[tuple[Subscriber, str]] = field(default_factory=list)
    #: What the cancel did, as its task or its turn's close found it.
    result: CancelResult | None = None
    #: Whether it raised the session's pending flag (released when it settles).
    pending: bool = False
    #: DESIGN.md §18: what the stop did (set when it settled a turn's stop).
    receipt: dict[str, Any] | None = None
    #: The bound of its task (``cancel_operation_s``): lifted while its cancel
    #: is held on a link that is down, which has its own (DESIGN.md §20).
    scope: trio.CancelScope | None = None
    #: A cancel held for a host that did not answer, taken up again after a
    #: restart (DESIGN.md §20): it waits for the takeover as long as it takes.
    held: bool = False

    @property
    def outcome(self) -> CancelOutcome | None:
        """None until it settles, and when it failed."""
        return None if self.result is None or self.error is not None else self.result.outcome

    @property
    def acted_on(self) -> str | None:
        """The turn the cancel acted on (None: none was running)."""
        return None if self.result is None else self.result.turn_id

    @property
    def record_error(self) -> str | None:
        """The agent stopped but the store refused the record of it (why); the
        record is written when the store can again (``Retries``)."""
        return None if self.result is None else self.result.record_error

    async def wait(self) -> CancelOutcome:
        await self.done.wait()
        if self.error is not None:
            raise self.error
        assert self.outcome is not None
        return self.outcome

    def record(self, result: CancelResult) -> None:
        """What the cancel did (its answer's fields)."""
        self.result = result

    def fail(self, error: SupervisorError) -> None:
        if not self.done.is_set():  # (settled by its turn's close: that result stands)
            self.error = error


def answer_of(op: CancelOperation) -> tuple[str, dict[str, Any]]:
    """A settled operation's answer to every request of it: the envelope's type
    and payload.  ``outcome`` says what happened, ``turn_id`` which turn it
    acted on (the one asked for, if it had already ended)."""
    if op.error is not None:
        return "error", {"code": op.error.code, "message": str(op.error)}
    outcome = wire_outcome(op.outcome, op.acted_on, op.turn_id)
    result: dict[str, Any] = {"success": True, "session_id": op.session_id,
                              "outcome": outcome, "turn_id": op.acted_on or op.turn_id}
    if op.record_error is not None:
        # The store refused the record of the stop: the agent stopped all the
        # same, and the record is written once the store can again.
        result |= {"agent_stopped": True, "record_written": False,
                   "record_error": f"the agent stopped, but its record could not be written "
                                   f"({op.record_error}); it is written when the store can "
                                   "again"}
    if op.receipt is not None:
        result["receipt"] = op.receipt
    return "response", result


@dataclass(frozen=True, slots=True)
class Settled:
    """What a settle publishes: pending=false (if it moved) and the answers."""

    notes: list[Note]
    replies: list[Reply]
    #: The operation settled (None: nothing was, the settle was a repeat).
    op: CancelOperation | None = None


class Settler:
    """The operations in flight, one per session, and the one settle."""

    def __init__(self, notifier: Notifier, gate: QueueGate,
                 trace: CancelTrace[CancelOperation] | None = None) -> None:
        self.notify = notifier
        self.projection = notifier.projection
        self.gate = gate
        #: The tracing hook (None: off, as in the product by default).
        self.trace = trace
        self.operations: dict[str, CancelOperation] = {}

    def begun(self, op: CancelOperation, received: float) -> None:
        self.operations[op.session_id] = op
        if self.trace is not None:
            self.trace.begun(op, received)

    def settle(self, op: CancelOperation, *, by_close: bool = False) -> Settled:
        """Release pending, tell the queue, mark it done: once (a second settle
        publishes nothing)."""
        if op.done.is_set():
            return Settled([], [])
        if self.operations.get(op.session_id) is op:
            del self.operations[op.session_id]
        self.gate.cancel_settled(op.session_id)
        notes: list[Note] = []
        if op.pending:
            moved = self.projection.release(op.session_id)
            if moved is not None:
                notes = self.notify.cancellation_notes(op.session_id, moved)
        if self.trace is not None:
            result = op.result
            self.trace.ended(op, None if result is None else result.sent_at,
                             None if result is None else result.answered_at, by_close=by_close)
        op.done.set()
        kind, payload = answer_of(op)
        replies: list[Reply] = [(mailbox, request_id, kind, "agent.cancel", payload)
                                for mailbox, request_id in op.replies]
        op.replies.clear()
        return Settled(notes, replies, op)

    def publish(self, settled: Settled) -> None:
        """Publish a settle made outside a turn's close (the close publishes
        its own with its notifications, and marks the trace as this does)."""
        if settled.notes or settled.replies:
            self.notify.publish(settled.notes, settled.replies)
        if self.trace is not None and settled.op is not None:
            self.trace.published(settled.op)
