"""Where an e2e cancel's time goes, stage by stage, across the client, the server and the agent.

    git worktree add /tmp/wt-stamps HEAD && cd /tmp/wt-stamps && ln -s $REPO/.venv .venv
    git apply bench/cancel_stamps.patch
    mkdir -p /tmp/stamps && TV_STAMPS=/tmp/stamps/st PYTHONPATH=$PWD \\
        python -m bench.cancel_latency --quick --phases latency --agent mock --samples 150
    python -m bench.cancel_stamps /tmp/stamps [--json PATH]

The patch (a throwaway worktree only: it is never applied to the product) puts a
``time.perf_counter_ns`` stamp at each stage boundary of the cancel path in the
bench's client, the server and the (sandboxed) mock agent, each process
appending to ``$TV_STAMPS.<pid>`` (CLOCK_MONOTONIC: one clock for all three).
This reads them, cuts them per cancel (from the client's ``agent.cancel`` write
to the client's read of the close's batch) and prints the median time at which
each stage is reached (the stages at least half of the cancels reach), in stage
order: ``'`` marks a stage on the way back (after the server read the agent's
answer).  It also prints the four spans that make up the whole: down (the
client's write → the cancel on the agent's stdin), agent (→ the server reads its
answer), back (→ the close's batch written), to client.

With ``--executor agentctl`` the patch's other stamps (``x.*`` in the
backend's link to agentctl, ``g.*`` in agentctl: Hypercorn's read, Quart's
message task, the handler, the log, the subscriber's writer) give agentctl's
own share span by span: ``python _agentctl_spans.py /tmp/stamps`` (a file the
patch adds; docs/performance.md, "agentctl's own share").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["analyse", "main"]

Stamp = tuple[int, str]


def load(directory: Path) -> list[Stamp]:
    stamps: list[Stamp] = []
    for path in directory.glob("st.*"):
        for line in path.read_text().splitlines():
            t, name = line.split()
            stamps.append((int(t), name))
    stamps.sort()
    return stamps


def _first(seq: list[Stamp], name: str, after: int) -> int | None:
    return next((t for t, n in seq if n.startswith(name) and t > after), None)


def analyse(stamps: list[Stamp]) -> dict[str, Any]:
    starts = [i for i, (_, n) in enumerate(stamps) if n == "c.sendC"]
    reached: dict[str, list[float]] = defaultdict(list)
    spans: dict[str, list[float]] = defaultdict(list)
    for k, i in enumerate(starts):
        seq = stamps[i:starts[k + 1] if k + 1 < len(starts) else len(stamps)]
        t0 = seq[0][0]
        sent = _first(seq, "s.agent_w", t0)
        answer = None if sent is None else _first(seq, "s.agent_r", sent)
        published = None if answer is None else _first(seq, "s.published", answer)
        written = None if published is None else _first(seq, "s.ob_w", published)
        read = None if written is None else _first(seq, "c.recv", written)
        if sent is None or answer is None or written is None or read is None:
            continue
        spans["down"].append(sent - t0)
        spans["agent"].append(answer - sent)
        spans["back"].append(written - answer)
        spans["to_client"].append(read - written)
        spans["total"].append(read - t0)
        seen: dict[str, int] = {}
        for t, n in seq:
            if t > read:
                break
            if n == "a.w":
                continue  # (taken after the agent's write returns: late when it was preempted)
            key = ("s.ob_w" if n.startswith("s.ob_w") else n) + ("" if t < answer else "'")
            seen.setdefault(key, t)
        seen["c.recv'"] = read
        for key, t in seen.items():
            reached[key].append(t - t0)
    us = 1000.0
    # A stage some cancels do not reach (another transaction, a later chunk) is not
    # on the path: only those at least half of them reach are listed.
    total = len(spans["total"])
    stages = sorted((statistics.median(v) / us, key, len(v)) for key, v in reached.items()
                    if 2 * len(v) >= total)
    return {"cancels": len(spans["total"]),
            "spans_us": {k: round(statistics.median(v) / us, 1) for k, v in spans.items()},
            "stages_us": [{"stage": key, "reached_us": round(m, 1), "n": n}
                          for m, key, n in stages]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cancel_stamps",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path, help="where $TV_STAMPS.<pid> were written")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    result = analyse(load(args.directory))
    if not result["cancels"]:
        print("no complete cancel in the stamps", file=sys.stderr)
        return 1
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))
    print(f"{result['cancels']} cancels; medians, µs: " + ", ".join(
        f"{k} {v}" for k, v in result["spans_us"].items()))
    previous = 0.0
    for row in result["stages_us"]:
        print(f"  {row['stage']:<20} {row['reached_us']:8.1f}  "
              f"+{row['reached_us'] - previous:7.1f}  (n={row['n']})")
        previous = row["reached_us"]
    return 0


if __name__ == "__main__":
    sys.exit(main())
