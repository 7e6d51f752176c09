"""Every timeout of the cancel path, on virtual time (MockClock, autojump)."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from supervisor.errors import CancelFailed
from supervisor.models import CANCELLED_STATUS, SessionState
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor
from supervisor.session.lifecycle import CancelOutcome
from tests.support.bus_frames import queued
from tests.support.messages import status_messages
from tests.support.sessions import new_session

from .conftest import SupervisorFactory
from .fake_agent import FakeLauncher


async def _running(sup: Supervisor, prompt: str) -> tuple[Caller, str]:
    caller, sid = await new_session(sup)
    await sup.orchestrator.send_message(caller, sid, prompt)
    await trio.sleep(0.25)
    return caller, sid


async def test_join_window_passes_to_late_then_late_ack_settles(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    launcher = FakeLauncher()
    async with make_supervisor(launcher=launcher, inline=True, cancel_join_s=3,
                               cancel_escalate_s=10) as sup:
        caller, sid = await _running(sup, "/slow 5000")
        ex = sup.lifecycle.executions[sid]
        outcome: list[CancelOutcome] = []
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            async def cancel() -> None:
                outcome.append(await sup.orchestrator.cancel(caller, sid))
            nursery.start_soon(cancel)
            await trio.sleep(2.9)
            turn = ex.turn
            assert turn is not None and turn.cancel_phase == "sent"  # inside the join window
            await trio.sleep(0.2)
            assert turn.cancel_phase == "late"  # not acknowledged within it
            assert sup.notify.projection.get(sid).pending
        assert outcome == [CancelOutcome.LATE]
        # /slow 5000 started 0.25 s before the cancel: it ends at ~4.75 s.
        assert 4.5 < trio.current_time() - start < 5.0
        session = await sup.orchestrator.session(caller, sid)
        assert session.state is SessionState.WAITING_FOR_INPUT
        assert [m.content for m in await status_messages(sup, caller, sid)] == [CANCELLED_STATUS]
        assert not sup.notify.projection.get(sid).pending


async def test_escalation_completes_a_turn_the_agent_never_ends(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    launcher = FakeLauncher()
    async with make_supervisor(launcher=launcher, inline=True, cancel_join_s=3,
                               cancel_escalate_s=10) as sup:
        caller, sid = await _running(sup, "/hang")
        start = trio.current_time()
        assert await sup.orchestrator.cancel(caller, sid) is CancelOutcome.ESCALATED
        assert 10 <= trio.current_time() - start < 10 + sup.config.timeouts.cancel_cleanup_s
        session = await sup.orchestrator.session(caller, sid)
        assert session.state is SessionState.WAITING_FOR_INPUT
        assert len(await status_messages(sup, caller, sid)) == 1
        ex = sup.lifecycle.executions[sid]
        assert ex.status.value == "READY" and ex.turn is None
        # The next prompt works.  The old agent still owes an answer to the
        # abandoned turn, so it is replaced by a fresh one first.
        await sup.orchestrator.send_message(caller, sid, "hello again")
        await trio.sleep(0.5)
        assert (await sup.orchestrator.session(caller, sid)).state is \
            SessionState.WAITING_FOR_INPUT
        assert [a.prompts for a in launcher.agents] == [["/hang"], ["hello again"]]


async def test_operation_deadline_fails_and_leaves_the_session_retryable(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock,
) -> None:
    async with make_supervisor(launcher=FakeLauncher(), inline=True, cancel_join_s=5,
                               cancel_escalate_s=20, cancel_operation_s=2) as sup:
        caller, sid = await _running(sup, "/hang")
        start = trio.current_time()
        with pytest.raises(CancelFailed, match="did not complete within 2s"):
            await sup.orchestrator.cancel(caller, sid)
        assert trio.current_time() - start == pytest.approx(2, abs=0.01)
        assert sup.notify.projection.get(sid).pending is False
        assert (await sup.orchestrator.session(caller, sid)).state is SessionState.RUNNING
        # A retry is a new operation.
        with pytest.raises(CancelFailed):
            await sup.orchestrator.cancel(caller, sid)
        assert sup.orchestrator.operations_started == 2
        assert sup.notify.projection.get(sid).revision == 4


async def test_prompt_returns_cancelled_within_join_window(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    launcher = FakeLauncher()
    async with make_supervisor(launcher=launcher, inline=True) as sup:
        caller, sid = await _running(sup, "/delay 60000")
        start = trio.current_time()
        assert await sup.orchestrator.cancel(caller, sid) is CancelOutcome.ACKNOWLEDGED
        assert trio.current_time() - start < 0.01
        assert launcher.agents[0].cancels == 1


async def test_duplicate_cancels_make_one_adapter_cancel(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    launcher = FakeLauncher()
    async with make_supervisor(launcher=launcher, inline=True, cancel_join_s=1,
                               cancel_resend_again_s=5) as sup:
        caller, sid = await _running(sup, "/slow 1500")
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        results: list[CancelOutcome] = []

        async def one() -> None:
            results.append(await sup.orchestrator.cancel(caller, sid))

        async with trio.open_nursery() as nursery:
            for _ in range(500):
                nursery.start_soon(one)
        assert results == [CancelOutcome.LATE] * 500
        # The one operation's cancel, and its one re-send (the agent kept streaming
        # for 0.25 s): the 499 duplicates add none.
        assert launcher.agents[0].cancels == 2
        assert sup.orchestrator.operations_started == 1
        frames = queued(sub)
        changes = [f for f in frames if "session.cancellation_changed" in f]
        assert len(changes) == 2
        assert len(await status_messages(sup, caller, sid)) == 1
