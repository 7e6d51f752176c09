"""The kill test in CI (issue 32, item 1): 50 SIGKILLs of a real ``turnvisor
serve`` under load from three clients, restarted each time on the same data
dir; nothing acknowledged may be lost (``tests/faults/kill_harness.py``).

``TURNVISOR_KILL_HARNESSES=2`` runs the kills as two harnesses side by side, each
its own server and data dir (a round is mostly a server start on one core, so on
an idle two-core machine two take about two thirds of the time; on a loaded one
they gain nothing and each server answers fewer requests per burst, so CI runs
one).  ``TURNVISOR_KILL_SEED`` (``A,B``: one per harness) replays a run; the
seeds and counts are printed.  ``TURNVISOR_KILLS``: how many kills in all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from tests.faults.kill_harness import KillResult, run_kills

KILLS = int(os.environ.get("TURNVISOR_KILLS", "50"))
HARNESSES = int(os.environ.get("TURNVISOR_KILL_HARNESSES", "1"))


def _seeds() -> list[int | None]:
    given = os.environ.get("TURNVISOR_KILL_SEED")
    seeds: list[int | None] = [int(s) for s in given.split(",")] if given else []
    return (seeds + [None] * HARNESSES)[:HARNESSES]


@pytest.mark.slow
async def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path: Path) -> None:
    shares = [KILLS // HARNESSES + (i < KILLS % HARNESSES) for i in range(HARNESSES)]
    results: list[KillResult] = []

    async def harness(i: int, seed: int | None) -> None:
        results.append(await run_kills(tmp_path / f"data{i}", kills=shares[i], seed=seed))
    with trio.fail_after(60 + KILLS * 6):
        async with trio.open_nursery() as nursery:
            for i, seed in enumerate(_seeds()):
                nursery.start_soon(harness, i, seed)
    summary = "\n".join(r.summary() for r in results)
    print(summary)
    assert sum(r.kills for r in results) == KILLS, summary
    assert sum(r.acknowledged for r in results) >= KILLS * 3, summary
    assert [lost for r in results for lost in r.lost] == [], summary
