"""DESIGN.md §18: each agent's cancel figures from its stored receipts, and the note when a new
version's differ markedly from the version before (logged once)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from supervisor.stops import COMPARE_AFTER, figures_of
from tests.support.sessions import new_session

from .conftest import SupervisorFactory


def _receipt(ms: float | None, version: str, **extra: Any) -> dict[str, Any]:
    return {"turn_id": "t", "outcome": "cancelled", "by": "user", "when": "now",
            "accepted_at": "2026-12-07T00:00:00.000Z", "confirmed_ms": ms,
            "tool_calls": {"finished": [], "cancelled": []},
            "subagents": {"stopped": [], "running": []}, "queue_parked": 0,
            "files_changed": None, "revertible": False, "strays": [],
            "agent_version": version, "resent": 0} | extra


def test_the_figures_of_one_version() -> None:
    receipts = [_receipt(float(ms), "a 1") for ms in range(1, 101)]
    receipts.append(_receipt(None, "a 1", outcome="escalated"))
    receipts.append(_receipt(40.0, "a 1", resent=1))
    got = figures_of(receipts)
    assert got["count"] == 102 and got["escalated"] == 1 and got["dropped_early"] == 1
    assert 49 <= got["p50_ms"] <= 51 and 94 <= got["p95_ms"] <= 96
    assert got["version"] == "a 1"
    assert figures_of([]) == {"count": 0, "p50_ms": None, "p95_ms": None, "escalated": 0,
                              "dropped_early": 0, "version": None}


@pytest.mark.parametrize(("old_ms", "new_ms", "noted"),
                         [(10.0, 30.0, True), (30.0, 10.0, True), (10.0, 15.0, False)])
async def test_a_new_version_that_differs_markedly_is_noted_once(
        make_supervisor: SupervisorFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        old_ms: float, new_ms: float, noted: bool) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup)
        db = sup.store.db
        # Stored receipts, oldest first: the old version's, then the new one's.
        for i in range(2 * COMPARE_AFTER):
            version, ms = ("mock 1", old_ms) if i < COMPARE_AFTER else ("mock 2", new_ms)
            turn, *_ = db.open_turn(sid, f"turn {i}")
            db.close_turn(turn.id, state="cancelled", stop_reason="cancelled")
            db.conn.execute("UPDATE turns SET ended_at = ? WHERE id = ?",
                            (f"2026-12-07T00:00:{i:02d}.000Z", turn.id))
            db.set_receipt(turn.id, _receipt(ms, version, turn_id=turn.id), None)
        with caplog.at_level(logging.WARNING, logger="supervisor.stops"):
            first = {p["name"]: p for p in await sup.stops.figures(["mock"])}["mock"]
            again = {p["name"]: p for p in await sup.stops.figures(["mock"])}["mock"]
        assert first["cancel"]["version"] == "mock 2"
        assert first["cancel"]["count"] == COMPARE_AFTER
        assert (first["note"] is not None) is noted
        assert again["note"] == first["note"]
        logged = [r for r in caplog.records if "confirms a cancel" in r.getMessage()]
        assert len(logged) == (1 if noted else 0)
        del caller
