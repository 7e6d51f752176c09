"""The store fails (its disk full) under each background task (issue 32, item 2).

A cancel never depends on the store: with every write refused, the protocol
cancel, the join window, the escalation and the teardown run, pending clears,
and the answer says the agent stopped and that its record is not written; the
record is written once the store can again.  No task of a shared nursery (the
operations, the queue's, the executions', the store retries') lets the
failure end the supervisor: after each case the other session still works.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from supervisor.models import CANCELLED_STATUS, SessionState
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor
from supervisor.session.lifecycle import CancelOutcome
from supervisor.storage.db import StoreUnavailable
from tests.support.failing_store import DiskFullDb, failing_supervisor
from tests.support.sessions import new_sessions

from .conftest import InlineStore
from .fake_agent import FakeLauncher

AGENTS = ["mock", "mock-codex"]
FULL = "database or disk is full"


async def _wait_message(sup: Supervisor, caller: Caller, sid: str, kind: str) -> None:
    with trio.fail_after(15):
        while not any(m.kind == kind and m.role != "user"
                      for m in await sup.orchestrator.list_messages(caller, sid)):
            await trio.sleep(0.02)


async def _recovered(sup: Supervisor, db: DiskFullDb) -> None:
    """Space is back: every record the store refused is written (bounded)."""
    db.full = False
    with trio.fail_after(30):
        await sup.lifecycle.retries.wait_idle()


async def _still_serving(sup: Supervisor, caller: Caller, sid: str) -> None:
    """The other session runs a whole turn: the supervisor is alive and usable."""
    await sup.orchestrator.send_message(caller, sid, "still here")
    with trio.fail_after(15):
        while (await sup.orchestrator.session(caller, sid)).state is not \
                SessionState.WAITING_FOR_INPUT or not any(
                    m.role == "agent" for m in await sup.orchestrator.list_messages(caller, sid)):
            await trio.sleep(0.02)


def _statuses(msgs: list[Any], turn_id: str) -> list[Any]:
    return [m for m in msgs if m.kind == "status" and m.turn_id == turn_id]


@pytest.mark.parametrize("agent", AGENTS)
async def test_a_cancel_with_the_store_failing_stops_the_agent_and_its_record_follows(
    tmp_path: Any, agent: str
) -> None:
    async with failing_supervisor(tmp_path / "data") as (sup, db):
        caller, (sid, other) = await new_sessions(sup, agent, 2)
        orch = sup.orchestrator
        await orch.send_message(caller, sid, "/tool 60000")
        await _wait_message(sup, caller, sid, "tool_call")
        turn_id = sup.lifecycle.running_turn_id(sid)
        assert turn_id is not None
        db.full = True
        with trio.fail_after(10):
            op = await orch.cancel_operation(caller, sid)
        assert op.error is None
        assert op.outcome is CancelOutcome.ACKNOWLEDGED  # the agent took it in the window
        assert op.record_error is not None and FULL in op.record_error
        assert db.refused > 0
        # The agent stopped the turn (its tool call's last update, refused too,
        # ends that execution: the agent is torn down); nothing is pending.
        assert sup.lifecycle.running_turn_id(sid) is None
        assert not sup.notify.projection.get(sid).pending
        assert sid not in orch.operations
        # The store still says RUNNING (nothing could be written); the queue's
        # park and the close wait in the retries nursery, and it outlives them.
        await trio.sleep(2.0)
        assert (await orch.session(caller, sid)).state is SessionState.RUNNING
        assert sup.lifecycle.retries.pending
        await _recovered(sup, db)
        session = await orch.session(caller, sid)
        assert session.state is SessionState.WAITING_FOR_INPUT
        assert not session.auto_run  # a user cancel parks the queue
        statuses = _statuses(await orch.list_messages(caller, sid), turn_id)
        assert [m.content for m in statuses] == [CANCELLED_STATUS]
        turn = await sup.store.get_turn(turn_id)
        assert turn is not None and turn.stop_reason == "cancelled"
        await _still_serving(sup, caller, other)
        await _still_serving(sup, caller, sid)


async def test_an_escalated_cancel_with_the_store_failing_tears_the_turn_down(
    tmp_path: Any, autojump_clock: MockClock
) -> None:
    # Virtual time (the in-process agent, the SQL on the Trio thread): the
    # escalation is a rule of time, and it holds with every write refused.
    async with failing_supervisor(tmp_path / "data", launcher=FakeLauncher(),
                                  store_class=InlineStore, cancel_join_s=3,
                                  cancel_escalate_s=10) as (sup, db):
        caller, (sid, other) = await new_sessions(sup, "mock", 2)
        orch = sup.orchestrator
        await orch.send_message(caller, sid, "/hang")
        with trio.fail_after(10):
            while sup.lifecycle.running_turn_id(sid) is None:
                await trio.sleep(0.02)
        turn_id = sup.lifecycle.running_turn_id(sid)
        db.full = True
        start = trio.current_time()
        with trio.fail_after(30):
            op = await orch.cancel_operation(caller, sid)
        assert op.error is None and op.outcome is CancelOutcome.ESCALATED
        assert 10 <= trio.current_time() - start < 10 + sup.config.timeouts.cancel_cleanup_s
        assert op.record_error is not None and FULL in op.record_error
        assert sup.lifecycle.running_turn_id(sid) is None
        assert not sup.notify.projection.get(sid).pending
        await _recovered(sup, db)
        assert (await orch.session(caller, sid)).state is SessionState.WAITING_FOR_INPUT
        assert turn_id is not None
        statuses = _statuses(await orch.list_messages(caller, sid), turn_id)
        assert [m.content for m in statuses] == [CANCELLED_STATUS]
        assert statuses[0].metadata.get("escalated") is True
        await _still_serving(sup, caller, other)
        await _still_serving(sup, caller, sid)  # a fresh agent replaces the hung one


async def test_an_idle_cancel_parks_the_queue_once_the_store_can(tmp_path: Any) -> None:
    """The queue's park task (``_park_for_cancel``): it used to raise out of
    the queue's nursery and end the whole server."""
    async with failing_supervisor(tmp_path / "data") as (sup, db):
        caller, (sid, other) = await new_sessions(sup, "mock", 2)
        orch = sup.orchestrator
        assert (await orch.session(caller, sid)).auto_run
        db.full = True
        with trio.fail_after(10):
            op = await orch.cancel_operation(caller, sid)
        assert op.error is None and op.outcome is CancelOutcome.IDLE
        assert not sup.notify.projection.get(sid).pending
        await trio.sleep(2.0)  # the park is refused, retried, and nothing else ends
        assert sup.lifecycle.retries.pending
        await _recovered(sup, db)
        assert not (await orch.session(caller, sid)).auto_run
        await _still_serving(sup, caller, other)


