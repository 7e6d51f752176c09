"""A turn's end as a value: every rule that decides what a turn's end is.

Pure (no I/O, no awaits, no state), like h11's ``_state.py``: ``decide`` maps
what is known when a turn ends (``TurnFacts``: who asked for the stop, how far
its cancel came; ``TurnEnded``: what the agent said) to a ``TurnOutcome``: how
the turn is recorded, its status message, whether the session's queue parks,
whether the agent itself confirmed a cancel, and how a cancel of it ends.  The
closer (supervisor.turn.turn_close) carries the outcome out; the cancel operation
(supervisor.session.cancellation) walks ``PHASES``; the gateway words a cancel's
answer with ``wire_outcome``.  One module, so a new way for a turn to end
(stop after a step, a receipt) is a row here, table-tested without a supervisor.

Tables, each read by one function:
- ``PHASES``: a cancel's phases (published? how a turn ending in it is
  reported, what bounds the wait in it, what follows);
- ``ROWS``: the close's status message, read top to bottom, first match wins.
  The rule behind the order: a user's or a send now's stop is what the user
  sees, whatever the agent answered (its own answer kept in the metadata);
- ``NORMAL_ENDS`` and ``parks``: which ends leave the queue running;
- ``WIRE_OUTCOMES`` and ``wire_outcome``: a settled cancel on the wire (DESIGN.md §14).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, Literal

from protocols.events import TurnEnded

from ..models import CANCELLED_STATUS, INTERRUPTED_STATUS, StopReason, TurnState

__all__ = [
    "NEVER_STARTED_STATUS",
    "NORMAL_ENDS",
    "PHASES",
    "ROWS",
    "SHUTDOWN_STATUS",
    "CancelOutcome",
    "CancelPhase",
    "CancelResult",
    "PhaseRow",
    "StopRequest",
    "StopWhen",
    "TurnFacts",
    "TurnOutcome",
    "decide",
    "parks",
    "result_of",
    "settles_on_close",
    "wire_outcome",
]

#: The status message of a turn stopped because Turnvisor shut down.
SHUTDOWN_STATUS = "Turn interrupted: Turnvisor shut down"

#: The status message of a turn the agent never started (DESIGN.md §9).
NEVER_STARTED_STATUS = "The agent never started the turn"


class StopRequest(StrEnum):
    """Who asked a running turn to stop; it decides the turn's status message."""

    #: The user (``agent.cancel``, REST cancel, Esc).
    USER = "user"
    #: Turnvisor is shutting down.
    SHUTDOWN = "shutdown"
    #: A "send now" replaces the turn (DESIGN.md §9): not the user's cancel.
    INTERRUPT = "interrupt"


class StopWhen(StrEnum):
    """When a user's stop lands (DESIGN.md §18)."""

    #: At once: today's cancel.
    NOW = "now"
    #: When every tool call running at acceptance has finished (a cancel now
    #: if none runs).
    AFTER_STEP = "after_step"


class CancelPhase(StrEnum):
    """A cancel's progress on a running turn (``PHASES`` says what each one
    waits for and how a turn that ends in it is reported)."""

    #: Accepted, waiting for the running step's tool calls to finish; nothing
    #: is written to the agent yet (DESIGN.md §18).
    AFTER_STEP = "after_step"
    #: Before the prompt was written: the prompt is withheld, nothing is sent.
    WITHHELD = "withheld"
    #: The remote agent's link is down: the cancel is held, and sent first
    #: when the link returns (DESIGN.md §20).  No escalation meanwhile.
    LINK_DOWN = "link_down"
    #: The protocol cancel is written to the agent (DESIGN.md §9 "sent").
    SENT = "sent"
    #: The join window passed without the turn's end.
    LATE = "late"
    #: Force-stopped: the turn is completed without the agent.
    ESCALATED = "escalated"


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


# -- a cancel's phases -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PhaseRow:
    #: Published to the session's subscribers as ``session.cancel.progress``
    #: (never for a shutdown's stop).
    published: bool
    #: The outcome of a cancel whose turn ends in this phase.
    ends_as: CancelOutcome
    #: Whether that result names when the agent's answer came.
    answered: bool
    #: The ``Timeouts`` field bounding this phase, counted from when the cancel
    #: began (None: the last phase), and the phase that follows it.
    until: str | None
    then: CancelPhase | None


