"""The stage breakdown of bench/cancel_stamps.py and the close's split in the bench's stages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.cancel_stamps import analyse, load
from bench.latency import stage_summary


def _cancel(t0: int, *, agent_us: int, extra: tuple[str, int] | None = None
            ) -> list[tuple[int, str]]:
    """One cancel's stamps (ns), ``t0`` the client's write; the agent takes ``agent_us``."""
    us = 1000
    answer = t0 + (300 + agent_us) * us
    stamps = [(t0, "c.sendC"), (t0 + 100 * us, "s.ws_recv"), (t0 + 300 * us, "s.agent_w"),
              (t0 + 350 * us, "a.r"), (t0 + 500 * us, "s.ob_w3"), (t0 + 600 * us, "c.recv"),
              (answer - 5 * us, "a.w"), (answer, "s.agent_r"),
              (answer + 200 * us, "s.committed"), (answer + 400 * us, "s.published"),
              (answer + 450 * us, "s.ob_w9"), (answer + 500 * us, "c.recv"),
              (answer + 900 * us, "c.send")]
    if extra is not None:
        stamps.append((t0 + extra[1] * us, extra[0]))
    return stamps


def test_spans_and_stages_per_cancel(tmp_path: Path) -> None:
    server = _cancel(10**9, agent_us=800) + _cancel(2 * 10**9, agent_us=1000,
                                                     extra=("q.begun", 50))
    # Spread over per-process files as the patch writes them, in no order.
    (tmp_path / "st.1").write_text("".join(f"{t} {n}\n" for t, n in reversed(server)))
    (tmp_path / "st.2").write_text("")
    result = analyse(load(tmp_path))
    assert result["cancels"] == 2
    assert result["spans_us"] == {"down": 300.0, "agent": 900.0, "back": 450.0,
                                  "to_client": 50.0, "total": 1700.0}
    stages = [row["stage"] for row in result["stages_us"]]
    # The same name before and after the agent's answer is two stages; the
    # agent's late stamp after its write is left out, and so is what follows the
    # client's read; a stage one cancel of two reaches is half of them: listed.
    assert stages == ["c.sendC", "q.begun", "s.ws_recv", "s.agent_w", "a.r", "s.ob_w", "c.recv",
                      "s.agent_r'", "s.committed'", "s.published'", "s.ob_w'", "c.recv'"]
    assert "a.w" not in stages and "c.send'" not in stages


def test_a_stage_fewer_than_half_the_cancels_reach_is_not_listed(tmp_path: Path) -> None:
    stamps = (_cancel(10**9, agent_us=800, extra=("q.begun", 50))
              + _cancel(2 * 10**9, agent_us=800) + _cancel(3 * 10**9, agent_us=800))
    (tmp_path / "st.7").write_text("".join(f"{t} {n}\n" for t, n in stamps))
    result = analyse(load(tmp_path))
    assert result["cancels"] == 3
    assert "q.begun" not in [row["stage"] for row in result["stages_us"]]


def test_a_cancel_without_its_answer_is_not_counted(tmp_path: Path) -> None:
    whole = _cancel(10**9, agent_us=800)
    cut = [s for s in _cancel(2 * 10**9, agent_us=800) if s[1] not in ("s.published", "c.send")]
    (tmp_path / "st.3").write_text("".join(f"{t} {n}\n" for t, n in whole + cut))
    assert analyse(load(tmp_path))["cancels"] == 1


def test_the_close_is_split_at_its_commit() -> None:
    marks = {"received": 0.0, "admitted": 0.01, "adapter_sent": 0.08, "agent_answered": 1.0,
             "committed": 1.3, "reconciled": 1.4, "published": 1.55}
    ops: list[dict[str, Any]] = [{"outcome": "acknowledged", "marks_ms": marks}]
    out = stage_summary(ops, e2e_p50=2.0)
    assert out["close_commit"] == 0.3
    assert out["close_settle"] == 0.1
    assert out["reconcile_store"] == 0.4
    # A run of a server without the mark (an older checkout) reports no split.
    del marks["committed"]
    out = stage_summary(ops, e2e_p50=2.0)
    assert out["close_commit"] is None and out["close_settle"] is None