async def test_a_refused_prompt_is_an_error_to_its_caller_only(tmp_path: Any) -> None:
    """The queue's kick after a direct start (``_start_direct`` → ``_kick`` →
    ``queue_take``) meets the refusing store in the queue's nursery."""
    async with failing_supervisor(tmp_path / "data") as (sup, db):
        caller, (sid, other) = await new_sessions(sup, "mock", 2)
        orch = sup.orchestrator
        db.full = True
        with pytest.raises(StoreUnavailable, match=FULL):
            await orch.add_message(caller, sid, "hello")
        await trio.sleep(1.0)  # the kick it spawned ran and failed, contained
        msgs = await orch.list_messages(caller, sid)
        assert msgs == []  # nothing half-written
        await _recovered(sup, db)
        await _still_serving(sup, caller, other)
        await _still_serving(sup, caller, sid)


async def test_a_turn_ending_with_the_store_failing_is_closed_once_it_can(
    tmp_path: Any
) -> None:
    """The executions nursery: the tool call's end is refused (that execution
    ends, its agent torn down), then the turn's close; the close is retried in
    the store retries nursery."""
    async with failing_supervisor(tmp_path / "data") as (sup, db):
        caller, (sid, other) = await new_sessions(sup, "mock", 2)
        orch = sup.orchestrator
        await orch.send_message(caller, sid, "/tool 800")
        await _wait_message(sup, caller, sid, "tool_call")
        turn_id = sup.lifecycle.running_turn_id(sid)
        db.full = True
        with trio.fail_after(10):
            while sup.lifecycle.running_turn_id(sid) is not None:
                await trio.sleep(0.02)
        await trio.sleep(1.0)
        assert (await orch.session(caller, sid)).state is SessionState.RUNNING
        await _recovered(sup, db)
        assert (await orch.session(caller, sid)).state is SessionState.WAITING_FOR_INPUT
        assert turn_id is not None
        turn = await sup.store.get_turn(turn_id)
        assert turn is not None and turn.stop_reason == "error"
        await _still_serving(sup, caller, other)
        await _still_serving(sup, caller, sid)


