"""An image attachment through the real server to the agent's stdin (issue 43, Measure).

    python -m bench.attachments [--mb 5] [--runs 3] [--agent mock] [--executor agentctl]
                                [--json PATH]

Starts ``turnvisor serve`` (a subprocess, on loopback) and, per run, uploads an image of
``--mb`` MB (``POST /api/v1/attachments``), then sends it with ``message.add
{attachments}`` to a session of the mock agent whose ``/attachments`` turn answers what its
prompt carried (the image's decoded size: the whole image reached the agent).  Per run:

- ``upload_ms``: the POST's round trip (the body streamed to the data dir);
- ``turn_ms``: ``message.add`` sent → the turn's answer reached this client (the image read,
  encoded, written to the agent's stdin, decoded by the mock, its answer back);
- the backend's peak RSS growth over each step: ``/proc/PID/clear_refs`` (5) resets the
  process's peak (VmHWM) to its current RSS just before the step; the peak after it, less
  the RSS before, is what the step held at most at once.  Target: the send's growth at most twice
  the attachment (issue 43).  The server runs with ``MALLOC_MMAP_THRESHOLD_=131072``: each
  buffer of 128 KiB or more is its own mapping, returned when freed, so RSS follows the
  large buffers alive (glibc's default threshold rises after a free, and a later run would
  reuse the freed heap unseen).

In the same run, ``offers``: the cancel's end to end (``agent.cancel`` request → response,
a ``/delay 30000`` turn cancelled after its first chunk, as bench/cancel_latency.py's
latency phase) on a session of the mock, which offers its options (mode, model) and
commands, against a session of the mock run with ``--no-offers``, which offers neither;
alternating blocks (the order flips each block), reported as both summaries and their
ratio.  Target: unchanged (ratio about 1).

``--executor agentctl``: the mock behind a local agentctl spawned per session (the image goes
as base64 in ``POST /api/v1/prompt``'s JSON body; the backend's growth is then that body's).

The figures are printed and, with ``--json``, written; docs/performance.md records them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import trio

from supervisor.profiles import BUILTIN_PROFILES
from tests.support.serverproc import server_process
from tests.support.ws import WsClient, open_client

from .executors import executor_toml
from .harness import QUICK, Bench
from .measure import log
from .stats import percentile, summary

__all__ = ["main", "run"]

MB = 1024 * 1024
#: Uploads of up to 10 MB are the default cap; the bench's own cap leaves room above --mb.
CAP_TOML = "[limits]\nmax_attachment_bytes = {cap}\n"


def _status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of ``pid``, in bytes."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0]) * 1024
    return out


def _reset_peak(pid: int) -> int:
    """Reset ``pid``'s peak RSS to its current RSS (Linux ≥ 4.0); that RSS, in bytes."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")
    return _status(pid)["VmRSS"]


def _image(size: int) -> bytes:
    """``size`` bytes that are a PNG by their signature (the upload's sniffing) and do not
    compress (random, as a screenshot's pixels nearly are)."""
    head = b"\x89PNG\r\n\x1a\n"
    return head + os.urandom(size - len(head))


async def _upload(client: httpx.AsyncClient, data: bytes) -> str:
    r = await client.post("/api/v1/attachments", params={"name": "shot.png"}, content=data,
                          headers={"Content-Type": "image/png"})
    if r.status_code != 201:
        raise RuntimeError(f"upload refused: {r.status_code} {r.text}")
    return str(r.json()["attachment_id"])


async def _turn(ws: WsClient, sid: str, attachment: str) -> str:
    """``message.add`` of ``/attachments`` with the image; the agent's answer."""
    done = ws.watch(lambda f: f.get("action") == "session.turn.completed"
                    and f["payload"].get("session_id") == sid)
    answer = await ws.call("message.add", {"session_id": sid, "content": "/attachments",
                                           "attachments": [attachment]})
    await done.wait(120)
    msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
    return "".join(m["content"] for m in msgs
                   if m["turn_id"] == answer["turn_id"] and m["role"] == "agent")


