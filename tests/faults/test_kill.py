"""The kill test in CI (issue 32, item 1): 50 SIGKILLs of a real ``turnvisor
serve`` under load from three clients, restarted each time on the same data
dir; nothing acknowledged may be lost (``tests/faults/kill_harness.py``).
``TURNVISOR_KILL_SEED`` replays a run; the seed and counts are printed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from tests.faults.kill_harness import run_kills

KILLS = int(os.environ.get("TURNVISOR_KILLS", "50"))


@pytest.mark.slow
async def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path: Path) -> None:
    seed = os.environ.get("TURNVISOR_KILL_SEED")
    with trio.fail_after(60 + KILLS * 6):
        result = await run_kills(tmp_path / "data", kills=KILLS,
                                 seed=None if seed is None else int(seed))
    print(result.summary())
    assert result.kills == KILLS, result.summary()
    assert result.acknowledged >= KILLS * 3, result.summary()
    assert result.lost == [], result.summary()
