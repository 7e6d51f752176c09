"""A turn's end as a value (supervisor.turn.turn_outcome): every rule as a table,
with no supervisor, no agent, no store."""

from __future__ import annotations

from typing import Any

import pytest

from protocols.events import TurnEnded
from supervisor.models import CANCELLED_STATUS, INTERRUPTED_STATUS
from supervisor.turn.turn_outcome import (
    NEVER_STARTED_STATUS,
    PHASES,
    SHUTDOWN_STATUS,
    CancelOutcome,
    CancelPhase,
    StopRequest,
    TurnFacts,
    decide,
    result_of,
    settles_on_close,
    wire_outcome,
)

USER, SHUTDOWN, INTERRUPT = StopRequest.USER, StopRequest.SHUTDOWN, StopRequest.INTERRUPT
SENT, ESCALATED, WITHHELD = CancelPhase.SENT, CancelPhase.ESCALATED, CancelPhase.WITHHELD

#: (who asked, the cancel's phase, the agent's stop reason) →
#: (recorded stop reason, turn row state, status text or None, metadata, parks, acknowledged)
CLOSES: list[tuple[Any, ...]] = [
    # Nobody asked: the agent's own word.
    (None, None, "end_turn", "end_turn", "completed", None, None, False, False),
    (None, None, "max_tokens", "max_tokens", "completed", None, None, False, False),
    (None, None, "refusal", "refusal", "completed", None, None, False, False),
    (None, None, "cancelled", "cancelled", "cancelled", "Turn cancelled by the agent",
     {"cancelled": True, "variant": "warning"}, True, True),
    (None, None, "error", "error", "failed", "Agent error: it broke",
     {"variant": "error"}, True, False),
    # The user's cancel: confirmed, overridden (an error, an end it was about to
    # reach: still the user's cancel, the agent's answer kept), escalated.
    (USER, SENT, "cancelled", "cancelled", "cancelled", CANCELLED_STATUS,
     {"cancelled": True, "variant": "warning"}, True, True),
    (USER, SENT, "end_turn", "cancelled", "cancelled", CANCELLED_STATUS,
     {"cancelled": True, "variant": "warning", "agent_stop_reason": "end_turn"}, True, False),
    (USER, SENT, "error", "cancelled", "cancelled", CANCELLED_STATUS,
     {"cancelled": True, "variant": "warning", "agent_stop_reason": "error",
      "agent_error": "it broke"}, True, False),
    (USER, ESCALATED, "cancelled", "cancelled", "cancelled", CANCELLED_STATUS,
     {"cancelled": True, "variant": "warning", "escalated": True}, True, False),
    # A send now's interruption: information, and the queue is not parked (it
    # starts its own entry); an error answer is still the interruption.
    (INTERRUPT, SENT, "cancelled", "cancelled", "cancelled", INTERRUPTED_STATUS,
     {"interrupted": True, "variant": "info"}, False, True),
    (INTERRUPT, SENT, "error", "cancelled", "cancelled", INTERRUPTED_STATUS,
     {"interrupted": True, "variant": "info", "agent_stop_reason": "error",
      "agent_error": "it broke"}, False, False),
    (INTERRUPT, ESCALATED, "cancelled", "cancelled", "cancelled", INTERRUPTED_STATUS,
     {"interrupted": True, "variant": "info", "escalated": True}, False, False),
    (INTERRUPT, SENT, "end_turn", "end_turn", "completed", None, None, False, False),
    # Shutdown: said, and the queue parks.
    (SHUTDOWN, SENT, "cancelled", "cancelled", "cancelled", SHUTDOWN_STATUS,
     {"interrupted": True, "variant": "warning"}, True, True),
    (SHUTDOWN, SENT, "end_turn", "end_turn", "completed", None, None, True, False),
]


@pytest.mark.parametrize(
    ("request_", "phase", "agent_says", "recorded", "state", "text", "meta", "park", "ack"),
    CLOSES)
def test_each_end_is_recorded_worded_and_parked_as_the_table_says(
        request_: StopRequest | None, phase: CancelPhase | None, agent_says: Any,
        recorded: str, state: str, text: str | None, meta: dict[str, Any] | None,
        park: bool, ack: bool) -> None:
    outcome = decide(TurnFacts(request=request_, phase=phase),
                     TurnEnded(stop_reason=agent_says, error="it broke"
                               if agent_says == "error" else None))
    assert (outcome.stop_reason, outcome.state) == (recorded, state)
    assert outcome.status == (None if text is None else (text, meta))
    assert (outcome.park, outcome.acknowledged) == (park, ack)


