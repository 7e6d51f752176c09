"""The scale phases: ``memory`` (and the idle pool), ``busy``, ``burst``, ``storm`` and
``fanout`` (docs/performance.md, "What is measured")."""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
import threading
from typing import TYPE_CHECKING, Any

import psutil
import trio

from tests.support.ws import Pending, WsClient, is_cancellation, now, open_client

from .fanout_floor import fanout_floor
from .floors import DELAY_PROMPT
from .lean_ws import (
    LeanConnection,
    LeanRequest,
    LeanSubscriber,
    open_lean,
    open_lean_connection,
    read_all,
)
from .measure import cpu_s, log, ms
from .stats import percentile, summary

if TYPE_CHECKING:
    from .harness import Bench

__all__ = ["burst", "busy", "fanout", "memory_and_pool", "storm"]

BUSY_PROMPT = "/delay 600000"
STORM_PROMPT = "/slow 2000"
#: The fan-out's cancellation change, as its frame carries it (payload keys in order).
PENDING_TRUE = b'"cancellation_pending":true,"cancellation_revision"'
PENDING_FALSE = b'"cancellation_pending":false,"cancellation_revision"'


async def memory_and_pool(bench: Bench) -> tuple[list[str], list[dict[str, Any]]]:
    """Launch the idle pool; RSS of the backend and of its agents at each checkpoint."""
    ps = bench.server.ps()
    before = {a.pid for a in bench.server.agents()}
    await trio.sleep(0.5)
    rss0 = ps.memory_info().rss
    pool: list[str] = []
    out: list[dict[str, Any]] = []
    for k in bench.p.memory_checkpoints:
        pool += await bench.launch_many(bench.agents[0], k - len(pool))
        await trio.sleep(1.0)
        rss = ps.memory_info().rss
        agents = [a for a in bench.server.agents() if a.pid not in before]
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
    if len(pool) < bench.p.pool:  # the streaming phase may need more than memory did
        pool += await bench.launch_many(bench.agents[0], bench.p.pool - len(pool))
    return pool, out


