"""What a closed turn's status message says, as one table (DESIGN.md §9).

A turn's end is described by the agent's stop reason and by who asked for the
stop (``StopRequest``, None: nobody).  ``ROWS`` is read top to bottom; the first
row that matches decides the status message, its metadata, and the stop reason
the turn is recorded with.  The rule behind the order: a user's or a send
now's stop is what the user sees, whatever the agent answered (its own answer
is kept in the metadata), so those rows come before the agent's own words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .execution_state import NEVER_STARTED_STATUS, SHUTDOWN_STATUS, StopRequest
from .models import CANCELLED_STATUS, INTERRUPTED_STATUS, StopReason, TurnState

__all__ = ["ROWS", "TURN_STATE", "Wording", "close_wording"]

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


@dataclass(frozen=True, slots=True)
class Wording:
    #: The stop reason and row state the turn is recorded with.
    stop_reason: StopReason
    state: TurnState
    #: The status message and its metadata (None: a normal end says nothing).
    status: tuple[str, dict[str, Any]] | None


def close_wording(stop_reason: StopReason, request: StopRequest | None, *,
                  error: str | None = None, escalated: bool = False,
                  never_started: bool = False, subagents_cancelled: int = 0) -> Wording:
    """How a turn that ended with ``stop_reason`` (asked for by ``request``) is
    recorded and what its status message says.  ``subagents_cancelled``: the
    child sessions its cancel stopped too (DESIGN.md §13), counted in the
    status message's metadata."""
    for row in ROWS:
        if not row.matches(stop_reason, request, never_started):
            continue
        meta = dict(row.meta)
        if row.keeps_answer:
            meta["agent_stop_reason"] = stop_reason
            if error:
                meta["agent_error"] = error
        if row.notes_escalation and escalated:
            meta["escalated"] = True
        if subagents_cancelled:
            meta["subagents_cancelled"] = subagents_cancelled
        recorded = row.records or stop_reason
        return Wording(recorded, TURN_STATE.get(recorded, "completed"),
                       (row.text.format(error=error or "unknown"), meta))
    return Wording(stop_reason, TURN_STATE.get(stop_reason, "completed"), None)