def test_a_turn_the_agent_never_started_says_so_whoever_ended_it() -> None:
    for request in (None, SHUTDOWN):
        outcome = decide(TurnFacts(request=request, never_started=True),
                         TurnEnded(stop_reason="error", error="stalled"))
        assert outcome.status == (NEVER_STARTED_STATUS,
                                  {"variant": "error", "never_started": True})
        assert outcome.park
    # Even the user's cancel of it: that row comes after this one (the table's order).
    outcome = decide(TurnFacts(request=USER, never_started=True),
                     TurnEnded(stop_reason="cancelled"))
    assert outcome.status is not None and outcome.status[0] == NEVER_STARTED_STATUS


def test_a_withheld_prompt_is_no_confirmation_from_the_agent() -> None:
    outcome = decide(TurnFacts(request=USER, phase=WITHHELD, prompt_withheld=True),
                     TurnEnded(stop_reason="cancelled"))
    assert outcome.status == (CANCELLED_STATUS, {"cancelled": True, "variant": "warning"})
    assert not outcome.acknowledged


def test_the_children_a_cancel_stopped_are_counted_in_its_status() -> None:
    outcome = decide(TurnFacts(request=USER, phase=SENT),
                     TurnEnded(stop_reason="cancelled", subagents_cancelled=2))
    assert outcome.status is not None and outcome.status[1]["subagents_cancelled"] == 2
    # A normal end says nothing, children or not.
    assert decide(TurnFacts(), TurnEnded(stop_reason="end_turn",
                                         subagents_cancelled=2)).status is None


def test_the_phases_lead_to_escalation_and_each_is_reported_as_it_ends() -> None:
    # DESIGN.md §20: a cancel held on a link that is down never escalates (the
    # agent cannot be reached); its own bound ends the operation, and the
    # link's return leads it to SENT, from where the others follow.
    held = PHASES[CancelPhase.LINK_DOWN]
    assert held.then is None and held.until == "link_down_cancel_s" and held.published
    assert result_of(CancelPhase.LINK_DOWN, "t", None, 2.0).outcome is CancelOutcome.ACKNOWLEDGED
    for phase in CancelPhase:
        if phase is CancelPhase.LINK_DOWN:
            continue
        seen = set()
        while PHASES[phase].then is not None:
            assert phase not in seen
            seen.add(phase)
            assert PHASES[phase].until in ("cancel_join_s", "cancel_escalate_s",
                                           "after_step_timeout_s")
            phase = PHASES[phase].then  # type: ignore[assignment]
        assert phase is ESCALATED
    # A stop after the step waits (bounded), then writes the cancel: the rest counts from there.
    assert PHASES[CancelPhase.AFTER_STEP].until == "after_step_timeout_s"
    assert PHASES[CancelPhase.AFTER_STEP].then is SENT
    assert result_of(CancelPhase.AFTER_STEP, "t", None, 2.0).outcome is CancelOutcome.ACKNOWLEDGED
    assert [p for p in CancelPhase if not PHASES[p].published] == [WITHHELD]
    assert result_of(SENT, "t", 1.0, 2.0).outcome is CancelOutcome.ACKNOWLEDGED
    assert result_of(CancelPhase.LATE, "t", 1.0, 2.0).answered_at == 2.0
    assert result_of(ESCALATED, "t", 1.0, 2.0).answered_at is None
    assert result_of(WITHHELD, "", None, None).turn_id is None


@pytest.mark.parametrize(("phase", "settled", "settles"), [
    (None, True, False),      # a close before the cancel was written: the task reports it
    (SENT, False, False),     # the close did not move the session (another close did)
    (SENT, True, True),
    (ESCALATED, True, True),
])
def test_a_close_settles_the_cancel_only_once_it_was_written_and_moved_the_session(
        phase: CancelPhase | None, settled: bool, settles: bool) -> None:
    assert settles_on_close(phase, settled) is settles


@pytest.mark.parametrize(("outcome", "acted_on", "aimed_at", "wire"), [
    (CancelOutcome.ACKNOWLEDGED, "t", None, "cancelled"),
    (CancelOutcome.LATE, "t", "t", "cancelled"),
    (CancelOutcome.ESCALATED, "t", None, "escalated"),
    (CancelOutcome.NO_EXECUTION, "t", None, "reconciled"),
    (CancelOutcome.NO_EXECUTION, None, None, "nothing_running"),
    (CancelOutcome.NO_EXECUTION, None, "t", "turn_ended"),
    (CancelOutcome.IDLE, None, None, "nothing_running"),
    (CancelOutcome.IDLE, None, "t", "turn_ended"),
    (None, None, None, "nothing_running"),
])
def test_a_cancels_answer_says_what_happened(outcome: CancelOutcome | None,
                                            acted_on: str | None, aimed_at: str | None,
                                            wire: str) -> None:
    assert wire_outcome(outcome, acted_on, aimed_at) == wire