async def test_streamed_text_refused_stops_that_agent_only(tmp_path: Any) -> None:
    """The text writer (executions nursery) told of a refused write: that
    execution ends (its agent stopped), the turn is closed once the store can."""
    async with failing_supervisor(tmp_path / "data") as (sup, db):
        caller, (sid, other) = await new_sessions(sup, "mock", 2)
        orch = sup.orchestrator
        await orch.send_message(caller, sid, "/delay 30000")
        await _wait_message(sup, caller, sid, "text")
        turn_id = sup.lifecycle.running_turn_id(sid)
        db.full = True
        with trio.fail_after(15):  # (its teardown over: the turn's close was tried)
            while sid in sup.lifecycle.executions:
                await trio.sleep(0.05)
        await _recovered(sup, db)
        session = await orch.session(caller, sid)
        assert session.state is SessionState.WAITING_FOR_INPUT
        assert turn_id is not None
        turn = await sup.store.get_turn(turn_id)
        assert turn is not None and turn.stop_reason == "error"
        await _still_serving(sup, caller, other)
        await _still_serving(sup, caller, sid)


async def test_a_send_now_whose_start_is_refused_keeps_its_message(tmp_path: Any) -> None:
    """The queue's start after a send now's cancel (``_start_after``) meets the
    refusing store: the message stays queued, nothing ends."""
    async with failing_supervisor(tmp_path / "data") as (sup, db):
        caller, (sid, other) = await new_sessions(sup, "mock", 2)
        orch = sup.orchestrator
        await orch.send_message(caller, sid, "/tool 60000")
        await _wait_message(sup, caller, sid, "tool_call")
        queued = await orch.add_message(caller, sid, "next", "queue")
        entry_id = queued["entry"]["id"]
        answer = await orch.queue_send_now(caller, sid, entry_id)
        assert answer["delivery"] == "interrupting"
        db.full = True
        with trio.fail_after(10):
            while sid in orch.operations or sup.lifecycle.running_turn_id(sid) is not None:
                await trio.sleep(0.02)
        await trio.sleep(1.0)
        await _recovered(sup, db)
        queue = await orch.queue_list(caller, sid)
        started = [m for m in await orch.list_messages(caller, sid)
                   if m.role == "user" and m.content == "next"]
        assert [e.id for e in queue.entries] == [entry_id] or len(started) == 1
        await _still_serving(sup, caller, other)


async def test_a_shutdown_with_the_store_failing_stops_every_agent(tmp_path: Any) -> None:
    """The shutdown's nurseries (a running turn stopped, every agent stopped)
    with every write refused: the supervisor closes, within its bound."""
    started = trio.current_time()
    async with failing_supervisor(tmp_path / "data", shutdown_s=8) as (sup, db):
        caller, (sid, _idle) = await new_sessions(sup, "mock", 2)
        await sup.orchestrator.send_message(caller, sid, "/tool 60000")
        await _wait_message(sup, caller, sid, "tool_call")
        agents = [ex.agent for ex in sup.lifecycle.executions.values()]
        db.full = True
        started = trio.current_time()
    assert trio.current_time() - started < 12
    assert all(a.returncode is not None for a in agents)
