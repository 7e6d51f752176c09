"""The kill harness for a long run by hand (issue 32, item 7):

    nice -n 10 python -m tests.faults.kill_soak --minutes 30 [--seed N] [--clients 3]

SIGKILLs a real ``turnvisor serve`` at random moments for ``--minutes``,
restarting it on one data dir (a temporary one, removed afterwards unless
``--keep``), and checks after every kill that nothing acknowledged is lost
(``tests/faults/kill_harness.py``).  Prints the seed, kills survived,
requests, lost, and the server's RSS after its first and last start and the
database's size.  Exit status 1 if anything was lost.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import trio

from tests.faults.kill_harness import run_kills


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.kill_soak")
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the data dir")
    args = parser.parse_args(argv)
    data = Path(tempfile.mkdtemp(prefix="turnvisor-kill-soak-"))
    try:
        result = trio.run(lambda: run_kills(
            data / "data", seed=args.seed, seconds=args.minutes * 60, clients=args.clients,
            progress=lambda line: print(line, file=sys.stderr, flush=True)))
        size = (data / "data" / "turnvisor.db").stat().st_size
        print(result.summary())
        print(f"database size at the end: {size / 1024:.0f} KiB")
    finally:
        if args.keep:
            print(f"data dir kept: {data}")
        else:
            shutil.rmtree(data, ignore_errors=True)
    return 1 if result.lost else 0


if __name__ == "__main__":
    sys.exit(main())
