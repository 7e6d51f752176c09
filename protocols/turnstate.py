"""The turn state machine shared by both dialects, kept as data.

Everything that changes the turn state is in ``TRANSITIONS``; a trigger with
no row for the current state is a misuse by our caller and raises
``LocalProtocolError`` naming both.  Codex's "no active turn means the cancel
already settled" is the ``(IDLE, CANCEL)`` row, not an ``if`` in a transport.

    IDLE ──PROMPT──▶ PROMPTING ──CANCEL──▶ CANCEL_SENT
      ▲                  │                      │
      └────TURN_ENDED────┴──────TURN_ENDED──────┘
    any ──CLOSE──▶ CLOSED
"""

from __future__ import annotations

from enum import Enum
from typing import Final

from .jsonrpc import LocalProtocolError

__all__ = ["TRANSITIONS", "Trigger", "TurnMachine", "TurnState"]


class TurnState(Enum):
    #: No turn running; a cancel is a no-op that has already settled.
    IDLE = "idle"
    #: A prompt was sent and its turn has not ended.
    PROMPTING = "prompting"
    #: The protocol cancel was sent; waiting for the agent to end the turn.
    CANCEL_SENT = "cancel_sent"
    #: The agent's stream ended; nothing more can happen.
    CLOSED = "closed"


class Trigger(Enum):
    PROMPT = "prompt"
    CANCEL = "cancel"
    TURN_ENDED = "turn_ended"
    CLOSE = "close"


S, T = TurnState, Trigger
TRANSITIONS: Final[dict[tuple[TurnState, Trigger], TurnState]] = {
    (S.IDLE, T.PROMPT): S.PROMPTING,
    (S.IDLE, T.CANCEL): S.IDLE,
    (S.PROMPTING, T.CANCEL): S.CANCEL_SENT,
    (S.PROMPTING, T.TURN_ENDED): S.IDLE,
    # A second cancel while one is outstanding re-sends nothing new in state.
    (S.CANCEL_SENT, T.CANCEL): S.CANCEL_SENT,
    (S.CANCEL_SENT, T.TURN_ENDED): S.IDLE,
    (S.IDLE, T.CLOSE): S.CLOSED,
    (S.PROMPTING, T.CLOSE): S.CLOSED,
    (S.CANCEL_SENT, T.CLOSE): S.CLOSED,
    (S.CLOSED, T.CLOSE): S.CLOSED,
    (S.CLOSED, T.CANCEL): S.CLOSED,
}
del S, T


class TurnMachine:
    def __init__(self) -> None:
        self.state = TurnState.IDLE

    @property
    def running(self) -> bool:
        """A turn was started and has not ended (the protocol's view of it)."""
        return self.state in (TurnState.PROMPTING, TurnState.CANCEL_SENT)

    def fire(self, trigger: Trigger) -> TurnState:
        """Apply ``trigger`` and return the state it left."""
        try:
            new = TRANSITIONS[(self.state, trigger)]
        except KeyError:
            raise LocalProtocolError(
                f"{trigger.name} is not allowed in turn state {self.state.name}"
            ) from None
        old, self.state = self.state, new
        return old
