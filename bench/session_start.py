"""Session start: ``session.launch`` until the session is ready, and its first turn's
first streamed token (issue 40's measure of the fence).

    python -m bench.session_start [--checkout DIR] [--launches N] [--json PATH]
    python -m bench.session_start --base DIR [--checkout DIR] [--pairs N] [--launches N]
                                  [--json PATH]

Starts a real ``turnvisor serve`` (the mock agent, the default profile: sandbox
``bwrap``; network ``isolated`` since issue 40, the backend's before) and, on one
lean WebSocket, launches sessions one after the other.  Per launch:

- ``launch_ms``: ``session.launch`` written → its response read.  The response
  comes once the agent's process runs and its protocol is initialised (the
  session WAITING_FOR_INPUT), so this is the whole start a person waits for;
- ``first_token_ms``: then ``message.add "hello"`` written → the first agent
  output on the subscribed connection;
- ``total_ms``: the two together (a launch with its first prompt).

Each session is deleted after its turn, and the next launch waits until the
agent's processes are gone, so that no teardown overlaps a measured start.

``--checkout DIR`` runs the server of another checkout (``PYTHONPATH=DIR``;
the editable install's finder comes after ``PYTHONPATH``): the module path it
imports and the command of its first agent's group leader are recorded, so a
run says which code it measured.  The mock agent itself runs inside the
sandbox, whose /tmp is private: a checkout under /tmp gets this install's mock
agent (its code has not changed since 8c2187f).  ``--base DIR`` alternates
runs of DIR and of ``--checkout`` (base first in even pairs, second in odd ones)
and reports, pair by pair, the ratio and the difference of the p50s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio

from tests.support.serverproc import REPO_ROOT, server_process
from tests.support.ws import WsClient, is_agent_output, is_turn_completed

from .lean_client import open_lean_client
from .measure import log
from .stats import summary

__all__ = ["main", "measure_checkout"]

FIGURES = ("launch_ms", "first_token_ms", "total_ms")
#: How long a deleted session's agent may take to be gone before the next launch.
GONE_S = 10.0


def _checkout_env(checkout: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(checkout)}


def imported_from(checkout: Path) -> str:
    """Where the server's ``web`` package comes from under ``checkout``'s environment."""
    # -P: no current directory on the path, as under the server's console script.
    proc = subprocess.run([sys.executable, "-P", "-c", "import web; print(web.__file__)"],
                          env=_checkout_env(checkout), cwd=REPO_ROOT, check=True,
                          capture_output=True, text=True)
    return proc.stdout.strip()


def _children(pid: int) -> list[list[str]]:
    import psutil
    out = []
    for child in psutil.Process(pid).children():
        try:
            out.append(child.cmdline())
        except psutil.NoSuchProcess:
            continue
    return out


async def _until_no_agents(pid: int) -> None:
    deadline = trio.current_time() + GONE_S
    while _children(pid) and trio.current_time() < deadline:
        await trio.sleep(0.02)


async def _one(conn: WsClient, task_id: str) -> tuple[dict[str, float], str]:
    pending = await conn.send("session.launch", {"task_id": task_id})
    frame = await pending.wait(60)
    if frame["type"] != "response":
        raise RuntimeError(f"session.launch failed: {frame}")
    sid = str(frame["payload"]["id"])
    launch_ms = pending.ms
    await conn.call("session.subscribe", {"session_id": sid})
    first = conn.watch(is_agent_output(sid))
    done = conn.watch(is_turn_completed(sid))
    sent = await conn.send("message.add", {"session_id": sid, "content": "hello"})
    first_ms = (await first.wait(30) - sent.sent_at) * 1000
    await done.wait(30)
    return {"launch_ms": round(launch_ms, 3), "first_token_ms": round(first_ms, 3),
            "total_ms": round(launch_ms + first_ms, 3)}, sid


async def _run(checkout: Path, launches: int, warmup: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {f: [] for f in FIGURES}
    leader: list[str] = []
    async with server_process(agent="mock", base_env=_checkout_env(checkout),
                              log_level="WARNING") as server, trio.open_nursery() as nursery:
        host, port = server.url.removeprefix("http://").rsplit(":", 1)
        conn = await open_lean_client(nursery, host, int(port), server.token, keep=False)
        task_id = (await conn.call("task.create", {"title": "session start"}))["id"]
        for i in range(warmup + launches):
            figures, sid = await _one(conn, task_id)
            if not leader:
                # The agent's group leader: a shell starting bwrap at 8c2187f,
                # protocols/leader.py (of the checkout that runs) since.
                found = _children(server.pid)
                leader = found[0][:5] if found else []
            if i >= warmup:
                for f in FIGURES:
                    samples[f].append(figures[f])
            await conn.call("session.delete", {"session_id": sid})
            await _until_no_agents(server.pid)
        await conn.aclose()
        nursery.cancel_scope.cancel()
    return {**{f: summary(v) for f, v in samples.items()}, "samples_ms": samples,
            "agent_group_leader": leader}


def measure_checkout(checkout: Path, launches: int, warmup: int) -> dict[str, Any]:
    """One server of ``checkout``: ``launches`` measured launches after ``warmup``."""
    origin = imported_from(checkout)
    log(f"{checkout}: server imports {origin}")
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    started = time.time()
    out = trio.run(_run, checkout, launches, warmup)
    return {"checkout": str(checkout), "commit": commit, "web_module": origin,
            "started_at": time.strftime("%H:%M:%S", time.gmtime(started)),
            "loadavg_end": os.getloadavg(), **out}


def _pairs(base: Path, head: Path, pairs: int, launches: int,
           warmup: int) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    for i in range(pairs):
        order = [("base", base), ("head", head)] if i % 2 == 0 else [("head", head),
                                                                       ("base", base)]
        pair: dict[str, Any] = {"order": [side for side, _ in order]}
        for side, checkout in order:
            pair[side] = measure_checkout(checkout, launches, warmup)
            log(f"pair {i + 1} {side}: launch p50 {pair[side]['launch_ms']['p50']:.1f} ms")
        runs.append(pair)
    out: dict[str, Any] = {"pairs": runs, "by_figure": {}}
    for f in FIGURES:
        base_p50 = [r["base"][f]["p50"] for r in runs]
        head_p50 = [r["head"][f]["p50"] for r in runs]
        ratios = [round(h / b, 3) for b, h in zip(base_p50, head_p50, strict=True)]
        added = [round(h - b, 3) for b, h in zip(base_p50, head_p50, strict=True)]
        out["by_figure"][f] = {
            "base_p50_ms": base_p50, "head_p50_ms": head_p50,
            "ratio_per_pair": ratios, "added_ms_per_pair": added,
            "ratio_median": round(statistics.median(ratios), 3),
            "added_ms_median": round(statistics.median(added), 3),
            "base_p90_ms": [r["base"][f]["p90"] for r in runs],
            "head_p90_ms": [r["head"][f]["p90"] for r in runs],
        }
    return out


def _report_run(r: dict[str, Any]) -> str:
    figures = ", ".join(f"{f} p50 {r[f]['p50']:.1f} p90 {r[f]['p90']:.1f}" for f in FIGURES)
    leader = " ".join(r["agent_group_leader"][:4])
    return f"{r['commit']} ({r['web_module']}): {figures}; leader {leader}"


def _report_pairs(out: dict[str, Any]) -> str:
    lines = [f"pair {i + 1} {side}: {_report_run(p[side])}"
             for i, p in enumerate(out["pairs"]) for side in p["order"]]
    for f, s in out["by_figure"].items():
        lines.append(f"{f}: head/base per pair {s['ratio_per_pair']} (median "
                     f"{s['ratio_median']}); added ms per pair {s['added_ms_per_pair']} "
                     f"(median {s['added_ms_median']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.session_start",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, default=REPO_ROOT,
                        help="the checkout whose server runs (default: this one)")
    parser.add_argument("--base", type=Path,
                        help="alternate runs of this checkout and --checkout, in pairs")
    parser.add_argument("--pairs", type=int, default=4, help="pairs with --base (default 4)")
    parser.add_argument("--launches", type=int, default=10, help="measured launches a run")
    parser.add_argument("--warmup", type=int, default=2, help="launches not counted, a run")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    for d in (args.checkout, args.base):
        if d is not None and not (d / "web" / "__init__.py").is_file():
            parser.error(f"{d} is not a Turnvisor checkout (no web/__init__.py)")
    command = " ".join(["python -m bench.session_start", *(argv or sys.argv[1:])])
    out: dict[str, Any]
    if args.base is not None:
        out = _pairs(args.base.resolve(), args.checkout.resolve(), args.pairs,
                     args.launches, args.warmup)
        text = _report_pairs(out)
    else:
        out = measure_checkout(args.checkout.resolve(), args.launches, args.warmup)
        text = _report_run(out)
    out = {"command": command, "cpus": os.cpu_count(), **out}
    print(text)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
