"""The stop_levels bench phase (bench/stop_levels.py) runs end to end on tiny sizes against a
real server and real mock agents in every dialect: the shape of its result, and figures that
come from the runs (not a timed test: no bound on how fast)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import trio

from bench.cancel_latency import BENCH_LIMITS, DEFAULT_AGENTS
from bench.harness import QUICK, Bench
from bench.phases import run_phases
from bench.stop_levels import TARGETS, pair_step_stages, stop_all_stages
from tests.support.serverproc import server_process

SAMPLES = 2
SESSIONS = 3


def _real(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value)


async def test_the_phase_measures_both_stop_levels() -> None:
    params = dataclasses.replace(QUICK, stop_step_samples=SAMPLES, stop_all_sessions=SESSIONS)
    with trio.fail_after(150):
        async with server_process(toml=BENCH_LIMITS, log_level="WARNING") as server, \
                trio.open_nursery() as nursery:
            bench = Bench(server, nursery, params, list(DEFAULT_AGENTS))
            try:
                results = await run_phases(bench, {"stop_levels"})
            finally:
                bench.http.close()
                if (main := getattr(bench, "main", None)) is not None:
                    await main.aclose()
            nursery.cancel_scope.cancel()
    assert set(results) == {"stop_levels"}
    after, stop_all = results["stop_levels"]["after_step"], results["stop_levels"]["stop_all"]

    assert set(after["dialects"]) == set(DEFAULT_AGENTS)
    for agent, d in after["dialects"].items():
        # Every sample paired with its server operation, which waited for the step.
        assert d["paired"] == SAMPLES, (agent, d)
        server = d["server_step_over_to_adapter_sent_ms"]
        assert server["n"] == SAMPLES and _real(server["p50"]) and server["min"] >= 0, d
        # The operation waited for the running step: its end came after the stop was
        # received (a stop received after it would have been a cancel now, unpaired).
        waited = d["server_received_to_step_over_ms"]
        assert waited["n"] == SAMPLES and waited["min"] > 0, (agent, waited)
        client = d["client_step_end_to_answer_ms"]
        assert client["n"] == SAMPLES and _real(client["p50"]) and client["min"] > 0, d
        assert d["outcomes"] == {"cancelled": SAMPLES}, d
        assert d["receipt_when"] == {"after_step": SAMPLES}, d
        assert d["finished_counts"] == {1: SAMPLES}, d
        assert d["next_step_never_started"] == SAMPLES, d
        assert d["target_met"] == (server["p50"] <= TARGETS[
            "after_step_step_over_to_adapter_sent_p50_ms"])
        for s in d["samples"]:
            assert s["tool_calls_seen"] == [s["running_tool_call_id"]] == s["finished"], s

    assert stop_all["sessions"] == stop_all["answered_sessions"] == SESSIONS
    assert stop_all["other_sessions_in_answer"] == 0
    assert stop_all["outcomes"] == {"cancelled": SESSIONS}, stop_all
    assert stop_all["by"] == {"stop_all": SESSIONS} and stop_all["errors"] == 0, stop_all
    assert _real(stop_all["answer_ms"]) and stop_all["answer_ms"] > 0
    assert _real(stop_all["last_pending_false_ms"]) and stop_all["last_pending_false_ms"] > 0
    assert stop_all["pending_false_ms"]["n"] == SESSIONS
    assert stop_all["pending_false_ms"]["max"] == stop_all["last_pending_false_ms"]
    # Every session's operation, from its receipt to its publication, after the request.
    stages = stop_all["server_stages_ms"]
    for mark in ("received", "adapter_sent", "agent_answered", "published"):
        assert stages[mark]["n"] == SESSIONS and stages[mark]["min"] > 0, (mark, stages)
    assert stages["received"]["max"] < stages["published"]["max"], stages
    assert all(_real(stop_all[k]) and stop_all[k] >= 0
               for k in ("server_cpu_ms", "client_cpu_ms", "agents_cpu_ms"))
    assert stop_all["target_met"] == (stop_all["answer_ms"] <= TARGETS["stop_all_50_answer_ms"])


def test_operations_pair_with_the_sample_that_brackets_them() -> None:
    samples = [{"sent_at": 1.0, "answered_at": 1.5}, {"sent_at": 2.0, "answered_at": 2.5},
               {"sent_at": 3.0, "answered_at": 3.5}]
    ops = [
        {"received_s": 2.001, "marks_ms": {"step_over": 280.0, "adapter_sent": 280.4,
                                           "agent_answered": 281.0}},
        {"received_s": 1.001, "marks_ms": {"step_over": 290.0, "adapter_sent": 290.25}},
        # A cancel now (no step waited for): not a stop after the step.
        {"received_s": 3.001, "marks_ms": {"adapter_sent": 0.2}},
        {"received_s": 9.0, "marks_ms": {"step_over": 1.0, "adapter_sent": 2.0}},
    ]
    assert pair_step_stages(ops, samples) == [
        {"received_to_step_over": 290.0, "step_over_to_adapter_sent": 0.25},
        {"received_to_step_over": 280.0, "step_over_to_adapter_sent": 0.4,
         "step_over_to_agent_answered": 1.0},
        None,
    ]


def test_stop_all_stages_count_from_the_request() -> None:
    ops: list[dict[str, Any]] = [
        {"received_s": 10.002, "marks_ms": {"received": 0.0, "adapter_sent": 1.0}},
        {"received_s": 10.004, "marks_ms": {"received": 0.0, "adapter_sent": 3.0}},
        {"marks_ms": {"received": 0.0}},  # no host-clock mark: not placed
    ]
    out = stop_all_stages(ops, 10.0)
    assert out["received"]["n"] == 2 and out["received"]["max"] == 4.0
    assert out["adapter_sent"]["min"] == 3.0 and out["adapter_sent"]["max"] == 7.0
