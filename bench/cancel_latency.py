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
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import trio

from supervisor.profiles import BUILTIN_PROFILES
from tests.support.serverproc import ServerProcess, server_process
from tests.support.ws import (
    Pending,
    WsClient,
    is_agent_output,
    is_cancellation,
    is_state,
    now,
    open_client,
)

from .checkpointed import checkpointed, project_toml
from .executors import EXECUTORS, executor_toml
from .fanout_floor import fanout_floor
from .floors import DELAY_PROMPT, REPO_ROOT, AdapterFloor, open_floor
from .lean_client import open_lean_client
from .lean_ws import (
    LeanConnection,
    LeanRequest,
    LeanSubscriber,
    open_lean,
    open_lean_connection,
    read_all,
)
from .measure import cpu_s, log, ms, raise_nofile
from .peer_e2e import peer_e2e
from .queued import queued
from .real_agents import (
    REAL_AGENTS,
    RealFloor,
    RealSetup,
    RealTurn,
    decline_permissions,
    missing,
    not_installed_message,
    open_real_floor,
    real_setup,
)
from .report import STAGES, report, targets
from .restored import restored
from .stats import percentile, summary
from .streaming import streaming

MOCK_PROFILES = sorted(n for n, p in BUILTIN_PROFILES.items()
                       if "protocols.mock_agent" in p.command)
BUSY_PROMPT = "/delay 600000"
STORM_PROMPT = "/slow 2000"
#: The fan-out's cancellation change, as its frame carries it (payload keys in order).
PENDING_TRUE = b'"cancellation_pending":true,"cancellation_revision"'
PENDING_FALSE = b'"cancellation_pending":false,"cancellation_revision"'
PHASES = ("latency", "memory", "busy", "burst", "storm", "fanout", "streaming", "queued",
          "restored", "checkpointed", "peer", "peer_e2e")
#: The phases that need the pool of idle sessions.
POOL_PHASES = {"memory", "busy", "burst", "streaming"}


@dataclass(frozen=True)
class Params:
    samples: int
    warmup: int
    busy_levels: tuple[int, ...]
    busy_samples: int
    busy_blocks: int
    burst_sizes: tuple[int, ...]
    storm_requests: int
    storm_conns: int
    fanout_sizes: tuple[int, ...]
    fanout_reps: int
    memory_checkpoints: tuple[int, ...]
    peer_samples: int
    peer_blocks: int
    streaming_sessions: int
    streaming_window_s: float
    queued_samples: int
    restored_samples: int
    peer_e2e_samples: int
    peer_e2e_blocks: int
    #: Files in the checkpointed phase's projects.
    checkpoint_files: int

    @property
    def pool(self) -> int:
        return max(*self.busy_levels, *self.burst_sizes, *self.memory_checkpoints,
                   self.streaming_sessions)


FULL = Params(samples=300, warmup=10, busy_levels=(0, 10, 50), busy_samples=100,
              busy_blocks=5, burst_sizes=(10, 50, 100), storm_requests=1000, storm_conns=10,
              fanout_sizes=(1, 100, 1000), fanout_reps=5, memory_checkpoints=(50, 100),
              peer_samples=400, peer_blocks=4, streaming_sessions=100, streaming_window_s=5.0,
              queued_samples=200, restored_samples=100, peer_e2e_samples=400,
              peer_e2e_blocks=4, checkpoint_files=10_000)
QUICK = Params(samples=30, warmup=3, busy_levels=(0, 10), busy_samples=20, busy_blocks=2,
               burst_sizes=(10,), storm_requests=1000, storm_conns=10,
               fanout_sizes=(1, 100), fanout_reps=3, memory_checkpoints=(10,),
               peer_samples=40, peer_blocks=2, streaming_sessions=20, streaming_window_s=3.0,
               queued_samples=20, restored_samples=15, peer_e2e_samples=40, peer_e2e_blocks=2,
               checkpoint_files=2_000)


