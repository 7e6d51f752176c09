"""The cancel path's timeout tests are specifications on virtual time: at least
80% of those in tests/supervisor run on MockClock (issue 45 item 5), counted
from the sources by tests/support/clock_census.py; the ones that stay on the
real clock are named here with the reason."""

from __future__ import annotations

from pathlib import Path

from tests.support.clock_census import ROOT, census

#: Real processes are these tests' subject, not a rule of time: what dies with
#: an escalated agent's process tree (/proc, real tool processes), and the
#: restore of a real agent process that replaced a killed one.
STAYS_REAL = {
    "test_containment.py::test_an_escalated_agents_tool_dies_when_the_agent_is_replaced",
    "test_continuity.py::test_restore_after_an_escalation_replaced_the_agent",
}


def test_four_in_five_of_the_cancel_paths_timeout_tests_run_on_mock_clock() -> None:
    result = census([ROOT / "tests" / "supervisor"])
    assert len(result.tests) >= 20  # the census still finds them
    real = {f"{Path(t.path).name}::{t.name}" for t in result.real_time()}
    assert real <= STAYS_REAL, f"on the real clock, not said why: {real - STAYS_REAL}"
    assert result.share >= 0.8


def test_the_census_tells_a_real_clock_from_virtual_time(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text('''
import trio
from trio.testing import MockClock

WINDOW = {"timeouts": {"cancel_join_s": 1}}

async def _running(make_supervisor):
    return make_supervisor(cancel_escalate_s=2)

async def test_real(make_supervisor):
    await _running(make_supervisor)

async def test_virtual(make_supervisor, autojump_clock):
    await _running(make_supervisor)

def test_own_clock():
    trio.run(lambda: None, clock=MockClock(autojump_threshold=0), **WINDOW)

def test_a_table_waits_for_nothing():
    assert "cancel_join_s"

async def test_no_timeout(make_supervisor):
    await make_supervisor(turn_s=5)

class TestGroup:
    async def test_grace(self, sup):
        assert sup.timeouts.term_grace_s
''', encoding="utf-8")
    result = census([tmp_path])
    got = {t.name: (t.mock_clock, sorted(t.timeouts)) for t in result.tests}
    assert got == {
        "test_real": (False, ["cancel_escalate_s"]),
        "test_virtual": (True, ["cancel_escalate_s"]),
        "test_own_clock": (True, ["cancel_join_s"]),
        "TestGroup.test_grace": (False, ["term_grace_s"]),
    }
    assert result.on_mock_clock == 2 and result.share == 0.5
