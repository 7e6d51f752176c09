"""Cancel latency against the physical floor, and how it scales (issues 7 and 19).

    python -m bench.cancel_latency [--quick] [--json PATH] [--png PATH] [--agent NAME ...]
    python -m bench.cancel_latency --agent codex --agent gemini --samples 10 --json PATH
                                   [--phases latency,memory,...] [--samples N]
    python -m bench.cancel_latency --executor agentctl|container --phases latency

``--executor`` runs the mock profiles through agentctl or a container per
session (bench/executors.py); only the latency phase runs then.

Starts a real ``turnvisor serve`` as a subprocess on loopback and drives it
from trio-websocket clients in this process.  Everything is measured in one
run, so the ratios hold even on a shared, noisy machine:

- end to end, per cancel of a ``/delay 30000`` turn after its first chunk:
  request sent → pending-true notification, → ``agent.cancel`` response,
  → pending-false notification, → state WAITING_FOR_INPUT;
- the floors, interleaved with it: (a) the same mock agent driven over its
  pipes through protocols.adapters, cancel → ``cancelled``; (b) a WebSocket
  round trip (``ping``) to the same server;
- the server's own stage marks (GET /api/v1/debug/cancel-stages);
- scale: e2e with busy sessions streaming, bursts of cancels, a storm of
  duplicate cancels, fan-out to many subscribers, memory per idle session, the
  server's CPU per streamed chunk with many sessions streaming (bench/streaming.py);
- the cancel with a message queued behind the turn (bench/queued.py) and on a
  session whose agent was restored (bench/restored.py), each against plain
  samples interleaved with it;
- the official ACP SDK (asyncio, its own process) against our adapter, and a
  minimal asyncio WebSocket server on that SDK against our whole path
  (bench/peer_e2e.py).

The targets block and the text report are in bench/report.py.

``--agent codex|auggie|claude|gemini`` measures the real CLIs (installed by
scripts/install_agents.sh) against the tests' fake model provider
(bench/real_agents.py): a ``SLOW`` turn cancelled after its first streamed
token, end to end and on the agent's pipes (floor (a)) in the same run, plus
when the model's HTTP stream was closed.  Only the latency phase runs then.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import trio

from tests.support.serverproc import server_process

from .checkpointed import project_toml
from .executors import EXECUTORS, executor_toml
from .floors import REPO_ROOT
from .harness import FULL, MOCK_PROFILES, PHASES, QUICK, Bench, Params
from .latency import outside_stages, stage_summary
from .measure import log, raise_nofile
from .phases import run_phases
from .real_agents import REAL_AGENTS, missing, not_installed_message, real_setup
from .report import report, targets
from .stats import percentile, summary


async def run_peer(params: Params) -> dict[str, Any]:
    """Our adapter and the ACP SDK, each in its own process, in alternating blocks."""
    per_block = max(params.peer_samples // params.peer_blocks, 1)
    samples: dict[str, list[float]] = {"turnvisor": [], "acp-sdk": []}
    blocks: dict[str, list[float]] = {"turnvisor": [], "acp-sdk": []}
    for block in range(params.peer_blocks):
        order = ["turnvisor", "acp-sdk"] if block % 2 == 0 else ["acp-sdk", "turnvisor"]
        for impl in order:
            proc = await trio.run_process(
                [sys.executable, "-m", "bench.floors", "--impl", impl, "--protocol", "acp",
                 "--samples", str(per_block)],
                capture_stdout=True, cwd=str(REPO_ROOT))
            got = json.loads(proc.stdout)["samples_ms"]
            samples[impl] += got
            blocks[impl].append(round(percentile(got, 50), 3))
    tv, sdk = summary(samples["turnvisor"]), summary(samples["acp-sdk"])
    return {
        "turnvisor_adapter_ms": tv, "acp_sdk_ms": sdk,
        "ratio_p50_turnvisor_vs_sdk": round(tv["p50"] / sdk["p50"], 3),
        "ratio_p99_turnvisor_vs_sdk": round(tv["p99"] / sdk["p99"], 3),
        "block_p50_ms": blocks, "samples_ms": samples, "blocks": params.peer_blocks,
    }


#: The dialects measured by default: ACP v1, Codex, ACP v2 (the mock in each).
DEFAULT_AGENTS = ("mock", "mock-codex", "mock-acp2")
#: The fan-out phase opens 1,000 WebSockets, all from this one address.
#: The bench's server: connections unbounded per peer, the cancel path's
#: tracing hook on (the stage marks, GET /api/v1/debug/cancel-stages).
BENCH_LIMITS = ("[limits]\nmax_connections_per_peer = 100000\n"
                "[server]\ntrace_cancels = true\n")


async def bench_main(params: Params, agents: list[str], phases: set[str],
                     executor_config: str | None = None,
                     client: str = "lean") -> dict[str, Any]:
    results: dict[str, Any] = {}
    if phases - {"peer"}:
        with contextlib.ExitStack() as stack:
            real = (stack.enter_context(real_setup(agents))
                    if any(a in REAL_AGENTS for a in agents) else None)
            projects = (Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix="turnvisor-bench-projects-")))
                if "checkpointed" in phases else None)
            async with server_process(
                agent=agents[0],
                toml=BENCH_LIMITS + (project_toml(projects) if projects else "")
                + ((real.config_toml if real else executor_config) or ""),
                log_level="WARNING",
                base_env=real.server_env if real else None,
            ) as server, trio.open_nursery() as nursery:
                log(f"server pid {server.pid} at {server.url}")
                bench = Bench(server, nursery, params, agents, real, client, projects)
                try:
                    results = await run_phases(bench, phases)
                    results["client"] = client
                finally:
                    bench.http.close()
                nursery.cancel_scope.cancel()
    if "peer" in phases:
        log("peer: Turnvisor adapter vs the ACP SDK")
        results["peer"] = await run_peer(params)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cancel_latency",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples, smaller N (<1 min)")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--png", type=Path, help="write the plot here")
    parser.add_argument("--agent", action="append", choices=[*MOCK_PROFILES, *REAL_AGENTS],
                        help="agent profile(s) to measure (default: mock, mock-codex and "
                             "mock-acp2, the mock speaking ACP 1, Codex and ACP 2); "
                             "the first one also runs the scale phases.  A real agent "
                             f"({', '.join(REAL_AGENTS)}) runs against a fake model provider "
                             "on 127.0.0.1, latency phase only, 10 samples by default")
    parser.add_argument("--samples", type=int, help="latency samples per dialect (override)")
    parser.add_argument("--phases", default=",".join(PHASES),
                        help=f"comma-separated subset of {','.join(PHASES)} (default: all)")
    parser.add_argument("--executor", choices=EXECUTORS, default="local",
                        help="how the mock agents run: local (children of the server), "
                             "agentctl (one spawned per session) or container (one container "
                             "per session; DOCKER_HOST names the engine); latency phase only "
                             "unless local")
    parser.add_argument("--image", help="the container executor's image (default: the tag "
                                        "scripts/build_agent_image.sh builds for this checkout)")
    parser.add_argument("--client", choices=("lean", "trio-websocket"), default="lean",
                        help="the requesting connections' WebSocket client: lean (frames "
                             "parsed from the socket, bench/lean_client.py) or trio-websocket "
                             "(the figures before run F)")
    args = parser.parse_args(argv)
    phases = set(args.phases.split(","))
    if not phases <= set(PHASES):
        parser.error(f"unknown phase(s): {', '.join(sorted(phases - set(PHASES)))}")
    agents = args.agent or list(DEFAULT_AGENTS)
    params = QUICK if args.quick else FULL
    if args.samples:
        params = dataclasses.replace(params, samples=args.samples)
    if any(a in REAL_AGENTS for a in agents):
        if absent := missing(agents):
            parser.error(not_installed_message(absent))
        # A real agent turn takes a second; the scale phases would start hundreds of CLIs.
        if dropped := sorted(phases - {"latency"}):
            log(f"real agents: only the latency phase runs (not {','.join(dropped)})")
        phases = {"latency"}
        params = dataclasses.replace(params, samples=args.samples or 10, warmup=1)
    executor_config = executor_toml(args.executor, args.image)
    if executor_config is not None:
        if any(a in REAL_AGENTS for a in agents):
            parser.error("--executor applies to the mock agents only")
        # The scale phases would start hundreds of agentctls (or containers).
        phases &= {"latency"}
        if not phases:
            parser.error("--executor measures the latency phase only")
    # The client's GC runs less often, so that it is not what the figures measure.
    gc.set_threshold(20_000, 50, 100)
    nofile = raise_nofile()
    started = time.time()
    load0 = os.getloadavg()
    results = trio.run(bench_main, params, agents, phases, executor_config, args.client)
    primary = results["latency"]["dialects"][agents[0]] if "latency" in results else None
    results = {
        "command": " ".join(["python -m bench.cancel_latency", *(argv or sys.argv[1:])]),
        "primary_agent": agents[0],
        "executor": args.executor,
        "floor_ms": primary["floor_ms"] if primary else None,
        "e2e_p50_ms": primary["e2e_ms"]["response"]["p50"] if primary else None,
        "e2e_p99_ms": primary["e2e_ms"]["response"]["p99"] if primary else None,
        "ratio_p50": primary["ratio_p50"] if primary else None,
        "ratio_p99": primary["ratio_p99"] if primary else None,
        **results,
        "params": asdict(params),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "loadavg_start": load0, "loadavg_end": os.getloadavg(),
                    "nofile": nofile, "duration_s": round(time.time() - started, 1),
                    "client_gc": "threshold (20000, 50, 100); frozen during the storm and "
                                 "fan-out measurements"},
    }
    results["targets"] = targets(results)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.png and phases == set(PHASES):
        from .plot import plot

        plot(results, args.png)
    return 0


__all__ = ["Bench", "main", "outside_stages", "stage_summary"]

if __name__ == "__main__":
    sys.exit(main())
