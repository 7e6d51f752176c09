"""The cancel-latency bench's own arithmetic: how streamed chunks are counted from
raw frames, paired summaries, and which issue-19 targets a result meets."""

from __future__ import annotations

import json
from typing import Any

from bench.cancel_latency import outside_stages
from bench.queued import stages_by_kind
from bench.report import report, targets
from bench.stats import paired
from bench.streaming import ChunkCounter


def _frame(action: str, session_id: str, content: str) -> str:
    return json.dumps({"id": "n1", "type": "notification", "action": action,
                       "payload": {"session_id": session_id,
                                   "message": {"session_id": session_id, "role": "agent",
                                               "content": content}}})


def test_chunks_are_counted_whatever_a_frame_carries() -> None:
    counter = ChunkCounter()
    # Whole message so far, then a delta of two chunks, then one chunk: chunk4 is the top.
    counter(_frame("session.message.updated", "s1", "chunk0 chunk1 chunk2 "))
    counter(_frame("session.message.updated", "s1", "chunk3 "))
    counter(_frame("session.message.added", "s2", "chunk0 "))
    counter(_frame("session.message.delta", "s1", "chunk4 "))
    # Not a message frame: neither a frame nor a chunk, even if it names one.
    counter(json.dumps({"type": "notification", "action": "session.changed",
                        "payload": {"session_id": "s1", "last": "chunk99"}}))
    assert counter.frames == 4
    assert counter.last == {"s1": 4, "s2": 0}
    # An older frame arriving late does not move the count back.
    counter(_frame("session.message.updated", "s1", "chunk2 "))
    assert counter.last["s1"] == 4


def test_paired_ratios() -> None:
    d = paired([1.0, 2.0, 3.0], [2.0, 4.0, 6.0], "queued")
    assert d["plain_ms"]["p50"] == 2.0 and d["queued_ms"]["p50"] == 4.0
    assert d["ratio_p50"] == 2.0
    assert paired([], [1.0], "x")["ratio_p50"] is None


def _summary(p50: float, p99: float) -> dict[str, Any]:
    return {"n": 10, "p50": p50, "p90": p99, "p99": p99, "mean": p50, "min": p50, "max": p99}


def _results() -> dict[str, Any]:
    dialect = {"protocol": "acp", "ratio_p50": 1.4, "ratio_p99": 3.0,
               "ratio_p99_vs_floor_p99": 1.6, "ratio_pending_true_p50": 1.05,
               "floor_ms": 1.0, "floor_a_adapter_ms": _summary(0.5, 1.0),
               "e2e_ms": {"response": _summary(1.4, 3.0)}, "stages_ms": {}}
    variant = {"plain_ms": _summary(2.0, 4.0), "ratio_p50": 1.2, "ratio_p99": 1.0,
               "pending_true": {"ratio_p50": 1.0}}
    return {
        "command": "test",
        "latency": {"floor_b_ws_ping_ms": _summary(0.5, 1.0), "dialects": {"mock": dialect}},
        "storm": {"requests": 1000, "connections": 10, "operations": 1, "joined": [999],
                  "turn_stop_reason": "cancelled", "cancellation_changed_notifications": 2,
                  "answered": 1000, "all_answered_ms": 2000.0, "server_cpu_us_per_request": 1,
                  "answer_after_settle_ms": _summary(5.0, 19.0)},
        "fanout": [{"subscribers": n, "last_delivery_ms_median": last,
                    "last_delivery_ms_max": last, "server_cpu_us_per_frame": None,
                    "reps": [{"last_ms": last}]}
                   for n, last in ((1, 1.0), (100, 4.0), (1000, 31.0))],
        "burst": [{"sessions": n, "all_answered_ms": s, "all_settled_ms": s, "errors": 0,
                   "server_cpu_util_while_streaming": 0.5} for n, s in ((10, 20.0),
                                                                       (100, 120.0))],
        "streaming": {"sessions": 100, "window_s": 5.0, "chunks_per_s": 1000.0,
                      "expected_chunks_per_s": 1000, "frames_per_s": 1000.0,
                      "server_cpu_ms_per_chunk": 0.25, "server_cpu_ms_per_frame": 0.25,
                      "server_cpu_util": 0.25, "client_cpu_util": 0.1},
        "queued": {"dialects": {"mock": {**variant, "queued_ms": _summary(2.4, 4.0),
                                         "queue_parked_by_cancel": 10}}},
        "restored": {"dialects": {"mock": {**variant, "ratio_p50": 1.05,
                                           "restored_ms": _summary(2.1, 4.0),
                                           "prompt_to_first_chunk_on_restore_ms":
                                               _summary(80.0, 90.0),
                                           "restore_failed": 0}}},
        "peer_e2e": {"turnvisor_e2e_ms": _summary(2.0, 4.0), "peer_e2e_ms": _summary(1.0, 2.0),
                     "ratio_p50_turnvisor_vs_peer": 2.0, "ratio_p99_turnvisor_vs_peer": 2.0},
    }


