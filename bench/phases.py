"""The cancel latency bench's phases, in order, over one ``Bench`` (bench/harness.py).

Its own module so that the harness imports no phase: each phase imports the harness.
"""

from __future__ import annotations

from typing import Any

from .checkpointed import checkpointed
from .harness import Bench
from .latency import latency
from .measure import log
from .peer_e2e import peer_e2e
from .queued import queued
from .real_agents import REAL_AGENTS, decline_permissions
from .restored import restored
from .scale import burst, busy, fanout, memory_and_pool, storm
from .stop_levels import stop_levels
from .streaming import streaming

__all__ = ["POOL_PHASES", "run_phases"]

#: The phases that need the idle pool of sessions.
POOL_PHASES = {"memory", "busy", "burst", "streaming"}


async def run_phases(bench: Bench, phases: set[str]) -> dict[str, Any]:
    """The session of each dialect (each warmed by one cancel), then ``phases`` in order."""
    bench.main = await bench.conn()
    bench.task_id = (await bench.main.call("task.create", {"title": "bench"}))["id"]
    sessions = {a: await bench.launch(a) for a in bench.agents}
    for agent, sid in sessions.items():
        await bench.main.call("session.subscribe", {"session_id": sid})
        if agent in REAL_AGENTS:
            # Auggie asks about workspace indexing at once: decline, as a person would.
            bench.nursery.start_soon(decline_permissions, bench.main, sid)
        await bench.e2e_sample(bench.main, sid, bench.real_turn(agent))  # warm the paths
    listed = await bench.main.call("session.list", {"task_id": bench.task_id})
    by_id = {str(d["id"]): d.get("protocol") for d in listed["sessions"]}
    bench.wire_protocols = {a: by_id.get(sid) for a, sid in sessions.items()}
    results: dict[str, Any] = {}
    pool: list[str] = []
    if phases & POOL_PHASES:
        log(f"launching the idle pool ({bench.p.pool} sessions)")
        pool, memory = await memory_and_pool(bench)
        if "memory" in phases:
            results["memory"] = memory
    if "latency" in phases:
        log(f"latency: {bench.p.samples} samples per dialect (+{bench.p.warmup} warm-up)")
        results["latency"] = await latency(bench, sessions)
    if "busy" in phases:
        results["busy"] = await busy(bench, sessions[bench.agents[0]], pool)
    if "burst" in phases:
        results["burst"] = await burst(bench, pool)
    if "storm" in phases:
        results["storm"] = await storm(bench)
    if "fanout" in phases:
        results["fanout"] = await fanout(bench)
    if "streaming" in phases:
        results["streaming"] = await streaming(bench, pool)
    if "queued" in phases:
        log(f"queued: {bench.p.queued_samples} pairs per dialect")
        results["queued"] = await queued(bench, sessions)
    if "restored" in phases:
        log(f"restored: {bench.p.restored_samples} pairs per dialect")
        results["restored"] = await restored(bench)
    if "checkpointed" in phases:
        assert bench.project_root is not None
        log(f"checkpointed: {bench.p.queued_samples} pairs per dialect, projects of "
            f"{bench.p.checkpoint_files} files")
        results["checkpointed"] = await checkpointed(bench, sessions, bench.project_root)
    if "peer_e2e" in phases:
        log(f"peer_e2e: {bench.p.peer_e2e_samples} cancels each, Turnvisor vs a minimal "
            "asyncio server on the ACP SDK")
        results["peer_e2e"] = await peer_e2e(bench, sessions)
    if "stop_levels" in phases:
        log(f"stop_levels: {bench.p.stop_step_samples} stops after the step per dialect, "
            f"then stop all over {bench.p.stop_all_sessions} streaming sessions")
        results["stop_levels"] = await stop_levels(bench, sessions)
    return results
