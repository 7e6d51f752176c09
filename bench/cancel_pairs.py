"""The cancel's e2e in alternating pairs of two checkouts (issue 40: the fence must not move it).

    python -m bench.cancel_pairs --base DIR [--checkout DIR] [--pairs N] [--json PATH]
                                 [-- CANCEL_LATENCY_ARGS...]

Each run is ``python -m bench.cancel_latency --quick --phases latency --agent mock``
(or the arguments after ``--``) in a process of its own, started in the checkout
with ``PYTHONPATH`` on it, so that its bench, its server and the server's
modules are that checkout's (the module paths it imports are recorded).  The
base runs first in even pairs, second in odd ones; per pair the ratio of the
e2e request → response p50 (and p99, and of the e2e ÷ floor ratio) is reported,
with the median over the pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.support.serverproc import REPO_ROOT

from .measure import log

__all__ = ["main"]

DEFAULT_ARGS = ["--quick", "--phases", "latency", "--agent", "mock"]
FIGURES = ("e2e_p50_ms", "e2e_p99_ms", "floor_ms", "ratio_p50")


def _env(checkout: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(checkout)}


def imported_from(checkout: Path) -> str:
    """The bench's, its server helper's and the server's modules, as the run imports them."""
    code = ("import bench.cancel_latency as b, tests.support.serverproc as s, web as w; "
            "print(b.__file__, s.__file__, w.__file__)")
    # -m puts the current directory first; -P and PYTHONPATH do the same for -c here.
    proc = subprocess.run([sys.executable, "-P", "-c", code], env=_env(checkout),
                          cwd=checkout, check=True, capture_output=True, text=True)
    return proc.stdout.strip()


def run_once(checkout: Path, args: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="turnvisor-cancel-pairs-") as tmp:
        out = Path(tmp) / "result.json"
        subprocess.run([sys.executable, "-m", "bench.cancel_latency", *args, "--json", str(out)],
                       env=_env(checkout), cwd=checkout, check=True,
                       stdout=subprocess.DEVNULL)
        result = json.loads(out.read_text())
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {"checkout": str(checkout), "commit": commit,
            **{f: result[f] for f in FIGURES},
            "loadavg": result["machine"]["loadavg_start"]}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, theirs = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv \
        else (argv, DEFAULT_ARGS)
    parser = argparse.ArgumentParser(prog="python -m bench.cancel_pairs",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument("--checkout", type=Path, default=REPO_ROOT,
                        help="the checkout measured against --base (default: this one)")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(ours)
    sides = {"base": args.base.resolve(), "head": args.checkout.resolve()}
    for d in sides.values():
        if not (d / "bench" / "cancel_latency.py").is_file():
            parser.error(f"{d} is not a Turnvisor checkout with bench/cancel_latency.py")
    modules = {side: imported_from(d) for side, d in sides.items()}
    for side, m in modules.items():
        log(f"{side}: imports {m}")
    pairs: list[dict[str, Any]] = []
    for i in range(args.pairs):
        order = ["base", "head"] if i % 2 == 0 else ["head", "base"]
        pair: dict[str, Any] = {"order": order}
        for side in order:
            pair[side] = run_once(sides[side], theirs)
            log(f"pair {i + 1} {side} ({pair[side]['commit']}): e2e p50 "
                f"{pair[side]['e2e_p50_ms']:.2f} ms")
        pairs.append(pair)
    summary: dict[str, Any] = {}
    for f in FIGURES:
        ratios = [round(p["head"][f] / p["base"][f], 3) for p in pairs]
        summary[f] = {"base": [p["base"][f] for p in pairs],
                      "head": [p["head"][f] for p in pairs],
                      "head_over_base_per_pair": ratios,
                      "median": round(statistics.median(ratios), 3)}
        print(f"{f}: base {summary[f]['base']} head {summary[f]['head']}; head/base per pair "
              f"{ratios} (median {summary[f]['median']})")
    if args.json:
        args.json.write_text(json.dumps({
            "command": " ".join(["python -m bench.cancel_pairs", *argv]),
            "cancel_latency_args": theirs, "modules": modules, "pairs": pairs,
            "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
