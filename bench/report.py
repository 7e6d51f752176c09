"""The cancel-latency bench's text report and its targets block (issue 19)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["STAGES", "fmt", "report", "targets"]

STAGES = (
    ("admission", "received", "admitted"),
    ("adapter_send", "admitted", "adapter_sent"),
    ("agent_answer", "adapter_sent", "agent_answered"),
    ("reconcile_store", "agent_answered", "reconciled"),
    # The close's two halves: its text, decision and transaction; its notes and settle.
    ("close_commit", "agent_answered", "committed"),
    ("close_settle", "committed", "reconciled"),
    ("publish", "reconciled", "published"),
    ("server_total", "received", "published"),
)

#: Issue 19's targets (full run; ``--quick`` reports against the same figures).
E2E_P50_X_FLOOR = 1.5
E2E_P99_X_FLOOR_P99 = 1.5
PENDING_TRUE_X_FLOOR = 1.0
PENDING_TRUE_TOLERANCE = 1.1
STORM_P99_AFTER_SETTLE_MS = 20.0
FANOUT_LAST_MS = {100: 5.0, 1000: 30.0}
BURST_ALL_SETTLED_MS = 100.0
STREAMING_CPU_MS_PER_CHUNK = 0.3
ADDS_NOTHING_RATIO = 1.1
#: Issue 31: ACP v2's e2e p50 at most this many times v1's, in the same run.
ACP2_X_ACP1 = 1.1


def _target(value: Any, target: Any, met: bool) -> dict[str, Any]:
    return {"value": value, "target": target, "met": bool(met)}


def _le(value: float | None, limit: float) -> bool:
    return value is not None and not math.isnan(value) and value <= limit


def targets(r: dict[str, Any]) -> dict[str, Any]:
    """Where each target of issue 19 stands (only for the phases that ran)."""
    out: dict[str, Any] = {}
    for agent, d in r.get("latency", {}).get("dialects", {}).items():
        out[f"e2e_p50_le_{E2E_P50_X_FLOOR}x_floor[{agent}]"] = _target(
            d["ratio_p50"], E2E_P50_X_FLOOR, _le(d["ratio_p50"], E2E_P50_X_FLOOR))
        out[f"e2e_p99_le_{E2E_P99_X_FLOOR_P99}x_floor_p99[{agent}]"] = _target(
            d["ratio_p99_vs_floor_p99"], E2E_P99_X_FLOOR_P99,
            _le(d["ratio_p99_vs_floor_p99"], E2E_P99_X_FLOOR_P99))
        out[f"pending_true_p50_at_floor[{agent}]"] = _target(
            d["ratio_pending_true_p50"],
            f"{PENDING_TRUE_X_FLOOR} (met if <= {PENDING_TRUE_TOLERANCE})",
            _le(d["ratio_pending_true_p50"], PENDING_TRUE_TOLERANCE))
    dialects = r.get("latency", {}).get("dialects", {})
    if "mock" in dialects and "mock-acp2" in dialects:
        # Issue 31: the ACP v2 dialect costs no more than v1 in the same run.
        ratio = round(dialects["mock-acp2"]["e2e_ms"]["response"]["p50"]
                      / dialects["mock"]["e2e_ms"]["response"]["p50"], 3)
        out[f"acp2_e2e_p50_le_{ACP2_X_ACP1}x_acp1"] = _target(
            ratio, f"e2e p50 mock-acp2 / mock <= {ACP2_X_ACP1}", _le(ratio, ACP2_X_ACP1))
    if "storm" in r:
        s = r["storm"]
        p99 = s["answer_after_settle_ms"].get("p99")
        out[f"storm_one_op_all_answered_p99_le_{STORM_P99_AFTER_SETTLE_MS:g}ms"] = _target(
            {"operations": s["operations"],
             "notifications": s["cancellation_changed_notifications"],
             "answered": s["answered"], "p99_after_settle_ms": p99},
            f"1 op, 2 notifications, all answered, p99 <= {STORM_P99_AFTER_SETTLE_MS:g} ms",
            s["operations"] == 1 and s["cancellation_changed_notifications"] == 2
            and s["answered"] == s["requests"] and _le(p99, STORM_P99_AFTER_SETTLE_MS))
    for f in r.get("fanout", []):
        limit = FANOUT_LAST_MS.get(f["subscribers"])
        if limit is not None:
            out[f"fanout_{f['subscribers']}_last_le_{limit:g}ms"] = _target(
                f["last_delivery_ms_median"], limit, _le(f["last_delivery_ms_median"], limit))
    if r.get("burst"):
        b = max(r["burst"], key=lambda b: b["sessions"])
        out[f"burst_{b['sessions']}_all_settled_le_{BURST_ALL_SETTLED_MS:g}ms"] = _target(
            b["all_settled_ms"], BURST_ALL_SETTLED_MS,
            _le(b["all_settled_ms"], BURST_ALL_SETTLED_MS))
    if "streaming" in r:
        st = r["streaming"]
        out[f"streaming_{st['sessions']}_server_cpu_ms_per_chunk_le_"
            f"{STREAMING_CPU_MS_PER_CHUNK}"] = _target(
            st["server_cpu_ms_per_chunk"], STREAMING_CPU_MS_PER_CHUNK,
            _le(st["server_cpu_ms_per_chunk"], STREAMING_CPU_MS_PER_CHUNK))
    for phase in ("queued", "restored", "checkpointed"):
        for agent, d in r.get(phase, {}).get("dialects", {}).items():
            out[f"{phase}_adds_nothing[{agent}]"] = _target(
                d["ratio_p50"], f"e2e p50 / paired plain p50 <= {ADDS_NOTHING_RATIO}",
                _le(d["ratio_p50"], ADDS_NOTHING_RATIO))
    if "peer_e2e" in r and "ratio_p50_turnvisor_vs_peer" in r["peer_e2e"]:
        ratio = r["peer_e2e"]["ratio_p50_turnvisor_vs_peer"]
        out["peer_e2e_ratio_reported"] = _target(
            ratio, "reported: e2e p50 turnvisor / minimal asyncio + ACP SDK peer",
            _le(ratio, math.inf))
    stops = r.get("stop_levels", {})
    for agent, d in stops.get("after_step", {}).get("dialects", {}).items():
        # Issue 42: the step's end to the protocol cancel's write.
        p50 = d["server_step_over_to_adapter_sent_ms"].get("p50")
        out[f"after_step_cancel_written_p50_le_{d['target_p50_ms']:g}ms[{agent}]"] = _target(
            p50, d["target_p50_ms"], bool(d["target_met"]))
    if "stop_all" in stops:
        sa = stops["stop_all"]
        out[f"stop_all_{sa['sessions']}_answered_le_{sa['target_ms']:g}ms"] = _target(
            sa["answer_ms"], sa["target_ms"], bool(sa["target_met"]))
    if "peer" in r:
        ratio = r["peer"]["ratio_p50_turnvisor_vs_sdk"]
        out["peer_adapter_ratio_reported"] = _target(
            ratio, "reported: adapter p50 turnvisor / ACP SDK", _le(ratio, math.inf))
    return out


def fmt(s: dict[str, Any]) -> str:
    if not s.get("n"):
        return "n=0"
    return f"p50 {s['p50']:.3f} p90 {s['p90']:.3f} p99 {s['p99']:.3f} ms (n={s['n']})"


def _latency(r: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    lat = r.get("latency", {"dialects": {}})
    if "floor_b_ws_ping_ms" in lat:
        lines.append(f"floor (b) WebSocket ping: {fmt(lat['floor_b_ws_ping_ms'])}")
    for agent, d in lat["dialects"].items():
        wire = d.get("wire_protocol")
        lines.append(f"[{agent} / {d['protocol']}" + (f" ({wire})]" if wire else "]"))
        lines.append(f"  floor (a) adapter cancel→cancelled: {fmt(d['floor_a_adapter_ms'])}")
        if "floor_a_upstream_closed_ms" in d:
            lines.append(f"  floor (a) cancel→model stream closed: "
                         f"{fmt(d['floor_a_upstream_closed_ms'])}")
        for stage, s in d["e2e_ms"].items():
            lines.append(f"  e2e request → {stage:<13} {fmt(s)}")
        lines.append(f"  floor (a)+(b) p50 = {d['floor_ms']} ms; e2e/floor: p50 "
                     f"{d['ratio_p50']}x, p99 {d['ratio_p99']}x, p99 vs floors' p99 "
                     f"{d['ratio_p99_vs_floor_p99']}x; pending true p50/floor "
                     f"{d['ratio_pending_true_p50']}x")
        st = d["stages_ms"]
        lines.append("  server stages (median ms): " + ", ".join(
            f"{n} {st.get(n)}" for n, _, _ in STAGES) + f", outside server "
            f"{st.get('outside_server_ms')} (inbound {st.get('inbound')}, outbound "
            f"{st.get('outbound')}; {st.get('paired')} cancels paired)")
    return lines


def _scale(r: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for lv in r.get("busy", {}).get("levels", []):
        extra = (f"  ({lv['load_frames_per_s']} frames/s streamed; p50 vs paired idle "
                 f"{lv['ratio_p50_vs_paired_idle']}x)" if lv["busy_sessions"] else "")
        lines.append(f"busy {lv['busy_sessions']:>3} sessions: e2e "
                     f"{fmt(lv['e2e_response_ms'])}{extra}")
    for b in r.get("burst", []):
        lines.append(f"burst of {b['sessions']:>3} cancels: all answered "
                     f"{b['all_answered_ms']} ms, all settled {b['all_settled_ms']} ms, "
                     f"errors {b['errors']} (server CPU while the {b['sessions']} streamed: "
                     f"{b['server_cpu_util_while_streaming']:.0%} of a core; during the "
                     f"burst: server CPU {b.get('server_cpu_ms')} ms, client "
                     f"{b.get('client_cpu_ms')} ms, agents {b.get('agents_cpu_ms')} ms: "
                     f"{b.get('cpu_bound_ms')} ms with every core busy)")
    s = r.get("storm")
    if s:
        lines.append(
            f"storm: {s['requests']} duplicate cancels over {s['connections']} connections: "
            f"{s['operations']} operation(s) (joined {s['joined']}, turn ended "
            f"{s['turn_stop_reason']}), {s['cancellation_changed_notifications']} "
            f"cancellation_changed, {s['answered']} answered in {s['all_answered_ms']} ms; "
            f"after settle {fmt(s['answer_after_settle_ms'])}; server CPU "
            f"{s['server_cpu_us_per_request']} us/request")
    for f in r.get("fanout", []):
        cpu = (f"; CPU per frame: server {f['server_cpu_us_per_frame']} us, client "
               f"{f['client_cpu_us_per_frame']} us" if f["server_cpu_us_per_frame"] else "")
        reps = ", ".join(str(rep["last_ms"]) for rep in f["reps"])
        lines.append(f"fan-out to {f['subscribers']:>4} subscribers: last delivery median "
                     f"{f['last_delivery_ms_median']} ms (max {f['last_delivery_ms_max']} ms; "
                     f"each rep {reps}){cpu}; no-framework floor: send "
                     f"{f.get('floor_send_ms')} ms, receive {f.get('floor_receive_ms')} ms")
    st = r.get("streaming")
    if st:
        lines.append(
            f"streaming, {st['sessions']} sessions over {st['window_s']} s: "
            f"{st['chunks_per_s']} chunks/s (expected {st['expected_chunks_per_s']}), "
            f"{st['frames_per_s']} message frames/s; server CPU {st['server_cpu_ms_per_chunk']}"
            f" ms per chunk, {st['server_cpu_ms_per_frame']} ms per frame "
            f"({st['server_cpu_util']:.0%} of a core; client {st['client_cpu_util']:.0%}), "
            f"text appends; with whole-message updates "
            f"{st.get('whole_messages', {}).get('server_cpu_ms_per_chunk')} ms per chunk")
    for m in r.get("memory", []):
        lines.append(f"memory, {m['idle_sessions']} idle sessions: backend "
                     f"{m['backend_kb_per_session']} KiB/session RSS; each agent RSS "
                     f"{m['agent_rss_mb_mean']} MiB (USS {m['agent_uss_mb_mean']} MiB)")
    return lines


def _variants(r: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for phase, extra in (("queued", "queue_parked_by_cancel"),
                         ("restored", "restore_failed"), ("checkpointed", None)):
        for agent, d in r.get(phase, {}).get("dialects", {}).items():
            lines.append(f"{phase} [{agent}]: e2e → response plain {fmt(d['plain_ms'])} | "
                         f"{phase} {fmt(d[f'{phase}_ms'])} | ratio p50 {d['ratio_p50']}, "
                         f"p99 {d['ratio_p99']}; pending true ratio p50 "
                         f"{d['pending_true']['ratio_p50']}"
                         + (f"; {extra} {d[extra]}" if extra else ""))
            if phase == "restored":
                lines.append(f"  restored prompt → first chunk: "
                             f"{fmt(d['prompt_to_first_chunk_on_restore_ms'])}")
            for kind, st in d.get("server_stages_ms", {}).items():
                lines.append(f"  server stages, {kind} (median ms, {st['n']} cancels): "
                             + ", ".join(f"{k} {v}" for k, v in st.items() if k != "n"))
    p = r.get("peer")
    if p:
        lines.append(f"adapter vs ACP SDK (cancel→cancelled): turnvisor "
                     f"{fmt(p['turnvisor_adapter_ms'])} | sdk {fmt(p['acp_sdk_ms'])} | "
                     f"p50 ratio {p['ratio_p50_turnvisor_vs_sdk']}")
    pe = r.get("peer_e2e")
    if pe and "skipped" in pe:
        lines.append(f"e2e vs peer: skipped ({pe['skipped']})")
    elif pe:
        lines.append(f"e2e vs peer (asyncio + websockets + ACP SDK), cancel → response: "
                     f"turnvisor {fmt(pe['turnvisor_e2e_ms'])} | peer {fmt(pe['peer_e2e_ms'])}"
                     f" | ratio p50 {pe['ratio_p50_turnvisor_vs_peer']}, p99 "
                     f"{pe['ratio_p99_turnvisor_vs_peer']}")
    return lines


def report(r: dict[str, Any]) -> str:
    lines = [f"Turnvisor cancel latency — {r['command']}", ""]
    lines += _latency(r)
    lines.append("")
    lines += _scale(r)
    lines += _variants(r)
    lines.append("")
    lines.append("targets (issue 19):")
    for name, t in r["targets"].items():
        lines.append(f"  {'MET   ' if t['met'] else 'MISSED'} {name}: {t['value']} "
                     f"(target {t['target']})")
    return "\n".join(lines)
