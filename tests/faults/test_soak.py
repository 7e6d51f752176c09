"""The soak in CI (issue 8, item 4): ``bench.soak`` for 60 s with 20 sessions
in prompt/cancel cycles and random faults; nothing may fail, stay stuck or
leak.  The 30-minute run is ``python -m bench.soak --long``."""

from __future__ import annotations

import os

import pytest
import trio

from bench.soak import Options, run_soak


@pytest.mark.slow
async def test_soak_sixty_seconds() -> None:
    seconds = float(os.environ.get("TURNVISOR_SOAK_SECONDS", "60"))
    with trio.fail_after(seconds + 180):
        result = await run_soak(Options(sessions=20, seconds=seconds, quiet=True))
    print(result.summary())
    assert sum(result.operations.values()) >= 20 * seconds / 10, result.summary()
    assert sum(result.faults.values()) > 0, result.summary()
    assert result.failures == [], result.summary()
    assert result.leaks == {}, result.summary()
