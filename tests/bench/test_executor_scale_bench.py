"""The executor scale bench (bench/executor_scale.py) end to end on tiny sizes: a
real server, a real sshd, the mock agent on each executor; the shape of its
result, and figures that come from the runs (not a timed test: no bound on
how fast, and the ssh target is reported, not asserted)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import trio

from bench.executor_scale import PROFILES, measure, report
from tests.ssh.sshd import running_sshd

SESSIONS = 2
SAMPLES = 2


def _real(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0


async def test_each_executor_holds_its_sessions_and_is_measured(tmp_path: Path) -> None:
    with running_sshd(tmp_path / "sshd") as sshd, trio.fail_after(240):
        out = await measure(sshd, SESSIONS, SAMPLES)
        # Every agent the bench started on the host ran until the server stopped.
        assert list((sshd.remote_data / "agentctl").glob("*/*")) == []
    assert set(out["executors"]) == set(PROFILES) == {"local", "agentctl", "ssh"}
    for executor, figures in out["executors"].items():
        # The sessions held: one live agent each (the cancel sessions came after).
        assert (figures["sessions_held"], figures["live_agents"]) == (SESSIONS, SESSIONS), \
            (executor, figures)
        assert figures["launch_ms"]["n"] == SESSIONS and _real(figures["launch_ms"]["p50"])
        for stage in ("response", "waiting"):
            measured = figures["cancel_e2e_ms"][stage]
            assert measured["n"] == SAMPLES and _real(measured["p50"]), (executor, measured)
        assert isinstance(figures["rss_per_session_kib"], float)
    assert out["ssh_minus_local_p50_ms"] == round(
        out["executors"]["ssh"]["cancel_e2e_ms"]["response"]["p50"]
        - out["executors"]["local"]["cancel_e2e_ms"]["response"]["p50"], 3)
    assert "skipped" in out["kubernetes"]
    text = report(out)
    assert [line.split()[0] for line in text.splitlines()[1:4]] == ["local", "agentctl", "ssh"]