PHASES: Final[dict[CancelPhase, PhaseRow]] = {
    # Waiting for the step, bounded from acceptance; then the cancel is written
    # (the rest of the phases count from that write).  A turn that ends in it
    # ended before the cancel was needed: the user's stop all the same.
    CancelPhase.AFTER_STEP: PhaseRow(True, CancelOutcome.ACKNOWLEDGED, True,
                                     "after_step_timeout_s", CancelPhase.SENT),
    # Before the prompt was written: nothing was sent, the turn ends unprompted.
    CancelPhase.WITHHELD: PhaseRow(False, CancelOutcome.ACKNOWLEDGED, False,
                                   "cancel_join_s", CancelPhase.ESCALATED),
    # The link to a remote agent is down: the cancel waits for it, bounded by
    # its own field counted from when it was found down (not from acceptance);
    # on the link's return it is sent (SENT, its bounds counting from then);
    # past the bound the operation is answered failed and the cancel stays held
    # (no phase follows: nothing escalates an agent that cannot be reached).
    # A turn that ends in it ended with the cancel held: the user's stop.
    CancelPhase.LINK_DOWN: PhaseRow(True, CancelOutcome.ACKNOWLEDGED, True,
                                    "link_down_cancel_s", None),
    CancelPhase.SENT: PhaseRow(True, CancelOutcome.ACKNOWLEDGED, True,
                               "cancel_join_s", CancelPhase.LATE),
    CancelPhase.LATE: PhaseRow(True, CancelOutcome.LATE, True,
                               "cancel_escalate_s", CancelPhase.ESCALATED),
    CancelPhase.ESCALATED: PhaseRow(True, CancelOutcome.ESCALATED, False, None, None),
}


def result_of(phase: CancelPhase, turn_id: str | None, sent_at: float | None,
              answered_at: float | None) -> CancelResult:
    """How a cancel ends whose turn ended in ``phase`` (the one derivation)."""
    row = PHASES[phase]
    return CancelResult(row.ends_as, turn_id or None, sent_at,
                        answered_at if row.answered else None)


def settles_on_close(phase: CancelPhase | None, settled_session: bool) -> bool:
    """Whether a turn's close settles the cancel waiting for it in the close's
    own step: the cancel was written (a close before that is the operation
    task's to report) and this close moved the session out of RUNNING."""
    return phase is not None and settled_session


# -- the close's wording -----------------------------------------------------------------

#: Turn row state for each (recorded) stop reason; anything else is completed.
TURN_STATE: Final[dict[str, TurnState]] = {
    "end_turn": "completed", "cancelled": "cancelled", "error": "failed"}

#: Matches any request (None is a request too: nobody asked).
ANY: Final = "any"


@dataclass(frozen=True, slots=True)
class _Row:
    text: str
    meta: dict[str, Any]
    #: Who asked (ANY: whoever); the agent's stop reasons this row is for
    #: (None: any) and those it is not for.
    request: StopRequest | Literal["any"] | None = ANY
    stops: frozenset[str] | None = None
    not_stops: frozenset[str] = field(default_factory=frozenset)
    #: Only for a turn the agent never started.
    never_started: bool = False
    #: The agent's own answer goes in the metadata (it is overridden).
    keeps_answer: bool = False
    #: ``escalated: true`` in the metadata when the cancel had to force the end.
    notes_escalation: bool = False
    #: The stop reason the turn is recorded with (None: the agent's).
    records: StopReason | None = None

    def matches(self, stop_reason: str, request: StopRequest | None,
                never_started: bool) -> bool:
        return ((self.request == ANY or self.request is request)
                and (self.stops is None or stop_reason in self.stops)
                and stop_reason not in self.not_stops
                and (not self.never_started or never_started))


_CANCELLED = frozenset({"cancelled"})
_ERROR = frozenset({"error"})

ROWS: Final[tuple[_Row, ...]] = (
    # A send now answered with an error: still the interruption asked for.
    _Row(INTERRUPTED_STATUS, {"interrupted": True, "variant": "info"},
         request=StopRequest.INTERRUPT, stops=_ERROR, keeps_answer=True, records="cancelled"),
    _Row(NEVER_STARTED_STATUS, {"variant": "error", "never_started": True},
         never_started=True),
    # The user asked for the stop: whatever the agent answered (an error to a
    # cancel, the end it was about to reach), the turn ends as the user's cancel.
    _Row(CANCELLED_STATUS, {"cancelled": True, "variant": "warning"},
         request=StopRequest.USER, not_stops=_CANCELLED, keeps_answer=True,
         records="cancelled"),
    _Row(SHUTDOWN_STATUS, {"interrupted": True, "variant": "warning"},
         request=StopRequest.SHUTDOWN, stops=_CANCELLED),
    _Row(INTERRUPTED_STATUS, {"interrupted": True, "variant": "info"},
         request=StopRequest.INTERRUPT, stops=_CANCELLED, notes_escalation=True),
    _Row(CANCELLED_STATUS, {"cancelled": True, "variant": "warning"},
         request=StopRequest.USER, stops=_CANCELLED, notes_escalation=True),
    _Row("Turn cancelled by the agent", {"cancelled": True, "variant": "warning"},
         request=None, stops=_CANCELLED),
    _Row("Agent error: {error}", {"variant": "error"}, stops=_ERROR),
)


