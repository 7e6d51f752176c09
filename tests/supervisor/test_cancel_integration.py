"""The cancel path against the mock agent as a real subprocess, both dialects."""

from __future__ import annotations

import re
import sqlite3

import pytest
import trio
import trio.lowlevel
import trio.testing
from trio.testing import MockClock

from supervisor.bus import Subscriber
from supervisor.models import CANCELLED_STATUS, SessionState
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor
from supervisor.session.lifecycle import CancelOutcome
from tests.support.bus_frames import queued
from tests.support.leaks import pgid_alive
from tests.support.messages import status_messages
from tests.support.sessions import new_session
from tests.support.wait import wait_state

from .conftest import SupervisorFactory
from .fake_agent import FakeLauncher

AGENTS = ["mock", "mock-acp2", "mock-codex"]


async def _wait_chunks(sup: Supervisor, caller: Caller, sid: str) -> None:
    with trio.fail_after(10):
        while not any(m.role == "agent" for m in
                      await sup.orchestrator.list_messages(caller, sid)):
            await trio.sleep(0.02)


async def _delaying(sup: Supervisor, agent: str) -> tuple[Caller, str, Subscriber]:
    """A session streaming a long /delay turn (its first chunk in), and a
    subscriber to its notifications."""
    caller, sid = await new_session(sup, agent)
    sub = sup.bus.subscriber()
    sub.subscribe(sid)
    await sup.orchestrator.send_message(caller, sid, "/delay 10000")
    await _wait_chunks(sup, caller, sid)
    return caller, sid, sub


@pytest.mark.parametrize("agent", AGENTS)
async def test_delay_cancels_promptly_and_the_same_agent_answers_again(
    make_supervisor: SupervisorFactory, agent: str
) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, agent)
        pid = sup.lifecycle.executions[sid].agent.pgid
        await sup.orchestrator.send_message(caller, sid, "/delay 10000")
        await _wait_chunks(sup, caller, sid)
        start = trio.current_time()
        with trio.fail_after(5):
            outcome = await sup.orchestrator.cancel(caller, sid)
        assert outcome is CancelOutcome.ACKNOWLEDGED
        assert trio.current_time() - start < 1.0
        session = await sup.orchestrator.session(caller, sid)
        assert session.state is SessionState.WAITING_FOR_INPUT
        statuses = await status_messages(sup, caller, sid)
        assert [(m.content, m.metadata) for m in statuses] == [
            (CANCELLED_STATUS, {"cancelled": True, "variant": "warning"})]
        # Same agent process, new turn.
        await sup.orchestrator.send_message(caller, sid, "hello again")
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
        assert sup.lifecycle.executions[sid].agent.pgid == pid
        texts = [m.content for m in await sup.orchestrator.list_messages(caller, sid)
                 if m.role == "agent"]
        assert texts[-1] == "hello again"


@pytest.mark.parametrize("agent", AGENTS)
async def test_text_streamed_since_the_last_batch_is_written_by_the_close(
    make_supervisor: SupervisorFactory, agent: str
) -> None:
    """With the text writer's period longer than the turn, what the agent
    streamed after its first words is still buffered at the cancel: the close
    writes it, so when the cancel is answered the database file (read by
    another connection, as after a crash) already holds the whole text with
    the turn closed and the session waiting."""
    async with make_supervisor(stream_flush_s=60.0) as sup:
        caller, sid, _ = await _delaying(sup, agent)
        await trio.sleep(0.35)  # three more chunks (one per 100 ms), held back by the period
        texts = [m.content for m in await sup.orchestrator.list_messages(caller, sid)
                 if m.role == "agent"]
        assert texts == ["chunk0 "]
        turn_id = (await sup.orchestrator.session(caller, sid)).current_turn_id
        with trio.fail_after(5):
            assert await sup.orchestrator.cancel(caller, sid) is CancelOutcome.ACKNOWLEDGED
        # At the answer, with no checkpoint since: what is committed on disk.
        reader = sqlite3.connect(sup.config.db_path)
        try:
            stored = [r[0] for r in reader.execute(
                "SELECT content FROM messages WHERE session_id = ? AND role = 'agent'"
                " ORDER BY rowid", (sid,))]
            [(turn_state,)] = reader.execute("SELECT state FROM turns WHERE id = ?", (turn_id,))
            [(session_state,)] = reader.execute(
                "SELECT state FROM task_sessions WHERE id = ?", (sid,))
        finally:
            reader.close()
        assert (turn_state, session_state) == ("cancelled", "WAITING_FOR_INPUT")
        texts = [m.content for m in await sup.orchestrator.list_messages(caller, sid)
                 if m.role == "agent"]
        assert stored == texts
        numbers = [int(n) for n in re.findall(r"chunk(\d+) ", texts[0])]
        assert len(texts) == 1 and numbers == list(range(len(numbers))), texts
        assert len(numbers) >= 3