class Bench:
    def __init__(self, server: ServerProcess, nursery: trio.Nursery, params: Params,
                 agents: list[str], real: RealSetup | None = None,
                 client: str = "lean", project_root: Path | None = None) -> None:
        self.server = server
        #: Where the checkpointed phase makes its projects (a root of the server's).
        self.project_root = project_root
        #: The requesting connections' client: "lean" (bench/lean_client.py) or
        #: "trio-websocket".
        self.client = client
        #: The fake provider and homes of the real agents (None: mock agents only).
        self.real = real
        self.nursery = nursery
        self.p = params
        self.agents = agents
        self.main: WsClient
        self.task_id = ""
        #: Per session: each e2e sample's (request written, response read) on
        #: this host's monotonic clock, to place the server's stages between them.
        self.e2e_clock: dict[str, list[tuple[float, float]]] = {}
        self.http = httpx.Client(base_url=server.url, timeout=30,
                                 headers={"Authorization": f"Bearer {server.token}"})

    # -- helpers --------------------------------------------------------------

    async def conn(self, nursery: trio.Nursery | None = None) -> WsClient:
        if self.client == "lean":
            host, port = self.server.url.removeprefix("http://").rsplit(":", 1)
            return await open_lean_client(nursery or self.nursery, host, int(port),
                                          self.server.token, keep=False)
        return await open_client(nursery or self.nursery, self.server, keep=False)

    def mock_agents(self) -> list[str]:
        """The measured dialects that are mock agents (the queued, restored and peer
        phases need the mock's commands)."""
        return [a for a in self.agents if a in MOCK_PROFILES]

    async def launch(self, agent: str) -> str:
        dto = await self.main.call("session.launch", {"task_id": self.task_id, "agent": agent})
        return str(dto["id"])

    async def launch_many(self, agent: str, n: int, limit: int = 4) -> list[str]:
        out: list[str] = []
        sem = trio.Semaphore(limit)

        async def one() -> None:
            async with sem:
                out.append(await self.launch(agent))

        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(one)
        return out

    async def stages(self, session_id: str, limit: int = 256) -> list[dict[str, Any]]:
        def get() -> list[dict[str, Any]]:
            r = self.http.get("/api/v1/debug/cancel-stages",
                              params={"session_id": session_id, "limit": limit})
            r.raise_for_status()
            ops: list[dict[str, Any]] = r.json()["operations"]
            return ops
        return await trio.to_thread.run_sync(get)

    def real_turn(self, agent: str) -> RealTurn | None:
        if agent not in REAL_AGENTS:
            return None
        assert self.real is not None
        return RealTurn(self.real.provider)

    async def start_turn(self, conn: WsClient, session_id: str, prompt: str,
                         first_output: Callable[[str], Callable[[dict[str, Any]], bool]]
                         = is_agent_output) -> None:
        """Send the prompt and return once its first output reached ``conn``."""
        first = conn.watch(first_output(session_id))
        await conn.call("message.add", {"session_id": session_id, "content": prompt})
        await first.wait(30)

    async def e2e_sample(self, conn: WsClient, session_id: str,
                         real: RealTurn | None = None,
                         before_cancel: Callable[[], Awaitable[None]] | None = None,
                         ) -> dict[str, float]:
        """One cancel after the first chunk (real agents: the first model token);
        ms from the request to each stage.  ``before_cancel`` runs between the first
        chunk and the cancel (the queued phase queues a message there)."""
        if real is None:
            await self.start_turn(conn, session_id, DELAY_PROMPT)
        else:
            await self.start_turn(conn, session_id, real.prompt, real.first_output)
            real.before_cancel()
        if before_cancel is not None:
            await before_cancel()
        w_true = conn.watch(is_cancellation(session_id, True))
        w_false = conn.watch(is_cancellation(session_id, False))
        w_wait = conn.watch(is_state(session_id, "WAITING_FOR_INPUT"))
        pending = await conn.send("agent.cancel", {"session_id": session_id})
        frame = await pending.wait(30)
        if frame["type"] != "response":
            raise RuntimeError(f"agent.cancel failed: {frame}")
        t0 = pending.sent_at
        self.e2e_clock.setdefault(session_id, []).append((t0, pending.answered_at))
        out = {
            "pending_true": ms(await w_true.wait() - t0),
            "response": ms(pending.answered_at - t0),
            "pending_false": ms(await w_false.wait() - t0),
            "waiting": ms(await w_wait.wait() - t0),
        }
        if real is not None:
            out.update(await real.after_cancel())
        return out

    async def ping_sample(self, conn: WsClient) -> float:
        pending = await conn.send("ping")
        await pending.wait()
        return pending.ms

    # -- phases ---------------------------------------------------------------

    async def memory_and_pool(self) -> tuple[list[str], list[dict[str, Any]]]:
        """Launch the idle pool; RSS of the backend and of its agents at each checkpoint."""
        ps = self.server.ps()
        before = {a.pid for a in self.server.agents()}
        await trio.sleep(0.5)
        rss0 = ps.memory_info().rss
        pool: list[str] = []
        out: list[dict[str, Any]] = []
        for k in self.p.memory_checkpoints:
            pool += await self.launch_many(self.agents[0], k - len(pool))
            await trio.sleep(1.0)
            rss = ps.memory_info().rss
            agents = [a for a in self.server.agents() if a.pid not in before]
            agent_rss, agent_uss = [], []
            for a in agents:
                try:
                    info = a.memory_full_info()
                except Exception:
                    continue
                agent_rss.append(info.rss)
                agent_uss.append(info.uss)
            out.append({
                "idle_sessions": k,
                "backend_rss_before_mb": round(rss0 / 2**20, 2),
                "backend_rss_after_mb": round(rss / 2**20, 2),
                "backend_kb_per_session": round((rss - rss0) / k / 1024, 1),
                "agents_counted": len(agent_rss),
                "agent_rss_mb_mean": round(statistics.fmean(agent_rss) / 2**20, 2)
                if agent_rss else None,
                "agent_uss_mb_mean": round(statistics.fmean(agent_uss) / 2**20, 2)
                if agent_uss else None,
            })
            log(f"memory: {out[-1]}")
        if len(pool) < self.p.pool:  # the streaming phase may need more than memory did
            pool += await self.launch_many(self.agents[0], self.p.pool - len(pool))
        return pool, out

    async def latency(self, sessions: dict[str, str]) -> dict[str, Any]:
        """E2E per dialect, floor (a) per dialect, floor (b): interleaved."""
        e2e: dict[str, list[dict[str, float]]] = {a: [] for a in self.agents}
        floor_a: dict[str, list[float]] = {a: [] for a in self.agents}
        pings: list[float] = []
        async with AsyncExitStack() as stack:
            floors: dict[str, AdapterFloor | RealFloor] = {}
            for agent in self.agents:
                if agent in REAL_AGENTS:
                    assert self.real is not None
                    floors[agent] = await stack.enter_async_context(
                        open_real_floor(agent, self.real))
                    continue
                profile = BUILTIN_PROFILES[agent]
                floors[agent] = await stack.enter_async_context(open_floor(profile.protocol))
            total = self.p.warmup + self.p.samples
            for i in range(total):
                keep = i >= self.p.warmup
                for agent in self.agents:
                    # The order flips every round: what ran just before a
                    # sample moves it (docs/performance.md, change 22: with floor
                    # (a) always first the ratio was 0.2 higher than with e2e first).
                    if i % 2 == 0:
                        sample = await self.e2e_sample(self.main, sessions[agent],
                                                       self.real_turn(agent))
                        floor = await floors[agent].sample()
                    else:
                        floor = await floors[agent].sample()
                        sample = await self.e2e_sample(self.main, sessions[agent],
                                                       self.real_turn(agent))
                    if keep:
                        e2e[agent].append(sample)
                        floor_a[agent].append(floor)
                ping = await self.ping_sample(self.main)
                if keep:
                    pings.append(ping)
                if (i + 1) % 50 == 0 or (self.real is not None and (i + 1) % 5 == 0):
                    log(f"latency: {i + 1}/{total}")
            upstream = {a: f.upstream_ms[self.p.warmup:] for a, f in floors.items()
                        if isinstance(f, RealFloor)}
        ping_s = summary(pings)
        out: dict[str, Any] = {"floor_b_ws_ping_ms": ping_s, "floor_b_samples_ms": pings,
                               "dialects": {}}
        for agent in self.agents:
            per = {k: [s[k] for s in e2e[agent]] for k in e2e[agent][0]}
            fa = summary(floor_a[agent])
            floor_ms = fa["p50"] + ping_s["p50"]
            resp = summary(per["response"])
            pending_true = summary(per["pending_true"])
            out["dialects"][agent] = {
                "protocol": BUILTIN_PROFILES[agent].protocol,
                "real_agent": agent in REAL_AGENTS,
                "e2e_ms": {k: summary(v) for k, v in per.items()},
                "e2e_samples_ms": per,
                "floor_a_adapter_ms": fa,
                "floor_a_samples_ms": floor_a[agent],
                "floor_ms": round(floor_ms, 3),
                "ratio_p50": round(resp["p50"] / floor_ms, 2),
                "ratio_p99": round(resp["p99"] / floor_ms, 2),
                "ratio_p99_vs_floor_p99": round(
                    resp["p99"] / (fa["p99"] + ping_s["p99"]), 2),
                "ratio_pending_true_p50": round(pending_true["p50"] / floor_ms, 2),
            }
            if agent in upstream:
                out["dialects"][agent]["floor_a_upstream_closed_ms"] = summary(upstream[agent])
                out["dialects"][agent]["floor_a_upstream_samples_ms"] = upstream[agent]
            ops = await self.stages(sessions[agent], limit=total)
            kept = ops[-self.p.samples:]
            out["dialects"][agent]["stages_ms"] = {
                **stage_summary(kept, resp["p50"]),
                **outside_stages(kept, self.e2e_clock.get(sessions[agent], []))}
        return out

    async def busy(self, measured: str, pool: list[str]) -> dict[str, Any]:
        """E2E on ``measured`` while other sessions stream output to a subscriber.

        Each busy level runs in blocks that alternate load on / load off, so
        the level and its idle baseline see the same drift of a shared machine."""
        load = await self.conn()
        levels = [lv for lv in self.p.busy_levels if lv > 0]
        per_block = max(self.p.busy_samples // self.p.busy_blocks, 1)
        out: dict[str, Any] = {"levels": [], "blocks": self.p.busy_blocks,
                               "samples_per_block": per_block}
        idle_all: list[float] = []
        try:
            for sid in pool[:max(levels, default=0)]:
                await load.call("session.subscribe", {"session_id": sid})
            for level in levels:
                busy_s: list[float] = []
                idle_s: list[float] = []
                rates: list[float] = []
                for _ in range(self.p.busy_blocks):
                    running = pool[:level]
                    try:
                        async with trio.open_nursery() as nursery:
                            for sid in running:
                                nursery.start_soon(self.start_turn, load, sid, BUSY_PROMPT)
                        await trio.sleep(0.5)  # steady streaming
                        frames0, t0 = load.received, now()
                        busy_s += [(await self.e2e_sample(self.main, measured))["response"]
                                   for _ in range(per_block)]
                        rates.append((load.received - frames0) / (now() - t0))
                    finally:
                        await self.cancel_all(load, running)
                    await trio.sleep(0.3)
                    idle_s += [(await self.e2e_sample(self.main, measured))["response"]
                               for _ in range(per_block)]
                idle_all += idle_s
                b, i = summary(busy_s), summary(idle_s)
                out["levels"].append({
                    "busy_sessions": level, "e2e_response_ms": b,
                    "paired_idle_response_ms": i,
                    "ratio_p50_vs_paired_idle": round(b["p50"] / i["p50"], 2),
                    "load_frames_per_s": round(statistics.fmean(rates), 1),
                    "samples_ms": busy_s,
                })
                log(f"busy {level}: e2e p50 {b['p50']} ms p99 {b['p99']} ms; paired idle p50 "
                    f"{i['p50']} ms; {statistics.fmean(rates):.0f} frames/s streamed")
        finally:
            await load.aclose()
        out["levels"].insert(0, {"busy_sessions": 0, "e2e_response_ms": summary(idle_all),
                                 "samples_ms": idle_all})
        top = out["levels"][-1]
        out["max_level"] = top["busy_sessions"]
        out["ratio_p50_max_vs_0"] = top.get("ratio_p50_vs_paired_idle", 1.0)
        return out

    async def cancel_all(self, conn: WsClient, sessions: list[str]) -> list[Pending]:
        pendings = [await conn.send("agent.cancel", {"session_id": sid}) for sid in sessions]
        for p in pendings:
            await p.wait(60)
        return pendings

    async def burst(self, pool: list[str]) -> list[dict[str, Any]]:
        results = []
        conns = [await self.conn() for _ in range(10)]
        try:
            for n in self.p.burst_sizes:
                chosen = pool[:n]
                owner = {sid: conns[i % len(conns)] for i, sid in enumerate(chosen)}
                for sid, c in owner.items():
                    await c.call("session.subscribe", {"session_id": sid})
                async with trio.open_nursery() as nursery:
                    for sid, c in owner.items():
                        nursery.start_soon(self.start_turn, c, sid, DELAY_PROMPT)
                # How loaded the server already is by the N turns streaming.
                c0, t_c = cpu_s(self.server.ps()), now()
                await trio.sleep(1.0)
                streaming_util = (cpu_s(self.server.ps()) - c0) / (now() - t_c)
                settled = {sid: c.watch(is_cancellation(sid, False)) for sid, c in owner.items()}
                pendings: list[Pending] = []

                async def fire(c: WsClient, sids: list[str], pendings: list[Pending] = pendings
                               ) -> None:
                    for sid in sids:
                        pendings.append(await c.send("agent.cancel", {"session_id": sid}))

                agents = self.server.ps().children(recursive=True)
                cpu0 = cpu_s(self.server.ps()), cpu_s(psutil.Process()), _cpu_sum(agents)
                t0 = now()
                async with trio.open_nursery() as nursery:
                    for c in conns:
                        nursery.start_soon(fire, c, [s for s, o in owner.items() if o is c])
                for p in pendings:
                    await p.wait(60)
                last_false = max([await w.wait(30) for w in settled.values()])
                cpu1 = cpu_s(self.server.ps()), cpu_s(psutil.Process()), _cpu_sum(agents)
                used_ms = [(b - a) * 1000 for a, b in zip(cpu0, cpu1, strict=True)]
                answers = [(p.answered_at - t0) * 1000 for p in pendings]
                results.append({
                    "sessions": n,
                    "all_answered_ms": round(max(answers), 3),
                    "all_settled_ms": ms(last_false - t0),
                    "answer_ms": summary(answers),
                    "errors": sum(not p.ok for p in pendings),
                    "server_cpu_util_while_streaming": round(streaming_util, 2),
                    # CPU spent from the first cancel to the last settle (10 ms ticks):
                    # the server's, and the bench client's own (it reads every frame).
                    "server_cpu_ms": round(used_ms[0], 1),
                    "client_cpu_ms": round(used_ms[1], 1),
                    # The agent processes' (each answers its cancel and stops streaming).
                    "agents_cpu_ms": round(used_ms[2], 1),
                    # All three on every core: the least time the work could take here.
                    "cpu_bound_ms": round(sum(used_ms) / (os.cpu_count() or 1), 1),
                })
                log(f"burst {n}: all settled in {results[-1]['all_settled_ms']} ms, "
                    f"errors {results[-1]['errors']}")
                for sid, c in owner.items():
                    await c.call("session.unsubscribe", {"session_id": sid})
        finally:
            for c in conns:
                await c.aclose()
        return results

    async def storm(self) -> dict[str, Any]:
        """Duplicate agent.cancel requests for one session from several connections."""
        sid = await self.launch(self.agents[0])
        # The observer keeps its notifications: the storm counts its cancellation changes.
        observer = await open_client(self.nursery, self.server)
        # Lean requesters (bench/lean_ws.py): the answers' arrival is measured with
        # the client's own per-frame cost as small as it gets.
        host, port = self.server.url.removeprefix("http://").rsplit(":", 1)
        conns = [await open_lean_connection(host, int(port), self.server.token, self.nursery)
                 for _ in range(self.p.storm_conns)]
        try:
            await observer.call("session.subscribe", {"session_id": sid})
            await self.start_turn(observer, sid, STORM_PROMPT)
            completed = observer.watch(
                lambda f: f.get("action") == "session.turn.completed"
                and f["payload"].get("session_id") == sid)
            log_start = len(observer.notifications)
            gc.collect()
            gc.freeze()
            settled = observer.watch(is_cancellation(sid, False))
            per_conn = self.p.storm_requests // len(conns)
            pendings: list[LeanRequest] = []

            async def fire(c: LeanConnection) -> None:
                for _ in range(per_conn):
                    pendings.append(await c.send("agent.cancel", {"session_id": sid}))

            cpu0 = cpu_s(self.server.ps())
            async with trio.open_nursery() as nursery:
                for c in conns:
                    nursery.start_soon(fire, c)
            last_sent = max(p.sent_at for p in pendings)
            settle_at = await settled.wait(60)
            with trio.move_on_after(60):
                for p in pendings:
                    await p.done.wait()
            server_cpu = cpu_s(self.server.ps()) - cpu0
            gc.unfreeze()
            await trio.sleep(0.5)  # any late notification would show up by now
            answered = [p for p in pendings if p.done.is_set()]
            first_sent = min(p.sent_at for p in pendings)
            after_settle = [(p.answered_at - settle_at) * 1000 for p in answered]
            changes = [f for f in observer.notifications[log_start:]
                       if f["action"] == "session.cancellation_changed"
                       and f["payload"]["session_id"] == sid]
            ops = await self.stages(sid)
            out = {
                "prompt": STORM_PROMPT,
                "requests": len(pendings),
                "connections": len(conns),
                "answered": len(answered),
                "succeeded": sum(p.ok for p in answered),
                "operations": len(ops),
                "joined": [op["joined"] for op in ops],
                "outcomes": [op["outcome"] for op in ops],
                "cancellation_changed_notifications": len(changes),
                "turn_stop_reason": (completed.frame or {}).get("payload", {}).get(
                    "stop_reason"),
                "all_sent_before_settle": last_sent < settle_at,
                "send_span_ms": ms(last_sent - first_sent),
                "all_answered_ms": ms(max(p.answered_at for p in answered) - first_sent),
                "answer_after_settle_ms": summary(after_settle),
                "server_cpu_ms": round(server_cpu * 1000, 1),
                "server_cpu_us_per_request": round(server_cpu / len(pendings) * 1e6, 1),
                "stages_ms": ops[-1]["marks_ms"] if ops else {},
            }
            log(f"storm: {out['operations']} operation(s), {out['answered']}/{out['requests']} "
                f"answered, p99 after settle {out['answer_after_settle_ms'].get('p99')} ms")
            return out
        finally:
            await observer.aclose()
            for c in conns:
                await c.stream.aclose()

    async def fanout(self) -> list[dict[str, Any]]:
        """One cancellation change (an idle cancel) delivered to N subscribers
        (lean raw-socket subscribers, bench/lean_ws.py, read during the
        measurement through one epoll as the no-framework floor reads)."""
        sid = await self.launch(self.agents[0])
        results: list[dict[str, Any]] = []
        subs: list[LeanSubscriber] = []
        host, port = self.server.url.removeprefix("http://").rsplit(":", 1)
        for n in self.p.fanout_sizes:
            sem = trio.Semaphore(50)
            t_open = now()
            # Readers only until subscribed: then the sockets are read through epoll.
            async with trio.open_nursery() as readers:
                async def add(sem: trio.Semaphore = sem,
                              readers: trio.Nursery = readers) -> None:
                    async with sem:
                        subs.append(await open_lean(host, int(port), self.server.token, sid,
                                                    readers))

                async with trio.open_nursery() as nursery:
                    for _ in range(n - len(subs)):
                        nursery.start_soon(add)
                readers.cancel_scope.cancel()
            opened_s = now() - t_open
            fds = [c.stream.socket.fileno() for c in subs]
            # The client's own cyclic GC over 1,000 connections' objects must not
            # be what is measured: freeze what exists (undone below).
            gc.collect()
            gc.freeze()
            reps = []
            cpu0 = cpu_s(self.server.ps()), cpu_s(psutil.Process())
            for _ in range(self.p.fanout_reps):
                await trio.sleep(0.3)
                ready = threading.Event()
                arrived: list[list[dict[int, float]]] = []

                async def reading(ready: threading.Event = ready,
                                  arrived: list[list[dict[int, float]]] = arrived,
                                  fds: list[int] = fds) -> None:
                    arrived.append(await trio.to_thread.run_sync(
                        read_all, fds, (PENDING_TRUE, PENDING_FALSE), 60.0, ready))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(reading)
                    with trio.fail_after(10):
                        while not ready.is_set():
                            await trio.sleep(0.001)
                    pending = await self.main.send("agent.cancel", {"session_id": sid})
                    t0 = pending.sent_at
                true_at = [at - t0 for at in arrived[0][0].values()]
                false_at = [at - t0 for at in arrived[0][1].values()]
                await pending.wait(60)
                reps.append({
                    "first_ms": ms(min(true_at)), "last_ms": ms(max(true_at)),
                    "p50_ms": ms(percentile(true_at, 50)),
                    "last_false_ms": ms(max(false_at)),
                    "response_ms": round(pending.ms, 3),
                })
            cpu1 = cpu_s(self.server.ps()), cpu_s(psutil.Process())
            gc.unfreeze()
            # Per rep each subscriber gets two frames (pending true, then false).
            frames = 2 * n * self.p.fanout_reps
            last = [r["last_ms"] for r in reps]
            results.append({
                "subscribers": n, "reps": reps,
                # CPU times tick in 10 ms: per frame only where there are many frames.
                "server_cpu_us_per_frame": round((cpu1[0] - cpu0[0]) / frames * 1e6, 1)
                if frames >= 200 else None,
                "client_cpu_us_per_frame": round((cpu1[1] - cpu0[1]) / frames * 1e6, 1)
                if frames >= 200 else None,
                "server_cpu_ms_per_change": round(
                    (cpu1[0] - cpu0[0]) / (2 * self.p.fanout_reps) * 1000, 2),
                "last_delivery_ms_median": round(statistics.median(last), 3),
                # The same fan-out with no framework (bench/fanout_floor.py).
                **await fanout_floor(n, self.p.fanout_reps),
                "last_delivery_ms_max": round(max(last), 3),
                "connect_and_subscribe_s": round(opened_s, 2),
            })
            log(f"fan-out {n}: last delivery median {results[-1]['last_delivery_ms_median']}"
                f" ms (max {results[-1]['last_delivery_ms_max']} ms)")
        for c in subs:
            await c.stream.aclose()
        return results

    async def run(self, phases: set[str]) -> dict[str, Any]:
        self.main = await self.conn()
        self.task_id = (await self.main.call("task.create", {"title": "bench"}))["id"]
        sessions = {a: await self.launch(a) for a in self.agents}
        for agent, sid in sessions.items():
            await self.main.call("session.subscribe", {"session_id": sid})
            if agent in REAL_AGENTS:
                # Auggie asks about workspace indexing at once: decline, as a person would.
                self.nursery.start_soon(decline_permissions, self.main, sid)
            await self.e2e_sample(self.main, sid, self.real_turn(agent))  # warm the paths
        results: dict[str, Any] = {}
        pool: list[str] = []
        if phases & POOL_PHASES:
            log(f"launching the idle pool ({self.p.pool} sessions)")
            pool, memory = await self.memory_and_pool()
            if "memory" in phases:
                results["memory"] = memory
        if "latency" in phases:
            log(f"latency: {self.p.samples} samples per dialect (+{self.p.warmup} warm-up)")
            results["latency"] = await self.latency(sessions)
        if "busy" in phases:
            results["busy"] = await self.busy(sessions[self.agents[0]], pool)
        if "burst" in phases:
            results["burst"] = await self.burst(pool)
        if "storm" in phases:
            results["storm"] = await self.storm()
        if "fanout" in phases:
            results["fanout"] = await self.fanout()
        if "streaming" in phases:
            results["streaming"] = await streaming(self, pool)
        if "queued" in phases:
            log(f"queued: {self.p.queued_samples} pairs per dialect")
            results["queued"] = await queued(self, sessions)
        if "restored" in phases:
            log(f"restored: {self.p.restored_samples} pairs per dialect")
            results["restored"] = await restored(self)
        if "checkpointed" in phases:
            assert self.project_root is not None
            log(f"checkpointed: {self.p.queued_samples} pairs per dialect, projects of "
                f"{self.p.checkpoint_files} files")
            results["checkpointed"] = await checkpointed(self, sessions, self.project_root)
        if "peer_e2e" in phases:
            log(f"peer_e2e: {self.p.peer_e2e_samples} cancels each, Turnvisor vs a minimal "
                "asyncio server on the ACP SDK")
            results["peer_e2e"] = await peer_e2e(self, sessions)
        return results


def stage_summary(ops: list[dict[str, Any]], e2e_p50: float) -> dict[str, Any]:
    acked = [op["marks_ms"] for op in ops if op.get("outcome") == "acknowledged"]
    out: dict[str, Any] = {"operations": len(acked)}
    for name, a, b in STAGES:
        values = [m[b] - m[a] for m in acked if a in m and b in m]
        out[name] = round(statistics.median(values), 3) if values else None
    if out.get("server_total") is not None:
        out["outside_server_ms"] = round(e2e_p50 - out["server_total"], 3)
    return out


def outside_stages(ops: list[dict[str, Any]], clock: list[tuple[float, float]]
                   ) -> dict[str, Any]:
    """The time outside the server on either side of each acknowledged cancel:
    ``inbound`` (the request written → the server's ``received``) and
    ``outbound`` (its ``published``: pending=false and the response queued →
    the response read here, with the frames before it).  The last operations
    and the last samples pair up one to one (one operation per sample); a
    pair whose ``received`` does not fall inside its sample is not counted."""
    inbound: list[float] = []
    outbound: list[float] = []
    # (Unequal lengths: the server keeps only the last operations.)
    for op, (sent, answered) in zip(reversed(ops), reversed(clock), strict=False):
        received, published = op.get("received_s"), op["marks_ms"].get("published")
        if (op.get("outcome") != "acknowledged" or received is None or published is None
                or not sent <= received <= answered):
            continue
        inbound.append((received - sent) * 1000)
        outbound.append((answered - received) * 1000 - published)
    return {"paired": len(inbound),
            "inbound": round(statistics.median(inbound), 3) if inbound else None,
            "outbound": round(statistics.median(outbound), 3) if outbound else None}


def _cpu_sum(procs: list[psutil.Process]) -> float:
    """CPU seconds of processes that may have exited (counted as nothing more)."""
    total = 0.0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            total += cpu_s(proc)
    return total


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


#: The fan-out phase opens 1,000 WebSockets, all from this one address.
BENCH_LIMITS = "[limits]\nmax_connections_per_peer = 100000\n"


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
                    results = await bench.run(phases)
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
                        help="agent profile(s) to measure (default: mock and mock-codex); "
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
    agents = args.agent or ["mock", "mock-codex"]
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


__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
