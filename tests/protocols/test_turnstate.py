"""The turn state table, every (state, trigger) pair: a row or a LocalProtocolError."""

from __future__ import annotations

import itertools

import pytest

from protocols.jsonrpc import LocalProtocolError
from protocols.turnstate import Trigger, TurnMachine, TurnState

S, T = TurnState, Trigger

# Written out by hand, not copied from TRANSITIONS: the test is the second
# opinion.  None = the trigger is a misuse in that state.
EXPECTED: dict[tuple[TurnState, Trigger], TurnState | None] = {
    (S.IDLE, T.PROMPT): S.PROMPTING,
    (S.IDLE, T.CANCEL): S.IDLE,  # no active turn: the cancel has already settled
    (S.IDLE, T.TURN_ENDED): None,
    (S.IDLE, T.CLOSE): S.CLOSED,
    (S.PROMPTING, T.PROMPT): None,  # one turn at a time
    (S.PROMPTING, T.CANCEL): S.CANCEL_SENT,
    (S.PROMPTING, T.TURN_ENDED): S.IDLE,
    (S.PROMPTING, T.CLOSE): S.CLOSED,
    (S.CANCEL_SENT, T.PROMPT): None,
    (S.CANCEL_SENT, T.CANCEL): S.CANCEL_SENT,
    (S.CANCEL_SENT, T.TURN_ENDED): S.IDLE,
    (S.CANCEL_SENT, T.CLOSE): S.CLOSED,
    (S.CLOSED, T.PROMPT): None,
    (S.CLOSED, T.CANCEL): S.CLOSED,  # cancelling a dead agent is settled too
    (S.CLOSED, T.TURN_ENDED): None,
    (S.CLOSED, T.CLOSE): S.CLOSED,
}


def test_expected_table_covers_every_pair() -> None:
    assert set(EXPECTED) == set(itertools.product(TurnState, Trigger))


@pytest.mark.parametrize(("state", "trigger"), list(EXPECTED), ids=lambda v: v.name)
def test_transition(state: TurnState, trigger: Trigger) -> None:
    m = TurnMachine()
    m.state = state
    expected = EXPECTED[(state, trigger)]
    if expected is None:
        with pytest.raises(LocalProtocolError, match=f"{trigger.name}.*{state.name}"):
            m.fire(trigger)
        assert m.state is state  # a refused trigger changes nothing
    else:
        assert m.fire(trigger) is state  # fire returns the state it left
        assert m.state is expected
