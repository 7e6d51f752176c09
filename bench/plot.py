"""The benchmark's PNG: latency distributions and scaling curves (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

__all__ = ["plot"]


def _cdf(ax: Any, values: list[float], label: str, **kw: Any) -> None:
    if not values:
        return
    xs = np.sort(np.asarray(values))
    ys = np.arange(1, len(xs) + 1) / len(xs)
    ax.step(xs, ys, where="post", label=label, **kw)


def _logx(ax: Any) -> None:
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def plot(r: dict[str, Any], path: Path) -> None:
    fig, axes = plt.subplots(2, 3, figsize=(17, 9.5))
    lat = r["latency"]

    ax = axes[0][0]
    for agent, d in lat["dialects"].items():
        _cdf(ax, d["e2e_samples_ms"]["response"], f"e2e → response ({agent})")
        _cdf(ax, d["e2e_samples_ms"]["pending_true"], f"e2e → pending true ({agent})",
             linestyle=":")
        _cdf(ax, d["floor_a_samples_ms"], f"floor (a) adapter ({agent})", linestyle="--")
    _cdf(ax, lat["floor_b_samples_ms"], "floor (b) WS ping", linestyle="--", color="black")
    _logx(ax)
    ax.set_xlabel("ms (log)")
    ax.set_ylabel("fraction of cancels")
    ax.set_title(f"Cancel latency CDF (ratio p50 {r['ratio_p50']}x, p99 {r['ratio_p99']}x)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")

    ax = axes[0][1]
    names = ["admission", "adapter_send", "agent_answer", "reconcile_store", "publish",
             "outside_server_ms"]
    width = 0.8 / max(len(lat["dialects"]), 1)
    for i, (agent, d) in enumerate(lat["dialects"].items()):
        vals = [d["stages_ms"].get(n) or 0 for n in names]
        ax.bar(np.arange(len(names)) + i * width, vals, width, label=agent)
    ax.set_xticks(np.arange(len(names)) + width * (len(lat["dialects"]) - 1) / 2)
    ax.set_xticklabels(["admission", "adapter\nsend", "agent\nanswer", "reconcile\n/store",
                        "publish", "gateway +\nWS (rest)"], fontsize=8)
    ax.set_ylabel("median ms")
    ax.set_title("Where one cancel's time goes (server marks)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)

    ax = axes[0][2]
    peer = r["peer"]
    _cdf(ax, peer["samples_ms"]["turnvisor"], "Turnvisor adapter (trio)")
    _cdf(ax, peer["samples_ms"]["acp-sdk"], "official ACP SDK (asyncio)")
    _logx(ax)
    ax.set_xlabel("ms (log)")
    ax.set_title(f"Same mock agent, cancel → cancelled (p50 ratio "
                 f"{peer['ratio_p50_turnvisor_vs_sdk']})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")

    ax = axes[1][0]
    levels = r["busy"]["levels"]
    xs = [lv["busy_sessions"] for lv in levels]
    for q in ("p50", "p90", "p99"):
        ax.plot(xs, [lv["e2e_response_ms"][q] for lv in levels], marker="o", label=q)
    ax.set_xlabel("other sessions streaming")
    ax.set_ylabel("e2e cancel ms")
    ax.set_title(f"E2E under load (p50 ratio {r['busy']['ratio_p50_max_vs_0']}x)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)

    ax = axes[1][1]
    burst = r["burst"]
    ax.plot([b["sessions"] for b in burst], [b["all_settled_ms"] for b in burst], marker="o",
            label="burst: all settled")
    fan = r["fanout"]
    ax.plot([f["subscribers"] for f in fan], [f["last_delivery_ms_median"] for f in fan],
            marker="s", label="fan-out: last delivery (median)")
    ax.axhline(100, color="grey", linestyle=":", label="fan-out target 100 ms")
    _logx(ax)
    ax.set_xlabel("sessions (burst) / subscribers (fan-out), log")
    ax.set_ylabel("ms")
    ax.set_title("Bursts and fan-out")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)

    ax = axes[1][2]
    storm = r["storm"]
    ax.set_title(f"Storm: {storm['requests']} duplicates, {storm['operations']} op, "
                 f"p99 after settle {storm['answer_after_settle_ms'].get('p99')} ms")
    ax.axis("off")
    mem = r["memory"][-1]
    text = [
        f"storm answered: {storm['answered']}/{storm['requests']} in "
        f"{storm['all_answered_ms']} ms",
        f"cancellation_changed notifications: {storm['cancellation_changed_notifications']}",
        "",
        f"memory ({mem['idle_sessions']} idle sessions):",
        f"  backend RSS {mem['backend_kb_per_session']} KiB / session",
        f"  agent RSS {mem['agent_rss_mb_mean']} MiB, USS {mem['agent_uss_mb_mean']} MiB each",
        "",
        "targets:",
        *(f"  {'met   ' if t['met'] else 'MISSED'} {name}" for name, t in r["targets"].items()),
        "",
        r["command"],
    ]
    ax.text(0.0, 1.0, "\n".join(text), va="top", family="monospace", fontsize=8,
            transform=ax.transAxes)

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
