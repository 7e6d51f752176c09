"""Where a sandboxed launch spends its time: the fence's pieces, timed directly (issue 40).

    python -m bench.sandbox_pieces [--rounds N] [--json PATH]

No server: each variant builds its launch with this checkout's
``protocols.sandbox.wrap`` (the binds opened by identity, the memfds), spawns
it, and is timed until the first byte the sandboxed command writes (``echo``:
what an agent's first line would be), i.e. what a launch waits for before the
agent's own start.  Teardown is not timed (a launch does not wait for it);
each process is reaped before the next variant starts.  The variants run
round-robin, the order rotating every round, so that the machine's load falls
on all alike:

- ``spawn``: ``echo`` itself (the floor of a spawn);
- ``python_isolated``: ``python -I -S -c`` printing a byte (the leader's
  interpreter, with nothing imported);
- ``bwrap``: the sandbox's own bwrap argv (fd binds, seccomp) with the leader
  stripped and the backend's network kept;
- ``sh_bwrap``: the same behind 8c2187f's group leader, a shell that ignores
  SIGTERM and waits for bwrap (``/bin/sh -c 'trap "" TERM; "$@"; ...'``): what
  a launch did before issue 40, but for the binds now made by descriptor;
- ``bwrap_netns``: the same plus ``--unshare-net``: a namespace, nothing in it;
- ``leader_bwrap``: ``network = "host"``: the group leader (protocols/leader.py)
  starting bwrap, no namespace;
- ``leader_bwrap_pasta``: ``network = "isolated"``, what a launch does now:
  the leader starts bwrap, reads the sandbox's pid, attaches pasta and waits
  for the default route before bwrap starts the command.

The differences split the added time: leader (``leader_bwrap`` - ``sh_bwrap``),
namespace (``bwrap_netns`` - ``bwrap``) and pasta with its route wait
(``leader_bwrap_pasta`` - ``leader_bwrap`` - the namespace).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from protocols import sandbox
from protocols.netns import NetworkMode
from protocols.tools import install, resolve

from .measure import log
from .stats import summary

__all__ = ["VARIANTS", "main", "measure_pieces"]

VARIANTS = ("spawn", "python_isolated", "bwrap", "sh_bwrap", "bwrap_netns", "leader_bwrap",
            "leader_bwrap_pasta")
#: 8c2187f's group leader (protocols/sandbox.py there).
SH_LEADER = ["/bin/sh", "-c", 'trap "" TERM; "$@"; status=$?; exit "$status"', "sh"]
#: What the sandboxed command prints: its first byte ends the timing.
COMMAND = ["echo", "ready"]


def _first_byte(argv: list[str], pass_fds: tuple[int, ...] = (),
                cwd: str | None = None) -> tuple[subprocess.Popen[bytes], float]:
    """Spawn ``argv`` as a launch does (a session of its own, piped stdio) and
    return it with the perf_counter time its first stdout byte arrived."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, pass_fds=pass_fds, cwd=cwd,
                            start_new_session=True)
    assert proc.stdout is not None
    first = proc.stdout.read(1)
    at = time.perf_counter()
    if not first:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        proc.wait()
        raise RuntimeError(f"{argv[0]} wrote nothing (rc={proc.returncode}): {err.strip()}")
    return proc, at


def _reap(proc: subprocess.Popen[bytes]) -> None:
    proc.communicate(timeout=30)