def test_targets_of_issue_19() -> None:
    r = _results()
    met = {name: t["met"] for name, t in targets(r).items()}
    assert met == {
        "e2e_p50_le_1.5x_floor[mock]": True,
        "e2e_p99_le_1.5x_floor_p99[mock]": False,
        "pending_true_p50_at_floor[mock]": True,
        "storm_one_op_all_answered_p99_le_20ms": True,
        "fanout_100_last_le_5ms": True,
        "fanout_1000_last_le_30ms": False,
        "burst_100_all_settled_le_100ms": False,
        "streaming_100_server_cpu_ms_per_chunk_le_0.3": True,
        "queued_adds_nothing[mock]": False,
        "restored_adds_nothing[mock]": True,
        "peer_e2e_ratio_reported": True,
    }
    r["storm"]["cancellation_changed_notifications"] = 3
    assert not targets(r)["storm_one_op_all_answered_p99_le_20ms"]["met"]


def test_report_prints_the_new_figures() -> None:
    r = _results()
    r["targets"] = targets(r)
    text = report(r)
    for needle in ("server CPU 0.25 ms per chunk", "queued [mock]", "restored [mock]",
                   "e2e vs peer", "each rep 31.0", "MISSED fanout_1000_last_le_30ms"):
        assert needle in text


def _op(received_s: float, published_ms: float, outcome: str = "acknowledged") -> dict[str, Any]:
    return {"received_s": received_s, "outcome": outcome,
            "marks_ms": {"received": 0.0, "published": published_ms}}


def test_outside_stages_pair_the_last_operations_with_the_last_samples() -> None:
    # (request written, response read) on the host's clock, oldest first; the
    # first sample has no operation left (the server keeps the last ones).
    clock = [(0.5, 0.6), (1.0, 1.004), (2.0, 2.006), (3.0, 3.003)]
    ops = [_op(1.001, 2.0), _op(2.002, 3.0), _op(3.0005, 1.5)]
    out = outside_stages(ops, clock)
    assert out["paired"] == 3
    # inbound: 1, 2, 0.5 ms; outbound: (3 - 2), (4 - 3), (2.5 - 1.5) ms
    assert out["inbound"] == 1.0
    assert out["outbound"] == 1.0


def test_outside_stages_skip_what_does_not_pair() -> None:
    clock = [(1.0, 1.004), (2.0, 2.006)]
    # Received after the response was read: not this sample's operation.
    assert outside_stages([_op(1.5, 1.0), _op(2.5, 1.0)], clock) == {
        "paired": 0, "inbound": None, "outbound": None}
    # A late or escalated cancel is not the path the stages describe.
    assert outside_stages([_op(2.001, 1.0, "late")], clock)["paired"] == 0
    # An operation without the host-clock mark (an older server): nothing paired.
    old = _op(2.001, 1.0)
    del old["received_s"]
    assert outside_stages([old], clock)["paired"] == 0


def test_server_stages_are_split_by_the_kind_of_sample_that_bracketed_them() -> None:
    def op(received: float, marks: dict[str, float]) -> dict[str, object]:
        return {"received_s": received, "marks_ms": marks}

    windows = [("plain", 1.0, 1.01), ("queued", 2.0, 2.01), ("plain", 3.0, 3.01)]
    ops = [
        op(1.001, {"admitted": 0.01, "adapter_sent": 0.1, "agent_answered": 1.0,
                   "reconciled": 1.3, "published": 1.31}),
        op(2.001, {"admitted": 0.02, "adapter_sent": 0.2, "agent_answered": 1.2,
                   "reconciled": 1.6, "published": 1.61}),
        op(3.001, {"admitted": 0.01, "adapter_sent": 0.1, "agent_answered": 1.1,
                   "reconciled": 1.5, "published": 1.51}),
        op(5.0, {"admitted": 9.0}),  # no sample brackets it: not counted
        {"marks_ms": {"admitted": 9.0}},  # no received mark: not counted
    ]
    out = stages_by_kind(ops, windows)  # type: ignore[arg-type]
    assert out["queued"] == {"admitted": 0.02, "adapter_sent": 0.18, "agent_answered": 1.0,
                             "reconciled": 0.4, "published": 0.01, "n": 1}
    plain = out["plain"]
    assert plain["n"] == 2
    # Each stage from the mark before it: the medians of (0.9, 1.0) and (0.3, 0.4).
    assert plain["agent_answered"] == 0.95 and plain["reconciled"] == 0.35


def test_the_acp2_dialect_is_held_to_acp1_in_the_same_run() -> None:
    r = _results()
    v1 = r["latency"]["dialects"]["mock"]
    v2 = {**v1, "wire_protocol": "acp/2", "e2e_ms": {"response": _summary(1.5, 3.0)}}
    r["latency"]["dialects"]["mock-acp2"] = v2
    target = targets(r)["acp2_e2e_p50_le_1.1x_acp1"]
    assert target["value"] == round(1.5 / 1.4, 3) and target["met"]
    v2["e2e_ms"] = {"response": _summary(1.6, 3.0)}
    assert not targets(r)["acp2_e2e_p50_le_1.1x_acp1"]["met"]
    r["targets"] = targets(r)
    assert "[mock-acp2 / acp (acp/2)]" in report(r)