@pytest.mark.parametrize("agent", AGENTS)
async def test_slow_agent_is_not_acknowledged_gate_released_next_prompt_works(
    make_supervisor: SupervisorFactory, agent: str, autojump_clock: MockClock
) -> None:
    async with make_supervisor(launcher=FakeLauncher(), inline=True, cancel_join_s=0.3,
                               cancel_escalate_s=10) as sup:
        caller, sid = await new_session(sup, agent)
        await sup.orchestrator.send_message(caller, sid, "/slow 1200")
        await _wait_chunks(sup, caller, sid)
        ex = sup.lifecycle.executions[sid]
        results: list[CancelOutcome] = []
        async with trio.open_nursery() as nursery:
            async def cancel() -> None:
                results.append(await sup.orchestrator.cancel(caller, sid))
            nursery.start_soon(cancel)
            with trio.fail_after(5):
                while ex.turn is None or ex.turn.cancel_phase != "late":
                    await trio.sleep(0.01)
            assert sup.notify.projection.get(sid).pending  # late, still pending
        assert results == [CancelOutcome.LATE]
        await sup.orchestrator.send_message(caller, sid, "next")
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
        assert [m.content for m in await sup.orchestrator.list_messages(caller, sid)
                if m.role == "agent"][-1] == "next"


@pytest.mark.parametrize("agent", AGENTS)
async def test_hang_is_escalated_and_reconciled(
    make_supervisor: SupervisorFactory, agent: str, autojump_clock: MockClock
) -> None:
    async with make_supervisor(launcher=FakeLauncher(), inline=True, cancel_join_s=0.2,
                               cancel_escalate_s=0.6) as sup:
        caller, sid = await new_session(sup, agent)
        await sup.orchestrator.send_message(caller, sid, "/hang")
        await wait_state(sup, caller, sid, SessionState.RUNNING)
        with trio.fail_after(5):
            assert await sup.orchestrator.cancel(caller, sid) is CancelOutcome.ESCALATED
        assert (await sup.orchestrator.session(caller, sid)).state is \
            SessionState.WAITING_FOR_INPUT
        assert len(await status_messages(sup, caller, sid)) == 1
        assert not sup.notify.projection.get(sid).pending


@pytest.mark.parametrize("agent", AGENTS)
async def test_crash_mid_turn_then_cancel_reconciles(
    make_supervisor: SupervisorFactory, agent: str
) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, agent)
        await sup.orchestrator.send_message(caller, sid, "/crash")
        with trio.fail_after(5):
            await sup.orchestrator.cancel(caller, sid)
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
        assert not sup.notify.projection.get(sid).pending
        # The crashed agent is gone; the next prompt starts a fresh one.
        await sup.orchestrator.send_message(caller, sid, "after crash")
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
        assert [m.content for m in await sup.orchestrator.list_messages(caller, sid)
                if m.role == "agent"][-1] == "after crash"