async def run(mb: float, runs: int, agent: str, executor: str = "local") -> dict[str, Any]:
    size = int(mb * MB)
    toml = CAP_TOML.format(cap=max(size * 2, 10 * MB)) + (executor_toml(executor) or "")
    samples: dict[str, list[float]] = {"upload_ms": [], "turn_ms": [],
                                       "upload_peak_growth_mb": [],
                                       "send_peak_growth_mb": []}
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}
    async with server_process(agent=agent, toml=toml, log_level="WARNING",
                              base_env=env) as server, \
            trio.open_nursery() as nursery, \
            httpx.AsyncClient(base_url=server.url, timeout=120,
                              headers={"Authorization": f"Bearer {server.token}"}) as client:
        log(f"server pid {server.pid} at {server.url}")
        ws = await open_client(nursery, server, keep=False)
        task = await ws.call("task.create", {"title": "bench attachments"})
        sid = str((await ws.call("session.launch", {"task_id": task["id"],
                                                    "agent": agent}))["id"])
        await ws.call("session.subscribe", {"session_id": sid})
        baseline_rss = _status(server.pid)["VmRSS"]
        for i in range(runs + 1):  # the first is a warm-up, not counted
            data = _image(size)
            before = _reset_peak(server.pid)
            t0 = time.perf_counter()
            attachment = await _upload(client, data)
            upload_ms = (time.perf_counter() - t0) * 1000
            upload_growth = _status(server.pid)["VmHWM"] - before
            before = _reset_peak(server.pid)
            t0 = time.perf_counter()
            said = await _turn(ws, sid, attachment)
            turn_ms = (time.perf_counter() - t0) * 1000
            send_growth = _status(server.pid)["VmHWM"] - before
            want = f"image image/png {size}"
            if want not in said:
                raise RuntimeError(f"the agent got {said!r}, not {want!r}")
            log(f"run {i}: upload {upload_ms:.1f} ms (+{upload_growth / MB:.1f} MB peak), "
                f"send {turn_ms:.1f} ms (+{send_growth / MB:.1f} MB peak)"
                + (" [warm-up]" if i == 0 else ""))
            if i == 0:
                continue
            samples["upload_ms"].append(round(upload_ms, 3))
            samples["turn_ms"].append(round(turn_ms, 3))
            samples["upload_peak_growth_mb"].append(round(upload_growth / MB, 3))
            samples["send_peak_growth_mb"].append(round(send_growth / MB, 3))
        final_rss = _status(server.pid)["VmRSS"]
        await ws.aclose()
        nursery.cancel_scope.cancel()
    worst = max(samples["send_peak_growth_mb"])
    return {
        "agent": agent, "executor": executor, "attachment_mb": round(size / MB, 3),
        "runs": runs,
        **{k: summary(v) for k, v in samples.items()},
        "send_peak_growth_max_mb": worst,
        "send_peak_growth_max_ratio": round(worst * MB / size, 3),
        "target_ratio": 2.0,
        "rss_mb": {"after_launch": round(baseline_rss / MB, 1),
                   "after_runs": round(final_rss / MB, 1)},
        "samples": samples,
    }


def _bare_profile() -> str:
    """``[agents.mock-bare]``: the mock offering no options and no commands."""
    command = [*BUILTIN_PROFILES["mock"].command, "--no-offers"]
    return f'[agents.mock-bare]\nprotocol = "acp"\ncommand = {json.dumps(command)}\n'


