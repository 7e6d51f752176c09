"""DESIGN.md §18, the rule of a stop after the step as a table (supervisor/turn/steps.py),
and its bound on virtual time: the wait is bounded by ``after_step_timeout_s`` (then a cancel
now), and a step that ends writes the cancel before the agent goes on."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from protocols.events import MessageChunk, PermissionRequested, ToolCallStarted, ToolCallUpdated
from supervisor.turn.steps import StepWait, ToolCalls
from supervisor.turn.turn_outcome import StopWhen
from tests.support.sessions import new_session

from .conftest import SupervisorFactory
from .fake_agent import FakeLauncher


def _started(tid: str, status: str = "in_progress") -> ToolCallStarted:
    return ToolCallStarted(tool_call_id=tid, title=f"run {tid}", status=status)


def _updated(tid: str, status: str | None) -> ToolCallUpdated:
    return ToolCallUpdated(tool_call_id=tid, status=status)


ASK = PermissionRequested(request_id="r1", title="may I?", options=())

#: (tool calls running at acceptance, the events after it, due after each event)
RULE = [
    # the awaited call finishes (completed / failed / cancelled by the agent): due
    (["a"], [_updated("a", "completed")], [True]),
    (["a"], [_updated("a", "failed")], [True]),
    (["a"], [_updated("a", "cancelled")], [True]),
    # its own progress, text, a status that is not an end: not due
    (["a"], [_updated("a", "in_progress"), MessageChunk(text="x"), _updated("a", None)],
     [False, False, False]),
    # two awaited: due when the last one ends, in any order
    (["a", "b"], [_updated("b", "completed"), _updated("a", "completed")], [False, True]),
    # a call that starts meanwhile does not extend the wait (it is cut with the turn)
    (["a"], [_started("c"), _updated("a", "completed")], [False, True]),
    # a permission request meanwhile: due at once (the cancel answers it)
    (["a"], [ASK], [True]),
]


@pytest.mark.parametrize(("running", "events", "due"), RULE)
def test_when_the_cancel_is_due(running: list[str], events: list[object],
                                due: list[bool]) -> None:
    tools = ToolCalls()
    for tid in running:
        tools.see(_started(tid))
    wait = StepWait.of(tools)
    assert wait is not None and wait.awaited == frozenset(running)
    assert wait.title == f"run {running[0]}"
    seen = []
    for event in events:
        tools.see(event)
        seen.append(wait.over(event, tools))
    assert seen == due


def test_with_nothing_running_there_is_no_wait() -> None:
    tools = ToolCalls()
    assert StepWait.of(tools) is None
    tools.see(_started("done-at-once", status="completed"))  # reported already finished
    assert StepWait.of(tools) is None
    assert tools.finished == ["done-at-once"]


def test_the_receipt_s_tool_calls() -> None:
    tools = ToolCalls()
    for event in (_started("a"), _started("b"), _started("c"), _updated("a", "completed"),
                  _updated("b", "failed"), _updated("a", "completed")):
        tools.see(event)
    tools.cut()  # the turn ended with "c" still running
    assert tools.finished == ["a", "b"]  # a failed call ran to its end: finished
    assert tools.cancelled == ["c"]
    assert tools.running == {}


async def test_the_wait_is_bounded_then_it_is_a_cancel_now(
        make_supervisor: SupervisorFactory, autojump_clock: MockClock) -> None:
    launcher = FakeLauncher()
    async with make_supervisor(launcher=launcher, inline=True, after_step_timeout_s=7) as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.send_message(caller, sid, "/tool 60000")
        await trio.sleep(0.25)
        ex = sup.lifecycle.executions[sid]
        turn = ex.turn
        assert turn is not None and turn.tools.running
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            async def cancel() -> None:
                op = await sup.orchestrator.cancel_operation(caller, sid, when=StopWhen.AFTER_STEP)
                assert op.outcome is not None
            nursery.start_soon(cancel)
            await trio.sleep(6.9)
            assert turn.cancel_phase == "after_step"  # still waiting for the step
            assert launcher.agents[0].cancels == 0  # nothing written to the agent yet
            await trio.sleep(0.2)
            assert turn.cancel_phase != "after_step"  # the bound passed: a cancel now
        assert 7.0 <= trio.current_time() - start < 8.0
        assert launcher.agents[0].cancels >= 1
        assert not sup.notify.projection.get(sid).pending


async def test_a_step_that_ends_writes_the_cancel_in_the_same_step(
        make_supervisor: SupervisorFactory, autojump_clock: MockClock) -> None:
    launcher = FakeLauncher()
    async with make_supervisor(launcher=launcher, inline=True) as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.send_message(caller, sid, "/steps 3 2000")
        await trio.sleep(0.25)
        start = trio.current_time()
        op = await sup.orchestrator.cancel_operation(caller, sid, when=StopWhen.AFTER_STEP)
        # The first step ran its 2 s; the next never started (the mock thinks 100 ms
        # between steps, and the cancel came before).
        assert 1.5 < trio.current_time() - start < 2.5
        assert op.receipt is not None
        assert len(op.receipt["tool_calls"]["finished"]) == 1, op.receipt
        assert op.receipt["tool_calls"]["cancelled"] == [], op.receipt
        assert op.receipt["when"] == "after_step" and op.receipt["outcome"] == "cancelled"
