"""Session continuity's timeouts on virtual time (MockClock, autojump) with
the in-process fake agent: a cancel during a restore, a restore that gets no
answer within ``restore_s``, the idle stop after ``idle_agent_s``."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from supervisor.errors import Conflict
from supervisor.models import CANCELLED_STATUS, AgentSessionRef, SessionState
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor
from supervisor.session.lifecycle import SHUTDOWN_STATUS, CancelOutcome
from supervisor.storage.db import Db
from supervisor.turn.restore import RESTORE_FAILED_STATUS
from tests.support.sessions import new_session
from tests.support.wait import wait_state

from .conftest import InlineStore, SupervisorFactory
from .fake_agent import FakeLauncher


async def _settled(sup: Supervisor, caller: Caller, sid: str) -> None:
    await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=60)


async def _statuses(sup: Supervisor, caller: Caller, sid: str) -> list[str]:
    return [m.content for m in await sup.orchestrator.list_messages(caller, sid)
            if m.kind == "status"]


async def _answers(sup: Supervisor, caller: Caller, sid: str) -> list[str]:
    return [m.content for m in await sup.orchestrator.list_messages(caller, sid)
            if m.role == "agent"]


async def test_a_cancel_during_the_restore_abandons_it_within_the_join_window(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    launcher = FakeLauncher(resumable=True, hang_restores=1)
    async with make_supervisor(launcher=launcher, inline=True, cancel_join_s=3,
                               restore_s=30) as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.send_message(caller, sid, "hello")
        await _settled(sup, caller, sid)
        await sup.lifecycle.stop_execution(sid)  # the agent is gone (crash, idle, ...)
        assert not sup.lifecycle.agent_live(sid)
        await sup.orchestrator.send_message(caller, sid, "after the stop")
        await trio.sleep(1)
        turn = sup.lifecycle.executions[sid].turn
        assert turn is not None and turn.before_prompt is not None  # stuck in the restore
        assert launcher.agents[1].resumed == ["fake-0"]
        # The restore holds the turn, not the gate: a second prompt is refused at once.
        with trio.fail_after(0.5), pytest.raises(Conflict):
            await sup.orchestrator.send_message(caller, sid, "meanwhile")
        start = trio.current_time()
        outcomes: list[CancelOutcome] = []
        async with trio.open_nursery() as nursery:
            async def cancel() -> None:
                outcomes.append(await sup.orchestrator.cancel(caller, sid))
            nursery.start_soon(cancel)
        took = trio.current_time() - start
        assert outcomes == [CancelOutcome.ACKNOWLEDGED]
        assert took < sup.config.timeouts.cancel_join_s, took
        # Pending was published, then cleared.
        progress = sup.notify.projection.get(sid)
        assert (progress.pending, progress.revision) == (False, 2)
        session = await sup.orchestrator.session(caller, sid)
        assert session.state is SessionState.WAITING_FOR_INPUT
        assert await _statuses(sup, caller, sid) == [CANCELLED_STATUS]
        # The prompt never reached the agent.
        assert launcher.agents[1].prompts == []
        # Usable: the next prompt replaces the agent, whose restore now works.
        await sup.orchestrator.send_message(caller, sid, "once more")
        await _settled(sup, caller, sid)
        assert len(launcher.agents) == 3 and launcher.agents[2].resumed == ["fake-0"]
        assert launcher.agents[2].prompts == ["once more"]
        assert (await _answers(sup, caller, sid))[-1] == "once more"
        assert RESTORE_FAILED_STATUS not in await _statuses(sup, caller, sid)


async def test_a_restore_without_an_answer_falls_back_visibly_after_restore_s(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    launcher = FakeLauncher(resumable=True, hang_restores=1)
    async with make_supervisor(launcher=launcher, inline=True, restore_s=20) as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.send_message(caller, sid, "hello")
        await _settled(sup, caller, sid)
        await sup.lifecycle.stop_execution(sid)
        start = trio.current_time()
        await sup.orchestrator.send_message(caller, sid, "after the stop")
        await _settled(sup, caller, sid)
        assert 20 <= trio.current_time() - start < 25
        assert launcher.agents[1].prompts == ["after the stop"]
        assert (await _answers(sup, caller, sid))[-1] == "after the stop"
        [warning] = [m for m in await sup.orchestrator.list_messages(caller, sid)
                     if m.content == RESTORE_FAILED_STATUS]
        assert warning.metadata == {"resumed": False, "variant": "warning"}
        assert warning.turn_id is None  # a cancelled turn keeps its one status message


async def test_the_idle_timer_stops_the_agent_and_the_next_prompt_restores(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    launcher = FakeLauncher(resumable=True)
    async with make_supervisor(launcher=launcher, inline=True, idle_agent_s=900) as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.send_message(caller, sid, "/delay 1000")
        await _settled(sup, caller, sid)
        ended = trio.current_time()
        await trio.sleep(899)
        assert sup.lifecycle.agent_live(sid)
        await trio.sleep(2)
        assert not sup.lifecycle.agent_live(sid)
        assert sup.notify.session_dto(
            await sup.orchestrator.session(caller, sid))["agent_live"] is False
        assert trio.current_time() - ended >= 900
        await sup.orchestrator.send_message(caller, sid, "wake up")
        await _settled(sup, caller, sid)
        assert launcher.agents[1].resumed == ["fake-0"]
        assert (await _answers(sup, caller, sid))[-1] == "wake up"
        assert sup.lifecycle.agent_live(sid)


async def test_a_long_turn_is_never_stopped_as_idle(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    launcher = FakeLauncher(resumable=True)
    async with make_supervisor(launcher=launcher, inline=True, idle_agent_s=10) as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.send_message(caller, sid, "/delay 30000")
        await trio.sleep(25)
        assert sup.lifecycle.agent_live(sid)
        await _settled(sup, caller, sid)
        await trio.sleep(9)
        assert sup.lifecycle.agent_live(sid)  # idle for 10 s counts from the turn's end
        await trio.sleep(2)
        assert not sup.lifecycle.agent_live(sid)
        assert len(launcher.agents) == 1


async def test_a_conversation_of_another_directory_is_not_restored(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    launcher = FakeLauncher(resumable=True)
    async with make_supervisor(launcher=launcher, inline=True) as sup:
        caller, sid = await new_session(sup)
        ref = await sup.store.get_agent_session(sid)
        assert ref is not None and ref.agent_session_id == "fake-0" and ref.profile == "mock"
        await sup.lifecycle.stop_execution(sid)
        await sup.store.set_agent_session(sid, AgentSessionRef(
            agent_session_id="fake-0", profile="mock", cwd="/somewhere/else"))
        await sup.orchestrator.send_message(caller, sid, "hi")
        await _settled(sup, caller, sid)
        assert launcher.agents[1].resumed == []  # not asked: it would open the wrong tree
        assert RESTORE_FAILED_STATUS in await _statuses(sup, caller, sid)
        assert (await _answers(sup, caller, sid))[-1] == "hi"
        # The fresh conversation, here, is the one stored now.
        assert await sup.store.get_agent_session(sid) == AgentSessionRef(
            agent_session_id="fake-1", profile="mock", cwd=ref.cwd)


async def test_a_shutdown_during_the_restore_closes_the_turn(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    launcher = FakeLauncher(resumable=True, hang_restores=1)
    async with make_supervisor(launcher=launcher, inline=True, restore_s=30) as sup:
        caller, sid = await new_session(sup)
        await sup.lifecycle.stop_execution(sid)
        await sup.orchestrator.send_message(caller, sid, "interrupted by the stop")
        await trio.sleep(1)
        turn = sup.lifecycle.executions[sid].turn
        assert turn is not None and turn.before_prompt is not None
        start = trio.current_time()
    assert trio.current_time() - start < sup.config.timeouts.cancel_cleanup_s
    db = Db(sup.config.db_path)
    try:
        session = db.get_session(sid)
        assert session is not None and session.state is SessionState.WAITING_FOR_INPUT
        assert [m.content for m in db.list_messages(sid) if m.kind == "status"] == [
            SHUTDOWN_STATUS]
    finally:
        db.close()
    assert launcher.agents[1].prompts == []


class _SlowConversationWrite(InlineStore):
    """A disk that takes its time with one write: storing a restored agent's
    conversation id (the step between the restore and the prompt's write)."""

    hold: trio.Event | None = None
    entered = trio.Event()

    async def set_agent_session(self, session_id: str, ref: AgentSessionRef) -> None:
        gate = type(self).hold
        if gate is not None:
            type(self).entered.set()
            await gate.wait()
        await super().set_agent_session(session_id, ref)


async def test_a_cancel_after_the_restore_and_before_the_prompt_withholds_the_prompt(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    """The restore is over, its conversation id is being stored, the prompt is
    not written yet: a cancel now must withhold the prompt (the agent runs no
    turn a protocol cancel could stop), not let the turn run to escalation."""
    launcher = FakeLauncher(resumable=True)
    _SlowConversationWrite.hold, _SlowConversationWrite.entered = None, trio.Event()
    async with make_supervisor(launcher=launcher, inline=True, store_class=_SlowConversationWrite,
                               cancel_join_s=3) as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.send_message(caller, sid, "hello")
        await _settled(sup, caller, sid)
        await sup.lifecycle.stop_execution(sid)
        gate = _SlowConversationWrite.hold = trio.Event()
        await sup.orchestrator.send_message(caller, sid, "/delay 60000")
        with trio.fail_after(30):
            await _SlowConversationWrite.entered.wait()
        assert launcher.agents[1].resumed == ["fake-0"]  # restored; the write is slow
        start = trio.current_time()
        outcomes: list[CancelOutcome] = []
        async with trio.open_nursery() as nursery:
            async def cancel() -> None:
                outcomes.append(await sup.orchestrator.cancel(caller, sid))
            nursery.start_soon(cancel)
            await trio.sleep(0.5)
            gate.set()
        assert outcomes == [CancelOutcome.ACKNOWLEDGED]
        assert trio.current_time() - start < sup.config.timeouts.cancel_join_s
        await _settled(sup, caller, sid)
        assert launcher.agents[1].prompts == []  # never written
        assert await _statuses(sup, caller, sid) == [CANCELLED_STATUS]
        # The conversation id was stored all the same: the next prompt goes to this agent.
        await sup.orchestrator.send_message(caller, sid, "next")
        await _settled(sup, caller, sid)
        assert len(launcher.agents) == 2 and launcher.agents[1].prompts == ["next"]