@pytest.mark.parametrize("agent", AGENTS)
async def test_pending_permission_is_answered_cancelled(
    make_supervisor: SupervisorFactory, agent: str
) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, agent)
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        await sup.orchestrator.send_message(caller, sid, "/permission")
        with trio.fail_after(5):
            while not sup.lifecycle.executions[sid].permissions:
                await trio.sleep(0.01)
        with trio.fail_after(5):
            assert await sup.orchestrator.cancel(caller, sid) is CancelOutcome.ACKNOWLEDGED
        perms = [m for m in await sup.orchestrator.list_messages(caller, sid)
                 if m.kind == "permission"]
        assert len(perms) == 1 and perms[0].metadata["status"] == "cancelled"
        frames = queued(sub)
        assert any("session.permission.cancelled" in f for f in frames)
        assert (await sup.orchestrator.session(caller, sid)).state is \
            SessionState.WAITING_FOR_INPUT


@pytest.mark.parametrize("agent", AGENTS)
async def test_permission_answered_by_the_user(
    make_supervisor: SupervisorFactory, agent: str
) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, agent)
        await sup.orchestrator.send_message(caller, sid, "/permission")
        with trio.fail_after(5):
            while not sup.lifecycle.executions[sid].permissions:
                await trio.sleep(0.01)
        ex = sup.lifecycle.executions[sid]
        request_id, msg = next(iter(ex.permissions.items()))
        option = msg.metadata["options"][0]["option_id"]
        await sup.orchestrator.respond_permission(caller, sid, request_id, option)
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
        msgs = await sup.orchestrator.list_messages(caller, sid)
        assert next(m for m in msgs if m.kind == "permission").metadata["status"] == "selected"
        assert option in [m.content for m in msgs if m.role == "agent"][-1]


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("n", [5, 500])
async def test_concurrent_duplicates_make_one_operation(
    make_supervisor: SupervisorFactory, agent: str, n: int
) -> None:
    async with make_supervisor() as sup:
        caller, sid, sub = await _delaying(sup, agent)
        results: list[CancelOutcome] = []
        frames: list[str] = []
        #: For each answer, as it arrives: was the turn's close already
        #: published (its completion and pending=false) to the subscriber?
        closed_at_answer: list[bool] = []

        async def one() -> None:
            outcome = await sup.orchestrator.cancel(caller, sid)
            frames.extend(queued(sub))  # no checkpoint between the answer and this read
            results.append(outcome)
            closed_at_answer.append(
                any("session.turn.completed" in f for f in frames)
                and any('"cancellation_pending":false' in f for f in frames))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for _ in range(n):
                    nursery.start_soon(one)
        assert results == [CancelOutcome.ACKNOWLEDGED] * n
        assert sup.orchestrator.operations_started == 1
        # The turn's close settled the one operation: every duplicate's answer
        # comes with or after the close, none before it.
        assert closed_at_answer == [True] * n
        assert len(await status_messages(sup, caller, sid)) == 1
        frames.extend(queued(sub))
        pending = [('"cancellation_pending":true' in f) for f in frames
                   if "session.cancellation_changed" in f]
        assert pending == [True, False]


