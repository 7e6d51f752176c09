"""The pure rules of a remote agent's lost link (DESIGN.md §20), on a MockClock.

The takeover after a restart tries once unless a cancel is held (then it keeps
trying, each attempt bounded, for ``link_down_cancel_s`` at most); the
receipt's ``link_down_ms`` counts from the cancel's acceptance to the held
cancel's send; a session is unreachable only while its link says so.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from protocols.transport import AgentClosed
from supervisor.agent_status import AgentStatus
from supervisor.config import Timeouts
from supervisor.session.cancellation_link import take_over_attempts
from supervisor.turn.cancel_op import CancelOperation
from supervisor.turn.execution_state import TurnHandle
from supervisor.turn.receipts import receipt_of
from supervisor.turn.recovery import Handover

T = Timeouts(agentctl_takeover_s=15.0, link_down_cancel_s=60.0)


class Host:
    """A start of the takeover: fails (the host does not answer) until ``up_at``."""

    def __init__(self, up_at: float, *, hangs: bool = False) -> None:
        self.up_at = up_at
        self.hangs = hangs
        self.calls: list[float] = []

    async def start(self) -> str:
        self.calls.append(trio.current_time())
        if trio.current_time() >= self.up_at:
            return "taken over"
        if self.hangs:
            await trio.sleep_forever()
        raise AgentClosed("agentctl at http://host:8765 is unreachable")


def run(fn: object) -> None:
    assert callable(fn)
    trio.run(fn, clock=trio.testing.MockClock(autojump_threshold=0))


HELD = Handover("s", "t", 42, cancel_held_at=1765000000.0)
NOT_HELD = Handover("s", "t", 42)


def test_without_a_held_cancel_one_attempt() -> None:
    async def main() -> None:
        host = Host(up_at=5.0)
        assert await take_over_attempts(host.start, NOT_HELD, T) is None
        assert host.calls == [0.0]
    run(main)


def test_with_a_held_cancel_attempts_until_the_host_answers() -> None:
    async def main() -> None:
        host = Host(up_at=3.5)
        assert await take_over_attempts(host.start, HELD, T) == "taken over"
        assert host.calls == [0.0, 1.0, 2.0, 3.0, 4.0]  # one a second, the last one answered
    run(main)


@pytest.mark.parametrize("hangs", [False, True])
def test_a_held_cancel_waits_for_the_host_link_down_cancel_s_at_most(hangs: bool) -> None:
    async def main() -> None:
        host = Host(up_at=1e9, hangs=hangs)
        assert await take_over_attempts(host.start, HELD, T) is None
        assert trio.current_time() == T.link_down_cancel_s
        # Each attempt bounded by agentctl_takeover_s (a hanging one too).
        gaps = [b - a for a, b in zip(host.calls, host.calls[1:], strict=False)]
        assert gaps and max(gaps) <= T.agentctl_takeover_s + 1.0
    run(main)


def test_link_down_ms_counts_from_acceptance_to_the_held_send() -> None:
    async def main() -> None:
        op = CancelOperation(session_id="s", received=10.0)
        turn = TurnHandle(id="t", session_id="s")
        receipt = receipt_of(op, turn, queue_parked=0, children=[], agent_version=None)
        assert receipt["link_down_ms"] is None  # never held
        turn.held_sent_at = 12.5
        receipt = receipt_of(op, turn, queue_parked=0, children=[], agent_version=None)
        assert receipt["link_down_ms"] == 2500.0
        assert receipt_of(op, None, queue_parked=0, children=[],
                          agent_version=None)["link_down_ms"] is None
    run(main)


def test_unreachable_only_while_the_link_says_so() -> None:
    status = AgentStatus()
    closed = trio.Event()
    reachable = [True]
    assert status.reachable("s")  # a local agent (nothing registered) is never unreachable
    status.up("s", "acp/1", closed)
    status.reach("s", lambda: reachable[0])
    assert status.reachable("s")
    reachable[0] = False
    assert not status.reachable("s")
    status.down("s", closed)  # its execution ended: nothing is known to be unreachable
    assert status.reachable("s")
