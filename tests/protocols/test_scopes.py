"""``shielded_for``: shielded from the caller's cancel, bounded by its own deadline."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from protocols.scopes import shielded_for


async def test_work_inside_outlives_the_callers_cancel(
        autojump_clock: trio.testing.MockClock) -> None:
    done: list[float] = []
    with trio.CancelScope() as caller:
        caller.cancel()
        with shielded_for(5) as scope:
            await trio.sleep(3)
            done.append(trio.current_time())
        assert not scope.cancelled_caught
        await trio.lowlevel.checkpoint()  # the caller's cancel surfaces here
        pytest.fail("the caller's cancel was lost")
    assert caller.cancelled_caught
    assert done == [pytest.approx(3)]


async def test_the_deadline_inside_bites_even_for_a_cancelled_caller(
        autojump_clock: trio.testing.MockClock) -> None:
    with trio.CancelScope() as caller:
        caller.cancel()
        with shielded_for(2) as scope:
            await trio.sleep_forever()
        assert scope.cancelled_caught
        await trio.lowlevel.checkpoint()
    assert caller.cancelled_caught
    assert trio.current_time() == pytest.approx(2)


async def test_the_deadline_counts_from_entering_the_scope(
        autojump_clock: trio.testing.MockClock) -> None:
    await trio.sleep(10)
    with shielded_for(1.5) as scope:
        await trio.sleep_forever()
    assert scope.cancelled_caught
    assert trio.current_time() == pytest.approx(11.5)


async def test_a_shield_keeps_the_sooner_bound_of_the_scope_around_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    start = trio.current_time()
    with trio.move_on_after(2):
        with shielded_for(35) as scope:
            await trio.sleep(100)
    assert scope.cancelled_caught
    assert trio.current_time() - start == pytest.approx(2)