@pytest.mark.parametrize("agent", AGENTS)
async def test_the_cancel_is_on_the_agents_stdin_at_admission(
    make_supervisor: SupervisorFactory, agent: str
) -> None:
    """A cancel admitted with no wait (its owner known) is written to the
    agent's pipe in the admission's own step, before pending=true is written
    to anyone; the operation then settles from the turn's close."""
    async with make_supervisor() as sup:
        caller, sid, sub = await _delaying(sup, agent)
        turn = sup.lifecycle.executions[sid].turn
        assert turn is not None  # the /delay turn streams
        with trio.testing.assert_no_checkpoints():
            op = sup.orchestrator.admit_known(caller, sid)
            assert op is not None
            assert turn.cancel_sent_at is not None  # on the pipe, in this step
        with trio.fail_after(5):
            assert await op.wait() is CancelOutcome.ACKNOWLEDGED
        # Settled from the turn's close: its frames are out when the answer is.
        frames = queued(sub)  # no checkpoint since the answer
        assert any("session.turn.completed" in f for f in frames)
        marks = sup.orchestrator.trace.settled[-1].marks
        assert marks["admitted"] <= turn.cancel_sent_at
        assert marks["adapter_sent"] == turn.cancel_sent_at
        assert [m.content for m in await status_messages(sup, caller, sid)] == [CANCELLED_STATUS]
        frames += queued(sub)
        order = [("pending=true" if '"cancellation_pending":true' in f else "pending=false")
                 if "session.cancellation_changed" in f else "sent"
                 for f in frames if "session.cancellation_changed" in f
                 or '"phase":"sent"' in f]
        assert order == ["pending=true", "sent", "pending=false"]
        # The same agent takes the next prompt.
        await sup.orchestrator.send_message(caller, sid, "again")
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)


async def test_caller_cancelled_after_admission_does_not_abort_the_operation(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    async with make_supervisor(launcher=FakeLauncher(), inline=True, cancel_join_s=0.3) as sup:
        caller, sid = await new_session(sup, "mock")
        await sup.orchestrator.send_message(caller, sid, "/slow 800")
        await _wait_chunks(sup, caller, sid)
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sup.orchestrator.cancel, caller, sid)
                with trio.fail_after(5):
                    while sid not in sup.orchestrator.operations:
                        await trio.lowlevel.checkpoint()
                scope.cancel()  # the client went away
        assert scope.cancelled_caught
        assert sid in sup.orchestrator.operations  # the operation lives on
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
        with trio.fail_after(5):
            while sid in sup.orchestrator.operations:
                await trio.sleep(0.01)
        assert not sup.notify.projection.get(sid).pending
        assert len(await status_messages(sup, caller, sid)) == 1


async def test_idle_cancel_is_a_harmless_success(make_supervisor: SupervisorFactory) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, "mock")
        assert await sup.orchestrator.cancel(caller, sid) is CancelOutcome.IDLE
        assert await status_messages(sup, caller, sid) == []
        assert sup.notify.projection.get(sid).revision == 2


async def test_running_session_without_execution_is_reconciled(
    make_supervisor: SupervisorFactory
) -> None:
    async with make_supervisor() as sup:
        caller = await sup.caller()
        task = await sup.orchestrator.create_task(caller, "t")
        session = await sup.store.call(sup.store.db.create_session, task.id, "mock")
        turn, _, _, _ = await sup.store.call(sup.store.db.open_turn, session.id, "orphan")
        assert await sup.orchestrator.cancel(caller, session.id) is CancelOutcome.NO_EXECUTION
        after = await sup.orchestrator.session(caller, session.id)
        assert after.state is SessionState.WAITING_FOR_INPUT
        closed = await sup.store.call(sup.store.db.get_turn, turn.id)
        assert closed is not None and closed.state == "cancelled"
        assert len(await status_messages(sup, caller, session.id)) == 1


async def test_shutdown_leaves_no_agent_process(make_supervisor: SupervisorFactory) -> None:
    pgids: list[int | None] = []
    async with make_supervisor() as sup:
        for agent in AGENTS * 2:
            caller, sid = await new_session(sup, agent)
            await sup.orchestrator.send_message(caller, sid, "/delay 60000")
            pgids.append(sup.lifecycle.executions[sid].agent.pgid)
        # One agent ignores cancel: shutdown must still take it down.
        caller, sid = await new_session(sup, "mock")
        await sup.orchestrator.send_message(caller, sid, "/hang")
        pgids.append(sup.lifecycle.executions[sid].agent.pgid)
        await trio.sleep(0.3)
    for pgid in pgids:
        # No live process (a sandbox's init may linger an instant as a zombie).
        assert pgid is not None and not pgid_alive(pgid), pgid