async def offers(samples: int, blocks: int) -> dict[str, Any]:
    """The cancel's e2e with the mock's options and commands offered, and without."""
    async with server_process(agent="mock", toml=_bare_profile(), log_level="WARNING") \
            as server, trio.open_nursery() as nursery:
        bench = Bench(server, nursery, QUICK, ["mock", "mock-bare"])
        try:
            bench.main = await bench.conn()
            bench.task_id = (await bench.main.call("task.create", {"title": "offers"}))["id"]
            sessions = {a: await bench.launch(a) for a in ("mock", "mock-bare")}
            listed = {str(d["id"]): d for d in (await bench.main.call(
                "session.list", {"task_id": bench.task_id}))["sessions"]}
            offered = {a: (len(listed[sid]["options"]), len(listed[sid]["commands"]))
                       for a, sid in sessions.items()}
            if offered["mock-bare"] != (0, 0) or 0 in offered["mock"]:
                raise RuntimeError(f"options and commands offered: {offered}")
            for sid in sessions.values():
                await bench.main.call("session.subscribe", {"session_id": sid})
                for _ in range(3):  # warm the path
                    await bench.e2e_sample(bench.main, sid)
            per_block = max(samples // blocks, 1)
            got: dict[str, list[float]] = {"mock": [], "mock-bare": []}
            block_p50: dict[str, list[float]] = {"mock": [], "mock-bare": []}
            for block in range(blocks):
                order = ["mock", "mock-bare"] if block % 2 == 0 else ["mock-bare", "mock"]
                for agent in order:
                    one = [(await bench.e2e_sample(bench.main, sessions[agent]))["response"]
                           for _ in range(per_block)]
                    got[agent] += one
                    block_p50[agent].append(round(percentile(one, 50), 3))
                log(f"offers: block {block + 1}/{blocks}")
        finally:
            bench.http.close()
        nursery.cancel_scope.cancel()
    with_, without = summary(got["mock"]), summary(got["mock-bare"])
    return {"offered": {a: {"options": o, "commands": c} for a, (o, c) in offered.items()},
            "with_offers_ms": with_, "without_offers_ms": without,
            "ratio_p50_with_vs_without": round(with_["p50"] / without["p50"], 3),
            "ratio_p99_with_vs_without": round(with_["p99"] / without["p99"], 3),
            "blocks": blocks, "block_p50_ms": block_p50, "samples_ms": got}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.attachments",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=5.0, help="the image's size in MB")
    parser.add_argument("--runs", type=int, default=3, help="measured runs (after a warm-up)")
    parser.add_argument("--agent", default="mock",
                        help="the mock profile (mock, mock-codex, mock-acp2)")
    parser.add_argument("--executor", choices=("local", "agentctl"), default="local",
                        help="the attachment's agent: a child of the server, or behind a "
                             "local agentctl")
    parser.add_argument("--cancels", type=int, default=200,
                        help="cancels per session kind in the offers measurement (0: skip)")
    parser.add_argument("--blocks", type=int, default=4, help="alternating blocks of them")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    started = time.time()
    result = trio.run(run, args.mb, args.runs, args.agent, args.executor)
    if args.cancels:
        result["offers"] = trio.run(offers, args.cancels, args.blocks)
    result = {"command": " ".join(["python -m bench.attachments", *(argv or sys.argv[1:])]),
              **result,
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "loadavg": os.getloadavg(),
                          "duration_s": round(time.time() - started, 1)}}
    print(f"attachment {result['attachment_mb']} MB to {result['agent']} "
          f"({result['executor']}), "
          f"{result['runs']} runs:")
    for key in ("upload_ms", "turn_ms", "upload_peak_growth_mb", "send_peak_growth_mb"):
        s = result[key]
        print(f"  {key:24s} p50 {s['p50']:9.1f}  max {s['max']:9.1f}")
    print(f"  send's peak RSS growth, worst: {result['send_peak_growth_max_mb']} MB = "
          f"{result['send_peak_growth_max_ratio']} times the attachment (target: at most 2)")
    if "offers" in result:
        o = result["offers"]
        print(f"cancel e2e (agent.cancel response), {o['with_offers_ms']['n']} each:")
        for key in ("with_offers_ms", "without_offers_ms"):
            print(f"  {key:24s} p50 {o[key]['p50']:9.3f}  p99 {o[key]['p99']:9.3f}")
        print(f"  ratio with/without: p50 {o['ratio_p50_with_vs_without']}, "
              f"p99 {o['ratio_p99_with_vs_without']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
