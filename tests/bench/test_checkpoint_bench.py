"""The checkpoint bench runs end to end on a small project and judges its targets."""

from __future__ import annotations

from bench.checkpoints import TARGETS, measure


async def test_the_checkpoint_bench_measures_every_figure() -> None:
    result = await measure(files=60, reps=1)
    assert set(result["figures"]) == {"first_snapshot_ms", "idle_snapshot_ms",
                                      "turn_snapshot_ms", "changes_ms", "revert_ms"}
    assert all(f["n"] == 1 and f["p50"] > 0 for f in result["figures"].values())
    assert set(result["targets"]) == set(TARGETS)
    for name, target in result["targets"].items():
        assert target["met"] == (result["figures"][name]["p50"] <= TARGETS[name])
