"""Phase ``checkpoints``: what turn checkpoints cost on a project of 10,000 files.

A process of its own, no server (the engine alone, ``supervisor.workspace.checkpoints``)::

    python -m bench.checkpoints [--files 10000] [--reps 5] [--json PATH]

Builds a project (``--files`` text files of ~1 KiB in 100 directories) in a temporary
directory, then measures, each ``--reps`` times on a fresh shadow repository:

- ``first_snapshot_ms``: the session's first snapshot (every file hashed);
- ``turn_snapshot_ms``: a turn-end snapshot after a turn that changed 10 files
  (8 modified, 1 added, 1 deleted);
- ``idle_snapshot_ms``: a snapshot with nothing changed (a turn-start snapshot);
- ``revert_ms``: restoring the turn's start checkpoint (safety snapshot included);
- ``changes_ms``: listing that turn's changes.

Targets (issue 33): a snapshot after the first ≤ 150 ms at 10,000 files, the revert of a
10-file turn ≤ 300 ms.  Prints the figures and writes them as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from supervisor.workspace.checkpoints import ShadowRepo

from .stats import summary

__all__ = ["measure"]

TARGETS = {"turn_snapshot_ms": 150.0, "idle_snapshot_ms": 150.0, "revert_ms": 300.0}


def make_project(root: Path, n: int) -> list[Path]:
    paths: list[Path] = []
    line = "the quick brown fox jumps over the lazy dog, checkpoint bench line\n"
    for i in range(n):
        path = root / f"pkg{i % 100:02d}" / f"module_{i:05d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# file {i}\n" + line * 15)
        paths.append(path)
    (root / ".gitignore").write_text("__pycache__/\n*.pyc\n")
    return paths


def change_ten(root: Path, paths: list[Path], rep: int) -> None:
    for path in paths[rep * 10: rep * 10 + 8]:
        path.write_text(path.read_text() + f"# changed in turn {rep}\n")
    (root / f"added_{rep}.py").write_text("print('new')\n")
    paths[rep * 10 + 9].unlink()


async def one_rep(root: Path, data: Path, paths: list[Path], rep: int) -> dict[str, float]:
    repo = ShadowRepo.for_session(data, f"bench{rep}", root)
    out: dict[str, float] = {}

    async def timed(name: str, fn: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        result = await fn(*args)
        out[name] = (time.perf_counter() - t0) * 1000
        return result

    await timed("first_snapshot_ms", repo.snapshot, "first")
    start = await timed("idle_snapshot_ms", repo.snapshot, "turn start")
    change_ten(root, paths, rep)
    end = await timed("turn_snapshot_ms", repo.snapshot, "turn end")
    changes = await timed("changes_ms", repo.changes, start, end)
    assert len(changes) == 10, changes
    result = await timed("revert_ms", repo.restore, start)
    assert len(result.written) + len(result.deleted) == 10, result
    return out


async def measure(files: int, reps: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="turnvisor-bench-ckpt-"))
    try:
        project = tmp / "project"
        paths = make_project(project, files)
        rows = [await one_rep(project, tmp / "data", paths, rep) for rep in range(reps)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figures = {name: summary([r[name] for r in rows]) for name in rows[0]}
    targets = {name: {"value": figures[name]["p50"], "target": limit,
                      "met": figures[name]["p50"] <= limit} for name, limit in TARGETS.items()}
    return {"files": files, "reps": reps, "figures": figures, "targets": targets}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = trio.run(measure, args.files, args.reps)
    for name, fig in result["figures"].items():
        print(f"{name:>18}: p50 {fig['p50']:8.1f}  min {fig['min']:8.1f}  max {fig['max']:8.1f}")
    for name, t in result["targets"].items():
        print(f"target {name} p50 {t['value']:.1f} ≤ {t['target']:.0f}: "
              f"{'met' if t['met'] else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    sys.exit(0)


if __name__ == "__main__":
    main()