async def busy(bench: Bench, measured: str, pool: list[str]) -> dict[str, Any]:
    """E2E on ``measured`` while other sessions stream output to a subscriber.

    Each busy level runs in blocks that alternate load on / load off, so
    the level and its idle baseline see the same drift of a shared machine."""
    load = await bench.conn()
    levels = [lv for lv in bench.p.busy_levels if lv > 0]
    per_block = max(bench.p.busy_samples // bench.p.busy_blocks, 1)
    out: dict[str, Any] = {"levels": [], "blocks": bench.p.busy_blocks,
                           "samples_per_block": per_block}
    idle_all: list[float] = []
    try:
        for sid in pool[:max(levels, default=0)]:
            await load.call("session.subscribe", {"session_id": sid})
        for level in levels:
            busy_s: list[float] = []
            idle_s: list[float] = []
            rates: list[float] = []
            for _ in range(bench.p.busy_blocks):
                running = pool[:level]
                try:
                    async with trio.open_nursery() as nursery:
                        for sid in running:
                            nursery.start_soon(bench.start_turn, load, sid, BUSY_PROMPT)
                    await trio.sleep(0.5)  # steady streaming
                    frames0, t0 = load.received, now()
                    busy_s += [(await bench.e2e_sample(bench.main, measured))["response"]
                               for _ in range(per_block)]
                    rates.append((load.received - frames0) / (now() - t0))
                finally:
                    await bench.cancel_all(load, running)
                await trio.sleep(0.3)
                idle_s += [(await bench.e2e_sample(bench.main, measured))["response"]
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


async def burst(bench: Bench, pool: list[str]) -> list[dict[str, Any]]:
    results = []
    conns = [await bench.conn() for _ in range(10)]
    try:
        for n in bench.p.burst_sizes:
            chosen = pool[:n]
            owner = {sid: conns[i % len(conns)] for i, sid in enumerate(chosen)}
            for sid, c in owner.items():
                await c.call("session.subscribe", {"session_id": sid})
            async with trio.open_nursery() as nursery:
                for sid, c in owner.items():
                    nursery.start_soon(bench.start_turn, c, sid, DELAY_PROMPT)
            # How loaded the server already is by the N turns streaming.
            c0, t_c = cpu_s(bench.server.ps()), now()
            await trio.sleep(1.0)
            streaming_util = (cpu_s(bench.server.ps()) - c0) / (now() - t_c)
            settled = {sid: c.watch(is_cancellation(sid, False)) for sid, c in owner.items()}
            pendings: list[Pending] = []

            async def fire(c: WsClient, sids: list[str], pendings: list[Pending] = pendings
                           ) -> None:
                for sid in sids:
                    pendings.append(await c.send("agent.cancel", {"session_id": sid}))

            agents = bench.server.ps().children(recursive=True)
            cpu0 = cpu_s(bench.server.ps()), cpu_s(psutil.Process()), _cpu_sum(agents)
            t0 = now()
            async with trio.open_nursery() as nursery:
                for c in conns:
                    nursery.start_soon(fire, c, [s for s, o in owner.items() if o is c])
            for p in pendings:
                await p.wait(60)
            last_false = max([await w.wait(30) for w in settled.values()])
            cpu1 = cpu_s(bench.server.ps()), cpu_s(psutil.Process()), _cpu_sum(agents)
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


async def storm(bench: Bench) -> dict[str, Any]:
    """Duplicate agent.cancel requests for one session from several connections."""
    sid = await bench.launch(bench.agents[0])
    # The observer keeps its notifications: the storm counts its cancellation changes.
    observer = await open_client(bench.nursery, bench.server)
    # Lean requesters (bench/lean_ws.py): the answers' arrival is measured with
    # the client's own per-frame cost as small as it gets.
    host, port = bench.server.url.removeprefix("http://").rsplit(":", 1)
    conns = [await open_lean_connection(host, int(port), bench.server.token, bench.nursery)
             for _ in range(bench.p.storm_conns)]
    try:
        await observer.call("session.subscribe", {"session_id": sid})
        await bench.start_turn(observer, sid, STORM_PROMPT)
        completed = observer.watch(
            lambda f: f.get("action") == "session.turn.completed"
            and f["payload"].get("session_id") == sid)
        log_start = len(observer.notifications)
        gc.collect()
        gc.freeze()
        settled = observer.watch(is_cancellation(sid, False))
        per_conn = bench.p.storm_requests // len(conns)
        pendings: list[LeanRequest] = []

        async def fire(c: LeanConnection) -> None:
            for _ in range(per_conn):
                pendings.append(await c.send("agent.cancel", {"session_id": sid}))

        cpu0 = cpu_s(bench.server.ps())
        async with trio.open_nursery() as nursery:
            for c in conns:
                nursery.start_soon(fire, c)
        last_sent = max(p.sent_at for p in pendings)
        settle_at = await settled.wait(60)
        with trio.move_on_after(60):
            for p in pendings:
                await p.done.wait()
        server_cpu = cpu_s(bench.server.ps()) - cpu0
        gc.unfreeze()
        await trio.sleep(0.5)  # any late notification would show up by now
        answered = [p for p in pendings if p.done.is_set()]
        first_sent = min(p.sent_at for p in pendings)
        after_settle = [(p.answered_at - settle_at) * 1000 for p in answered]
        changes = [f for f in observer.notifications[log_start:]
                   if f["action"] == "session.cancellation_changed"
                   and f["payload"]["session_id"] == sid]
        ops = await bench.stages(sid)
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


async def fanout(bench: Bench) -> list[dict[str, Any]]:
    """One cancellation change (an idle cancel) delivered to N subscribers
    (lean raw-socket subscribers, bench/lean_ws.py, read during the
    measurement through one epoll as the no-framework floor reads)."""
    sid = await bench.launch(bench.agents[0])
    results: list[dict[str, Any]] = []
    subs: list[LeanSubscriber] = []
    host, port = bench.server.url.removeprefix("http://").rsplit(":", 1)
    for n in bench.p.fanout_sizes:
        sem = trio.Semaphore(50)
        t_open = now()
        # Readers only until subscribed: then the sockets are read through epoll.
        async with trio.open_nursery() as readers:
            async def add(sem: trio.Semaphore = sem,
                          readers: trio.Nursery = readers) -> None:
                async with sem:
                    subs.append(await open_lean(host, int(port), bench.server.token, sid,
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
        cpu0 = cpu_s(bench.server.ps()), cpu_s(psutil.Process())
        for _ in range(bench.p.fanout_reps):
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
                pending = await bench.main.send("agent.cancel", {"session_id": sid})
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
        cpu1 = cpu_s(bench.server.ps()), cpu_s(psutil.Process())
        gc.unfreeze()
        # Per rep each subscriber gets two frames (pending true, then false).
        frames = 2 * n * bench.p.fanout_reps
        last = [r["last_ms"] for r in reps]
        results.append({
            "subscribers": n, "reps": reps,
            # CPU times tick in 10 ms: per frame only where there are many frames.
            "server_cpu_us_per_frame": round((cpu1[0] - cpu0[0]) / frames * 1e6, 1)
            if frames >= 200 else None,
            "client_cpu_us_per_frame": round((cpu1[1] - cpu0[1]) / frames * 1e6, 1)
            if frames >= 200 else None,
            "server_cpu_ms_per_change": round(
                (cpu1[0] - cpu0[0]) / (2 * bench.p.fanout_reps) * 1000, 2),
            "last_delivery_ms_median": round(statistics.median(last), 3),
            # The same fan-out with no framework (bench/fanout_floor.py).
            **await fanout_floor(n, bench.p.fanout_reps),
            "last_delivery_ms_max": round(max(last), 3),
            "connect_and_subscribe_s": round(opened_s, 2),
        })
        log(f"fan-out {n}: last delivery median {results[-1]['last_delivery_ms_median']}"
            f" ms (max {results[-1]['last_delivery_ms_max']} ms)")
    for c in subs:
        await c.stream.aclose()
    return results


def _cpu_sum(procs: list[psutil.Process]) -> float:
    """CPU seconds of processes that may have exited (counted as nothing more)."""
    total = 0.0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            total += cpu_s(proc)
    return total
