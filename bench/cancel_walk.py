"""The cancel's fast path as measured calls: every cross-module call, per dialect.

    python -m bench.cancel_walk [--dialect acp|codex]... [--runs N] [--json PATH]

Runs the walk of tests/support/walk.py (the same one
tests/web/test_cancel_walk.py asserts ceilings on): an ``agent.cancel`` on the
real server's WebSocket while the mock agent runs a silent tool call, recorded
with ``sys.setprofile`` from the cancel's frame to the answer's write.  Prints,
per dialect, the figures of each run and the walk (every distinct edge with
its count; B: a back-edge, ↩: on the way back from the agent's answer,
at least once); with
``--json``, writes the figures and the edges of every run.  A count that
differs between runs is reported (the walk is meant to be the same every time).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from tests.support.walk import DIALECTS, Walk, measure

from .measure import log

__all__ = ["main"]

REPO_ROOT = Path(__file__).resolve().parent.parent


async def _run(dialects: list[str], runs: int) -> dict[str, list[Walk]]:
    walks: dict[str, list[Walk]] = {}
    for dialect in dialects:
        with tempfile.TemporaryDirectory(prefix="turnvisor-cancel-walk-") as tmp:
            walks[dialect] = await measure(Path(tmp) / "data", dialect, runs=runs)
    return walks


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m bench.cancel_walk",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialect", action="append", choices=sorted(DIALECTS),
                        help="the mock agent's dialect (default: each)")
    parser.add_argument("--runs", type=int, default=3, help="cancels measured per dialect")
    parser.add_argument("--json", type=Path, help="write every figure and edge here")
    args = parser.parse_args(argv)
    dialects = args.dialect or sorted(DIALECTS)
    walks = trio.run(_run, dialects, args.runs)
    result: dict[str, Any] = {}
    for dialect, runs in walks.items():
        figures = [w.figures() for w in runs]
        for i, f in enumerate(figures):
            log(f"{dialect} run {i + 1}: " + ", ".join(f"{k} {v}" for k, v in f.items()))
        if any(f != figures[0] for f in figures):
            print(f"{dialect}: the runs differ: {figures}")
        print(runs[-1].report())
        print()
        result[dialect] = {"runs": figures, "walk": runs[-1].as_json()}
    if args.json:
        commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        args.json.write_text(json.dumps({
            "command": " ".join(["python -m bench.cancel_walk", *argv]),
            "commit": commit, "python": sys.version.split()[0],
            "dialects": result}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
