"""Agents spread over executors, in one run (issue 44 item 5, "Measure").

    python -m bench.executor_scale [--quick] [--json PATH] [--sessions N] [--samples N]

One real ``turnvisor serve`` (a subprocess on loopback) with the mock agent
on each executor measured:

- ``local``: the agent is the server's child (the built-in ``mock``);
- ``agentctl``: a local ``turnvisor agentctl`` spawned per session (what the
  ssh executor runs on its host, without the ssh hop: the two apart show
  what is agentctl's and what is the SSH transport's);
- ``ssh``: the agent behind a detached ``turnvisor agentctl`` on an SSH host,
  this machine through a real ``sshd`` on a loopback port (the ssh tests'
  helper, tests/ssh/sshd.py: its own host key, client key and config);
- ``kubernetes`` (``--kube``): a Pod per session on the Kubernetes stand-in
  (tests/support/kube_standin.py, in this process; its Pods' containers run
  with Podman from the agent image scripts/build_agent_image.sh builds),
  reached through the stand-in's Pod proxy.  Without ``--kube``, or without
  that image or Podman, it is reported as skipped with the reason.

Figures, per executor:

- ``launch_ms``: ``session.launch`` up to the first prompt's first output (the
  agent started, its session made, a turn streaming: what a person waits for);
- sessions and live agents held: ``--sessions`` of each, every one with its
  agent up (a turn done); the live agents counted where they run (the
  server's descendants; the host's detached agentctls);
- ``rss_per_session_kib``: the backend's RSS growth over those sessions, per
  session (the agents' own memory is theirs, not the backend's);
- ``cancel_e2e_ms``: the cancel of a ``/delay`` turn after its first chunk,
  request sent to ``agent.cancel``'s response and to WAITING_FOR_INPUT,
  executors interleaved sample by sample so both meet the same machine; the
  ssh target is ssh ≤ local + 1 ms (p50, response) on loopback;
- ``ssh_after_cut``: the same cancels, local and ssh interleaved, once the ssh
  host was cut off (its sshd and every connection killed) and answers again:
  the backend's new shared connection carries the forward alone;
- ``hop``: the SSH connection's own share, apart from agentctl's
  (bench/ssh_hop.py: an echo server's round trips direct and through a
  forward over the product's ``SshHost``);
- ``load_average`` at the start and the end (the machine is shared).

The host runs this checkout's agentctl (``PYTHONPATH`` set for it), so
``PYTHONPATH=TREE python -m bench.executor_scale`` from a ``git archive`` of
another commit measures that commit, ssh side included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import trio

from tests.kube.kube_support import NAMESPACE, AgentImage, cluster
from tests.ssh.sshd import Sshd, running_sshd, ssh_profile
from tests.support.serverproc import server_process
from tests.support.ws import WsClient, is_agent_output

from . import ssh_hop
from .cancel_latency import BENCH_LIMITS
from .floors import REPO_ROOT
from .harness import QUICK, Bench
from .measure import log, ms, raise_nofile
from .stats import summary

__all__ = ["main"]

#: Profile per executor measured.
PROFILES = {"local": "mock", "agentctl": "mock-agentctl", "ssh": "mock-ssh"}
KUBE_PROFILE = "mock-kube"
#: Between the two answers of the hop's "two" exchange (bench/ssh_hop.py).
HOP_GAP_MS = 1.0
KUBE_SKIPPED = "not asked for (--kube: Pods on the stand-in, their containers with Podman)"


def server_toml(sshd: Sshd, kube: tuple[Path, str] | None = None) -> str:
    profile = {**ssh_profile(sshd), "protocol": "acp",
               "command": [sys.executable, "-m", "protocols.mock_agent", "--protocol", "acp"],
               # The host runs this checkout's agentctl (an sshd login does not
               # inherit PYTHONPATH): the bench of another tree measures that tree.
               "remote_turnvisor": ["env", f"PYTHONPATH={REPO_ROOT}", sys.executable, "-m",
                                    "web"]}
    lines = [f"[agents.{PROFILES['ssh']}]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in profile.items()]
    lines += [f"[agents.{PROFILES['agentctl']}]", 'executor = "agentctl"', 'protocol = "acp"',
              f"command = {json.dumps(profile['command'])}"]
    if kube is not None:
        config, image = kube
        lines += [f"[agents.{KUBE_PROFILE}]", 'executor = "kubernetes"', 'protocol = "acp"',
                  f"image = {json.dumps(image)}", f"kubeconfig = {json.dumps(str(config))}",
                  'command = ["python", "-m", "protocols.mock_agent", "--protocol", "acp"]']
    # Idle agents are what is held: none is stopped for idleness meanwhile.
    return BENCH_LIMITS + "[timeouts]\nidle_agent_s = 86400\n" + "\n".join(lines) + "\n"


async def launch_live(bench: Bench, conn: WsClient, agent: str) -> tuple[str, float]:
    """A session of ``agent`` with its agent up; ms from launch to first output."""
    start = time.perf_counter()
    sid = await bench.launch(agent)
    await conn.call("session.subscribe", {"session_id": sid})
    first = conn.watch(is_agent_output(sid))
    await conn.call("message.add", {"session_id": sid, "content": "hello"})
    await first.wait(60)
    took = time.perf_counter() - start
    return sid, ms(took)


def live_groups(processes: list[psutil.Process]) -> int:
    """How many agents run among ``processes`` (one process group each; the
    wrappers around an agent are in its group)."""
    groups = set()
    for p in processes:
        try:
            line = " ".join(p.cmdline())
            if "mock_agent" in line and "agentctl" not in line:  # not agentctl itself
                groups.add(os.getpgid(p.pid))
        except (psutil.Error, ProcessLookupError):
            pass
    return len(groups)


def host_agentctls(sshd: Sshd) -> int:
    runs = sshd.remote_data / "agentctl"
    return sum(1 for inst in runs.iterdir() for _ in inst.iterdir()) if runs.is_dir() else 0


def kube_skipped() -> tuple[str | None, str]:
    """(Podman, the agent image) for ``--kube``, or (None, why it is skipped)."""
    podman = shutil.which("podman")
    if podman is None:
        return None, "podman is not installed (scripts/install_container_deps.sh)"
    # Built for this checkout as the kube tests build it (cached: seconds when it is).
    build = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "build_agent_image.sh")],
                           capture_output=True, text=True, timeout=900, check=False)
    if build.returncode != 0:
        return None, f"scripts/build_agent_image.sh failed: {build.stderr.strip()[-300:]}"
    return podman, build.stdout.strip().splitlines()[-1]


async def measure_all(sshd: Sshd, sessions: int, samples: int, kube: bool,
                      tmp: Path) -> dict[str, Any]:
    """``measure``, with the Kubernetes stand-in up around it when ``kube``."""
    if not kube:
        return await measure(sshd, sessions, samples)
    podman, image = kube_skipped()
    if podman is None:
        out = await measure(sshd, sessions, samples)
        out["kubernetes"] = {"skipped": image}
        return out
    async with cluster(tmp / "kube", AgentImage(image=image, podman=podman)) as c:
        return await measure(sshd, sessions, samples,
                             (c.kubeconfig, image, lambda: len(c.standin.pods(NAMESPACE))))


async def measure(sshd: Sshd, sessions: int, samples: int,
                  kube: tuple[Path, str, Callable[[], int]] | None = None) -> dict[str, Any]:
    """``kube``: the stand-in's kubeconfig, the agent image and its Pods'
    count (None: skipped)."""
    raise_nofile()
    out: dict[str, Any] = {"executors": {}}
    if kube is None:
        out["kubernetes"] = {"skipped": KUBE_SKIPPED}
    profiles = {**PROFILES, **({"kubernetes": KUBE_PROFILE} if kube else {})}
    async with server_process(toml=server_toml(sshd, kube[:2] if kube else None),
                              log_level="WARNING") as server, \
            trio.open_nursery() as nursery:
        log(f"server pid {server.pid} at {server.url}")
        bench = Bench(server, nursery, QUICK, ["mock"])
        conns: list[WsClient] = []
        try:
            bench.main = await bench.conn()
            conns.append(bench.main)
            bench.task_id = str((await bench.main.call("task.create",
                                                       {"title": "executor scale"}))["id"])
            conn = await bench.conn()
            conns.append(conn)
            ps = server.ps()
            before = 0  # live agents of the executors measured before
            await trio.sleep(0.5)
            for executor, agent in profiles.items():
                rss0 = ps.memory_info().rss
                launches: list[float] = []
                held: list[str] = []
                for _ in range(sessions):
                    sid, took = await launch_live(bench, conn, agent)
                    launches.append(took)
                    held.append(sid)
                await trio.sleep(1.0)  # the turns' last writes settle
                grown = ps.memory_info().rss - rss0
                live = (host_agentctls(sshd) if executor == "ssh"
                        else kube[2]() if kube and executor == "kubernetes"
                        else live_groups(server.agents()) - before)
                if executor in ("local", "agentctl"):
                    before += live
                out["executors"][executor] = {
                    "launch_ms": summary(launches), "sessions_held": len(held),
                    "live_agents": live, "rss_per_session_kib": round(grown / 1024 / sessions, 1)}
                log(f"{executor}: {sessions} sessions held, {live} live agents, backend RSS "
                    f"+{grown / 1024 / sessions:.0f} KiB/session, launch p50 "
                    f"{out['executors'][executor]['launch_ms']['p50']} ms")
            # The cancels, executors interleaved sample by sample.
            cancel_on = {ex: await launch_live(bench, conn, agent)
                         for ex, agent in profiles.items()}
            e2e: dict[str, list[dict[str, float]]] = {ex: [] for ex in profiles}
            for i in range(samples + 3):
                for ex, (sid, _) in cancel_on.items():
                    sample = await bench.e2e_sample(conn, sid)
                    if i >= 3:  # the first ones warm the path up
                        e2e[ex].append(sample)
            for ex, got in e2e.items():
                out["executors"][ex]["cancel_e2e_ms"] = {
                    stage: summary([s[stage] for s in got])
                    for stage in ("response", "waiting")}
            out["ssh_after_cut"] = await after_cut(bench, conn, sshd, cancel_on, samples)
            local, agentctl, ssh = (out["executors"][ex]["cancel_e2e_ms"]["response"]["p50"]
                                    for ex in ("local", "agentctl", "ssh"))
            out["ssh_minus_local_p50_ms"] = round(ssh - local, 3)
            out["ssh_minus_agentctl_p50_ms"] = round(ssh - agentctl, 3)
            out["target_ssh_within_local_plus_1ms"] = ssh - local <= 1.0
            out["backend_rss_mib"] = round(ps.memory_info().rss / 2**20, 1)
        finally:
            bench.http.close()
            for c in conns:
                await c.aclose()
            nursery.cancel_scope.cancel()
    return out


async def reachable(conn: WsClient, task_id: str, sid: str) -> bool:
    listed = await conn.call("session.list", {"task_id": task_id})
    return bool(next(s for s in listed["sessions"] if s["id"] == sid)["reachable"])


async def until_reachable(conn: WsClient, task_id: str, sid: str, wanted: bool) -> None:
    with trio.fail_after(120):
        while await reachable(conn, task_id, sid) != wanted:
            await trio.sleep(0.2)


async def after_cut(bench: Bench, conn: WsClient, sshd: Sshd,
                    cancel_on: dict[str, tuple[str, float]], samples: int) -> dict[str, Any]:
    """The cancels again, local and ssh interleaved, once the ssh host was cut
    off (sshd and its connections killed) and answers again: the backend's
    new shared connection then carries the forward alone (``reforward``)."""
    sid = cancel_on["ssh"][0]
    await trio.to_thread.run_sync(sshd.stop)
    await until_reachable(conn, bench.task_id, sid, False)
    await trio.to_thread.run_sync(sshd.start)
    await until_reachable(conn, bench.task_id, sid, True)
    e2e: dict[str, list[float]] = {"local": [], "ssh": []}
    for i in range(samples + 3):
        for ex in e2e:
            sample = await bench.e2e_sample(conn, cancel_on[ex][0])
            if i >= 3:
                e2e[ex].append(sample["response"])
    out: dict[str, Any] = {f"{ex}_cancel_response_ms": summary(v) for ex, v in e2e.items()}
    out["ssh_minus_local_p50_ms"] = round(out["ssh_cancel_response_ms"]["p50"]
                                          - out["local_cancel_response_ms"]["p50"], 3)
    log(f"after the cut: cancel→response p50 local {out['local_cancel_response_ms']['p50']}"
        f", ssh {out['ssh_cancel_response_ms']['p50']} ms")
    return out


def report(out: dict[str, Any]) -> str:
    lines = ["executor     held  live  launch p50/p90 ms   RSS/session KiB   cancel→response "
             "p50/p90 ms   →waiting p50 ms"]
    for ex, f in out["executors"].items():
        c = f["cancel_e2e_ms"]
        lines.append(f"{ex:<12} {f['sessions_held']:>4}  {f['live_agents']:>4}  "
                     f"{f['launch_ms']['p50']:>8.1f}/{f['launch_ms']['p90']:<8.1f}  "
                     f"{f['rss_per_session_kib']:>15.1f}   "
                     f"{c['response']['p50']:>8.2f}/{c['response']['p90']:<8.2f}        "
                     f"{c['waiting']['p50']:>8.2f}")
    if "kubernetes" in out:
        lines.append(f"kubernetes   skipped: {out['kubernetes']['skipped']}")
    verdict = "met" if out["target_ssh_within_local_plus_1ms"] else "NOT met"
    lines.append(f"ssh - local, cancel→response p50: {out['ssh_minus_local_p50_ms']:+.3f} ms "
                 f"(target ≤ +1 ms: {verdict}; ssh - agentctl: "
                 f"{out['ssh_minus_agentctl_p50_ms']:+.3f} ms); backend RSS at the end "
                 f"{out['backend_rss_mib']} MiB")
    cut = out["ssh_after_cut"]
    lines.append(f"after a cut (a new shared connection, the forward alone): cancel→response "
                 f"p50/p90 local {cut['local_cancel_response_ms']['p50']:.2f}/"
                 f"{cut['local_cancel_response_ms']['p90']:.2f}, ssh "
                 f"{cut['ssh_cancel_response_ms']['p50']:.2f}/"
                 f"{cut['ssh_cancel_response_ms']['p90']:.2f} ms (ssh - local "
                 f"{cut['ssh_minus_local_p50_ms']:+.3f})")
    if "hop" in out:
        lines.append(ssh_hop.report(out["hop"]))
    if "load_average" in out:
        lines.append("load average at the start / the end: " + " / ".join(
            " ".join(f"{x:.2f}" for x in out["load_average"][at]) for at in ("start", "end")))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.executor_scale",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="10 sessions and 30 cancels per executor (a few minutes)")
    parser.add_argument("--sessions", type=int, help="sessions held per executor (override)")
    parser.add_argument("--samples", type=int, help="cancels per executor (override)")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--kube", action="store_true",
                        help="the kubernetes executor too, on the stand-in (Podman, the agent "
                             "image built)")
    args = parser.parse_args(argv)
    sessions = args.sessions or (10 if args.quick else 50)
    samples = args.samples or (30 if args.quick else 200)
    if sessions < 1 or samples < 1:
        parser.error("--sessions and --samples must be at least 1")
    load = [os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="tv-sshd-") as tmp, \
            running_sshd(Path(tmp) / "sshd") as sshd:
        out = trio.run(measure_all, sshd, sessions, samples, args.kube, Path(tmp))
        # The SSH connection's own share, apart from agentctl's (bench/ssh_hop.py).
        with ssh_hop.echo_server(Path(tmp) / "hop", HOP_GAP_MS) as remote:
            out["hop"] = trio.run(ssh_hop.measure_hop, sshd, remote,
                                  10 * samples if args.quick else 3 * samples)
            out["hop"]["gap_ms"] = HOP_GAP_MS
    load.append(os.getloadavg())
    out["load_average"] = {"start": load[0], "end": load[1]}
    out["command"] = "python -m bench.executor_scale " + " ".join(argv or sys.argv[1:])
    out["params"] = {"sessions": sessions, "samples": samples}
    print(report(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
