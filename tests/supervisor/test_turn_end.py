"""``supervisor.turn.turn_end``: who publishes a turn's end, the pump or the prompt's task."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from protocols.events import TurnEnded
from protocols.transport import AgentTimeout
from supervisor.turn.turn_end import TURN_ERRORS, left_to_us, turn_error


async def test_an_answered_end_is_the_pumps_at_once(
        autojump_clock: trio.testing.MockClock) -> None:
    pumped = trio.Event()
    assert not await left_to_us(TurnEnded(stop_reason="cancelled"), pumped, 2.0)
    assert trio.current_time() == 0  # no wait: the end came through the events


async def test_an_error_the_pump_publishes_in_time_is_left_to_it(
        autojump_clock: trio.testing.MockClock) -> None:
    pumped = trio.Event()
    async with trio.open_nursery() as nursery:
        async def pump() -> None:
            await trio.sleep(0.5)
            pumped.set()
        nursery.start_soon(pump)
        assert not await left_to_us(turn_error(AgentTimeout("slow")), pumped, 2.0)
    assert trio.current_time() == pytest.approx(0.5)


async def test_an_error_the_pump_never_sees_is_ours_after_the_grace(
        autojump_clock: trio.testing.MockClock) -> None:
    ended = turn_error(AgentTimeout("turn did not end within 3600s"))
    assert ended == TurnEnded(stop_reason="error", error="turn did not end within 3600s")
    assert await left_to_us(ended, trio.Event(), 2.0)
    assert trio.current_time() == pytest.approx(2.0)


def test_every_turn_error_maps_to_an_error_end() -> None:
    for cls in TURN_ERRORS:
        exc = cls("why") if cls is not AgentTimeout else AgentTimeout("why")
        assert turn_error(exc) == TurnEnded(stop_reason="error", error="why")
    assert turn_error(RuntimeError()).error == "RuntimeError"
