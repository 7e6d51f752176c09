"""Phase ``latency``: e2e per dialect against floor (a) per dialect and floor (b),
interleaved, with the server's stages of each cancel (docs/performance.md)."""

from __future__ import annotations

import statistics
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from supervisor.profiles import BUILTIN_PROFILES

from .floors import AdapterFloor, open_floor
from .measure import log
from .real_agents import REAL_AGENTS, RealFloor, open_real_floor, protocol_of
from .report import STAGES
from .stats import summary

if TYPE_CHECKING:
    from .harness import Bench

__all__ = ["latency", "outside_stages", "stage_summary"]


async def latency(bench: Bench, sessions: dict[str, str]) -> dict[str, Any]:
    """E2E per dialect, floor (a) per dialect, floor (b): interleaved."""
    e2e: dict[str, list[dict[str, float]]] = {a: [] for a in bench.agents}
    floor_a: dict[str, list[float]] = {a: [] for a in bench.agents}
    pings: list[float] = []
    async with AsyncExitStack() as stack:
        floors: dict[str, AdapterFloor | RealFloor] = {}
        for agent in bench.agents:
            if agent in REAL_AGENTS:
                assert bench.real is not None
                floors[agent] = await stack.enter_async_context(
                    open_real_floor(agent, bench.real))
                continue
            profile = BUILTIN_PROFILES[agent]
            floors[agent] = await stack.enter_async_context(
                open_floor(profile.protocol, profile.command, profile.acp_version))
        total = bench.p.warmup + bench.p.samples
        for i in range(total):
            keep = i >= bench.p.warmup
            for agent in bench.agents:
                # The order flips every round: what ran just before a
                # sample moves it (docs/performance.md, change 22: with floor
                # (a) always first the ratio was 0.2 higher than with e2e first).
                if i % 2 == 0:
                    sample = await bench.e2e_sample(bench.main, sessions[agent],
                                                   bench.real_turn(agent))
                    floor = await floors[agent].sample()
                else:
                    floor = await floors[agent].sample()
                    sample = await bench.e2e_sample(bench.main, sessions[agent],
                                                   bench.real_turn(agent))
                if keep:
                    e2e[agent].append(sample)
                    floor_a[agent].append(floor)
            ping = await bench.ping_sample(bench.main)
            if keep:
                pings.append(ping)
            if (i + 1) % 50 == 0 or (bench.real is not None and (i + 1) % 5 == 0):
                log(f"latency: {i + 1}/{total}")
        upstream = {a: f.upstream_ms[bench.p.warmup:] for a, f in floors.items()
                    if isinstance(f, RealFloor)}
    ping_s = summary(pings)
    out: dict[str, Any] = {"floor_b_ws_ping_ms": ping_s, "floor_b_samples_ms": pings,
                           "dialects": {}}
    for agent in bench.agents:
        per = {k: [s[k] for s in e2e[agent]] for k in e2e[agent][0]}
        fa = summary(floor_a[agent])
        floor_ms = fa["p50"] + ping_s["p50"]
        resp = summary(per["response"])
        pending_true = summary(per["pending_true"])
        out["dialects"][agent] = {
            "protocol": protocol_of(agent),
            # What the server's session negotiated (acp/1, acp/2, codex).
            "wire_protocol": bench.wire_protocols.get(agent),
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
        ops = await bench.stages(sessions[agent], limit=total)
        kept = ops[-bench.p.samples:]
        out["dialects"][agent]["stages_ms"] = {
            **stage_summary(kept, resp["p50"]),
            **outside_stages(kept, bench.e2e_clock.get(sessions[agent], []))}
    return out


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