class _Fence:
    """The sandbox's inputs for a launch in a throw-away work dir and private home,
    with a hidden "data dir" beside them, as a real launch has."""

    def __init__(self, root: Path) -> None:
        self.work = root / "work"
        self.home = root / "home"
        self.data = root / "data"
        for d in (self.work, self.home, self.data):
            d.mkdir()
        self.hidden = sandbox.HiddenDir.record(self.data)
        self.env = {"HOME": str(self.home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    def launch(self, network: NetworkMode) -> sandbox.Launch:
        return sandbox.wrap(COMMAND, "bwrap", cwd=str(self.work), env=self.env,
                            hide=[self.hidden], network=network)


def _sandboxed(fence: _Fence, network: NetworkMode, *, leader: bool = True,
               unshare_net: bool = False, sh: bool = False) -> float:
    t0 = time.perf_counter()
    with fence.launch(network) as launch:
        argv = launch.argv
        if not leader:
            # The leader's argv ends at its "--"; bwrap's own follows.
            argv = argv[argv.index("--") + 1:]
            if unshare_net:
                argv = [argv[0], "--unshare-net", *argv[1:]]
            if sh:
                argv = [*SH_LEADER, *argv]
        proc, at = _first_byte(argv, launch.pass_fds, cwd=str(fence.work))
        lifeline = launch.take_lifeline()
    try:
        _reap(proc)
    finally:
        if lifeline is not None:
            os.close(lifeline)
    return (at - t0) * 1000


def _plain(argv: list[str]) -> float:
    t0 = time.perf_counter()
    proc, at = _first_byte(argv)
    _reap(proc)
    return (at - t0) * 1000


def _variants(fence: _Fence) -> dict[str, Callable[[], float]]:
    return {
        "spawn": lambda: _plain(COMMAND),
        "python_isolated": lambda: _plain([sys.executable, "-I", "-S", "-c", "print(1)"]),
        "bwrap": lambda: _sandboxed(fence, "host", leader=False),
        "sh_bwrap": lambda: _sandboxed(fence, "host", leader=False, sh=True),
        "bwrap_netns": lambda: _sandboxed(fence, "host", leader=False, unshare_net=True),
        "leader_bwrap": lambda: _sandboxed(fence, "host"),
        "leader_bwrap_pasta": lambda: _sandboxed(fence, "isolated"),
    }


def measure_pieces(rounds: int, warmup: int = 2) -> dict[str, Any]:
    install(resolve())
    samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="turnvisor-bench-pieces-") as tmp:
        run = _variants(_Fence(Path(tmp)))
        for i in range(warmup + rounds):
            shift = i % len(VARIANTS)
            for name in VARIANTS[shift:] + VARIANTS[:shift]:
                value = run[name]()
                if i >= warmup:
                    samples[name].append(round(value, 3))
            if (i + 1) % 10 == 0:
                log(f"pieces: {i + 1}/{warmup + rounds}")
    out: dict[str, Any] = {name: summary(v) for name, v in samples.items()}
    p50 = {name: out[name]["p50"] for name in VARIANTS}
    out["split_p50_ms"] = {
        "shell leader (sh_bwrap - bwrap)": round(p50["sh_bwrap"] - p50["bwrap"], 3),
        "python leader over the shell (leader_bwrap - sh_bwrap)": round(
            p50["leader_bwrap"] - p50["sh_bwrap"], 3),
        "netns (bwrap_netns - bwrap)": round(p50["bwrap_netns"] - p50["bwrap"], 3),
        "pasta and route wait (leader_bwrap_pasta - leader_bwrap - netns)": round(
            p50["leader_bwrap_pasta"] - p50["leader_bwrap"]
            - (p50["bwrap_netns"] - p50["bwrap"]), 3),
        "added in all (leader_bwrap_pasta - sh_bwrap)": round(
            p50["leader_bwrap_pasta"] - p50["sh_bwrap"], 3),
    }
    out["samples_ms"] = samples
    out["rounds"] = rounds
    return out


def report(out: dict[str, Any]) -> str:
    lines = [f"{'variant':<20} {'p50':>8} {'p90':>8} {'min':>8} {'max':>8}  (ms to the first "
             "byte)"]
    for name in VARIANTS:
        s = out[name]
        lines.append(f"{name:<20} {s['p50']:>8.2f} {s['p90']:>8.2f} {s['min']:>8.2f} "
                     f"{s['max']:>8.2f}")
    lines += [f"{k}: {v:.2f} ms" for k, v in out["split_p50_ms"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sandbox_pieces",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="samples per variant")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    if not sandbox.bwrap_works():
        parser.error("bwrap cannot run on this machine")
    out = measure_pieces(args.rounds)
    out["command"] = " ".join(["python -m bench.sandbox_pieces", *(argv or sys.argv[1:])])
    out["sandbox_module"] = sandbox.__file__
    out["loadavg"] = os.getloadavg()
    print(report(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