# -- the queue ---------------------------------------------------------------------------

#: Stop reasons of a turn that ended normally (its queue's head runs next).
NORMAL_ENDS: Final = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal"})


def parks(stop_reason: StopReason, request: StopRequest | None) -> bool:
    """Whether a turn's close parks the session's queue: a user cancel, a
    shutdown, an error or any abnormal end; not a send now's interruption (it
    starts its own entry) nor a normal end (the head runs)."""
    if request is StopRequest.INTERRUPT and stop_reason == "cancelled":
        return False
    return request in (StopRequest.USER, StopRequest.SHUTDOWN) or stop_reason not in NORMAL_ENDS


# -- the decision ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnFacts:
    """What the supervisor knows of a turn when it ends, besides the agent's word."""

    #: Who asked for the stop (None: nobody).
    request: StopRequest | None = None
    #: How far a cancel of it came (None: no cancel was written).
    phase: CancelPhase | None = None
    #: The agent never showed a sign of starting it (the watchdog's).
    never_started: bool = False
    #: Its prompt was never written: the end is ours, not the agent's.
    prompt_withheld: bool = False


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    #: The stop reason and row state the turn is recorded with.
    stop_reason: StopReason
    state: TurnState
    #: The status message and its metadata (None: a normal end says nothing).
    status: tuple[str, dict[str, Any]] | None
    #: The close parks the session's queue (in its own transaction).
    park: bool
    #: The agent itself confirmed a cancel (not an escalation, not a withheld
    #: prompt): ``session.agent_cancelled`` is said.
    acknowledged: bool


def decide(turn: TurnFacts, ended: TurnEnded) -> TurnOutcome:
    """The end of ``turn`` as the agent reported it (``ended``), decided."""
    escalated = turn.phase is CancelPhase.ESCALATED
    stop_reason = ended.stop_reason
    status: tuple[str, dict[str, Any]] | None = None
    for row in ROWS:
        if not row.matches(stop_reason, turn.request, turn.never_started):
            continue
        meta = dict(row.meta)
        if row.keeps_answer:
            meta["agent_stop_reason"] = stop_reason
            if ended.error:
                meta["agent_error"] = ended.error
        if row.notes_escalation and escalated:
            meta["escalated"] = True
        if ended.subagents_cancelled:
            # DESIGN.md §13: the children its cancel stopped too.
            meta["subagents_cancelled"] = ended.subagents_cancelled
        status = (row.text.format(error=ended.error or "unknown"), meta)
        stop_reason = row.records or stop_reason
        break
    return TurnOutcome(
        stop_reason=stop_reason, state=TURN_STATE.get(stop_reason, "completed"),
        status=status, park=parks(stop_reason, turn.request),
        acknowledged=(ended.stop_reason == "cancelled" and not escalated
                      and not turn.prompt_withheld))


# -- a cancel's answer on the wire -------------------------------------------------------

#: DESIGN.md §14: a settled cancel's outcome on the wire.
WIRE_OUTCOMES: Final[dict[CancelOutcome, str]] = {
    CancelOutcome.ACKNOWLEDGED: "cancelled", CancelOutcome.LATE: "cancelled",
    CancelOutcome.ESCALATED: "escalated", CancelOutcome.NO_EXECUTION: "reconciled",
    CancelOutcome.IDLE: "nothing_running",
}


def wire_outcome(outcome: CancelOutcome | None, acted_on: str | None,
                 aimed_at: str | None) -> str:
    """The ``outcome`` of a cancel's answer: what happened, from what the
    operation found (None: it failed or found nothing), the turn it acted on
    and the turn the request aimed at."""
    wire = "nothing_running" if outcome is None else WIRE_OUTCOMES[outcome]
    if acted_on is None and wire == "reconciled":
        wire = "nothing_running"  # no execution, and nothing shown running either
    if wire == "nothing_running" and aimed_at is not None:
        wire = "turn_ended"  # the turn it was aimed at is over
    return wire
