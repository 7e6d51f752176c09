"""The message queue (DESIGN.md §9) against the mock agent as a real subprocess:
auto-run, parking, send now (racing a natural end, against an agent that
ignores the cancel), restart with a non-empty queue."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from protocols.prompt_parts import PromptPart
from supervisor.errors import InvalidRequest
from supervisor.models import CANCELLED_STATUS, INTERRUPTED_STATUS, SessionState
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor
from supervisor.session.lifecycle import CancelOutcome
from supervisor.storage.db import Db
from supervisor.turn.recovery import RESTART_STATUS, recover
from tests.support.bus_frames import queued_json
from tests.support.messages import status_messages
from tests.support.sessions import new_session

from .conftest import SupervisorFactory
from .fake_agent import FakeLauncher

SLOW_CANCEL = {"cancel_join_s": 0.3, "cancel_escalate_s": 1.5, "cancel_cleanup_s": 1.0}


async def _user_texts(sup: Supervisor, caller: Caller, sid: str) -> list[str]:
    return [m.content for m in await sup.orchestrator.list_messages(caller, sid, limit=1000)
            if m.role == "user"]


async def _idle_with(sup: Supervisor, caller: Caller, sid: str, texts: list[str],
                     timeout: float = 15) -> None:
    """Wait until these user messages are stored and no turn runs."""
    with trio.fail_after(timeout):
        while True:
            session = await sup.orchestrator.session(caller, sid)
            if (session.state is SessionState.WAITING_FOR_INPUT
                    and await _user_texts(sup, caller, sid) == texts
                    and not sup.orchestrator.queue.busy(sid)):
                return
            await trio.sleep(0.02)


async def _running(sup: Supervisor, caller: Caller, sid: str) -> None:
    with trio.fail_after(10):
        while not any(m.role == "agent" for m in
                      await sup.orchestrator.list_messages(caller, sid)):
            await trio.sleep(0.02)


@pytest.mark.parametrize("agent", ["mock", "mock-acp2", "mock-codex"])
async def test_auto_run_starts_the_head_when_a_turn_ends(make_supervisor: SupervisorFactory,
                                                         agent: str) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, agent)
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        started = await sup.orchestrator.add_message(caller, sid, "/delay 600")
        assert started["delivery"] == "started" and started["role"] == "user"
        one = await sup.orchestrator.add_message(caller, sid, "one")
        two = await sup.orchestrator.add_message(caller, sid, "two", "queue")
        assert one["delivery"] == two["delivery"] == "queued"
        assert (one["entry"]["position"], two["entry"]["position"]) == (0, 1)
        assert one["entry"]["content"] == "one" and one["entry"]["session_id"] == sid
        dto = (await sup.orchestrator.list_sessions(caller, (await sup.orchestrator.session(
            caller, sid)).task_id))[0]
        assert dto["queued_count"] == 2 and dto["auto_run"] is True
        # No client involved: the backend runs both, in order.
        await _idle_with(sup, caller, sid, ["/delay 600", "one", "two"])
        state = await sup.orchestrator.queue_list(caller, sid)
        assert state.entries == () and state.auto_run is True
        changes = [f["payload"] for f in queued_json(sub) if f["action"] == "session.queue.changed"]
        revisions = [c["queue_revision"] for c in changes]
        assert revisions == sorted(revisions) and len(set(revisions)) == len(revisions)
        assert [len(c["entries"]) for c in changes] == [1, 2, 1, 0]


async def test_user_cancel_parks_the_queue_until_resumed(
    make_supervisor: SupervisorFactory
) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.add_message(caller, sid, "/delay 10000")
        await _running(sup, caller, sid)
        await sup.orchestrator.add_message(caller, sid, "queued 1")
        await sup.orchestrator.add_message(caller, sid, "queued 2")
        assert await sup.orchestrator.cancel(caller, sid) is CancelOutcome.ACKNOWLEDGED
        await trio.sleep(0.5)  # nothing queued may start after the user said stop
        assert await _user_texts(sup, caller, sid) == ["/delay 10000"]
        state = await sup.orchestrator.queue_list(caller, sid)
        assert [e.content for e in state.entries] == ["queued 1", "queued 2"]
        assert state.auto_run is False
        session = await sup.orchestrator.session(caller, sid)
        assert (session.queued_count, session.auto_run) == (2, False)
        assert [m.content for m in await status_messages(sup, caller, sid)] == [CANCELLED_STATUS]
        # Resumed while idle: the head starts, then the rest.
        await sup.orchestrator.queue_set_auto_run(caller, sid, True)
        await _idle_with(sup, caller, sid, ["/delay 10000", "queued 1", "queued 2"])


async def test_a_crashed_turn_parks_the_queue(make_supervisor: SupervisorFactory) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.add_message(caller, sid, "/delay 800")
        await sup.orchestrator.add_message(caller, sid, "/crash")
        await sup.orchestrator.add_message(caller, sid, "after the crash")
        with trio.fail_after(15):
            while (await sup.orchestrator.queue_list(caller, sid)).auto_run:
                await trio.sleep(0.02)
        await _idle_with(sup, caller, sid, ["/delay 800", "/crash"])
        await trio.sleep(0.3)
        assert await _user_texts(sup, caller, sid) == ["/delay 800", "/crash"]
        state = await sup.orchestrator.queue_list(caller, sid)
        assert [e.content for e in state.entries] == ["after the crash"]
        assert any(m.metadata.get("variant") == "error"
                   for m in await status_messages(sup, caller, sid))
        # Sent now while idle: it starts (a fresh agent), the queue stays parked.
        entry_id = state.entries[0].id
        result = await sup.orchestrator.queue_send_now(caller, sid, entry_id)
        assert result["delivery"] == "started" and result["content"] == "after the crash"
        await _idle_with(sup, caller, sid, ["/delay 800", "/crash", "after the crash"])


async def test_send_now_interrupts_without_parking(make_supervisor: SupervisorFactory) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, "mock-codex")
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        await sup.orchestrator.add_message(caller, sid, "/delay 10000")
        await _running(sup, caller, sid)
        await sup.orchestrator.add_message(caller, sid, "later")
        result = await sup.orchestrator.add_message(caller, sid, "right now", "interrupt")
        assert result["delivery"] == "interrupting"
        assert result["entry"]["content"] == "right now" and result["entry"]["position"] == 0
        # The cancel's pending progress shows as for any cancel.
        assert sup.notify.projection.get(sid).pending
        await _idle_with(sup, caller, sid, ["/delay 10000", "right now", "later"])
        statuses = await status_messages(sup, caller, sid)
        assert [(m.content, m.metadata) for m in statuses] == [
            (INTERRUPTED_STATUS, {"interrupted": True, "variant": "info"})]
        assert (await sup.orchestrator.queue_list(caller, sid)).auto_run is True
        frames = queued_json(sub)
        pending = [f["payload"]["cancellation_pending"] for f in frames
                   if f["action"] == "session.cancellation_changed"]
        assert pending == [True, False]
        assert [f["payload"]["phase"] for f in frames
                if f["action"] == "session.cancel.progress"] == ["sent"]


async def test_send_now_racing_a_natural_end(make_supervisor: SupervisorFactory) -> None:
    """Send now lands around the moment the turn ends by itself: whichever
    wins, the message runs exactly once, next, and the queue is not parked."""
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup)
        expected: list[str] = []
        for i, at in enumerate((0.25, 0.3, 0.33, 0.36, 0.4, 0.5)):
            await sup.orchestrator.add_message(caller, sid, "/delay 350")
            await trio.sleep(at)
            result = await sup.orchestrator.add_message(caller, sid, f"now {i}", "interrupt")
            assert result["delivery"] in ("interrupting", "started"), result
            expected += ["/delay 350", f"now {i}"]
            await _idle_with(sup, caller, sid, expected)
            state = await sup.orchestrator.queue_list(caller, sid)
            assert state.entries == () and state.auto_run is True
        statuses = await status_messages(sup, caller, sid)
        assert {m.content for m in statuses} <= {INTERRUPTED_STATUS}


async def test_send_now_against_an_agent_that_ignores_the_cancel(
    make_supervisor: SupervisorFactory,
    autojump_clock: MockClock,
) -> None:
    async with make_supervisor(launcher=FakeLauncher(resumable=True), inline=True,
                               **SLOW_CANCEL) as sup:
        caller, sid = await new_session(sup)
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        first_agent = sup.lifecycle.executions[sid]
        await sup.orchestrator.add_message(caller, sid, "/slow 20000")
        await _running(sup, caller, sid)
        await sup.orchestrator.add_message(caller, sid, "after it")
        result = await sup.orchestrator.add_message(caller, sid, "replace it", "interrupt")
        assert result["delivery"] == "interrupting"
        # A duplicate user cancel would join; a second send now queues behind it.
        await _idle_with(sup, caller, sid, ["/slow 20000", "replace it", "after it"],
                         timeout=20)
        phases = [f["payload"]["phase"] for f in queued_json(sub)
                  if f["action"] == "session.cancel.progress"]
        assert phases == ["sent", "late", "escalated"]
        statuses = await status_messages(sup, caller, sid)
        assert [(m.content, m.metadata) for m in statuses] == [
            (INTERRUPTED_STATUS, {"interrupted": True, "variant": "info", "escalated": True})]
        # The agent that never ended its turn was replaced.
        assert sup.lifecycle.executions[sid] is not first_agent
        assert (await sup.orchestrator.queue_list(caller, sid)).auto_run is True


async def test_a_user_cancel_joining_a_send_now_wins(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    async with make_supervisor(launcher=FakeLauncher(), inline=True, **SLOW_CANCEL) as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.add_message(caller, sid, "/slow 20000")
        await _running(sup, caller, sid)
        await sup.orchestrator.add_message(caller, sid, "replace it", "interrupt")
        with trio.fail_after(10):
            assert await sup.orchestrator.cancel(caller, sid) is CancelOutcome.ESCALATED
        assert sup.orchestrator.operations_started == 1  # joined, not a second operation
        await trio.sleep(0.5)
        assert await _user_texts(sup, caller, sid) == ["/slow 20000"]
        state = await sup.orchestrator.queue_list(caller, sid)
        assert [e.content for e in state.entries] == ["replace it"]
        assert state.auto_run is False
        assert [m.content for m in await status_messages(sup, caller, sid)] == [CANCELLED_STATUS]


async def test_the_queue_is_bounded(make_supervisor: SupervisorFactory) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.add_message(caller, sid, "/delay 20000")
        for i in range(sup.config.limits.max_queue):
            await sup.orchestrator.add_message(caller, sid, f"m{i}")
        with pytest.raises(InvalidRequest):
            await sup.orchestrator.add_message(caller, sid, "one too many")
        with pytest.raises(InvalidRequest):
            await sup.orchestrator.add_message(caller, sid, "nor now", "interrupt")
        state = await sup.orchestrator.queue_list(caller, sid)
        assert [e.content for e in state.entries] == [f"m{i}" for i in range(100)]
        await sup.orchestrator.cancel(caller, sid)


async def test_restart_keeps_a_parked_queue(make_supervisor: SupervisorFactory) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.add_message(caller, sid, "/delay 30000")
        await _running(sup, caller, sid)
        for text in ("kept 1", "kept 2"):
            await sup.orchestrator.add_message(caller, sid, text)
    # The shutdown interrupted the turn: the queue is parked, nothing lost.
    async with make_supervisor() as sup:
        caller = await sup.caller()
        session = await sup.orchestrator.session(caller, sid)
        assert (session.queued_count, session.auto_run) == (2, False)
        await trio.sleep(0.3)
        assert await _user_texts(sup, caller, sid) == ["/delay 30000"]
        state = await sup.orchestrator.queue_list(caller, sid)
        assert [e.content for e in state.entries] == ["kept 1", "kept 2"]
        await sup.orchestrator.queue_set_auto_run(caller, sid, True)
        await _idle_with(sup, caller, sid, ["/delay 30000", "kept 1", "kept 2"])


def test_recovery_after_a_crash_parks_the_queue(tmp_path: Path) -> None:
    """A backend killed mid-turn: startup recovery closes the turn and parks."""
    db = Db(tmp_path / "t.db")
    wid = db.ensure_workspace("default")
    task = db.create_task(wid, "t")
    session = db.create_session(task.id, "mock")
    idle = db.create_session(task.id, "mock")
    db.open_turn(session.id, "working")
    for text in ("a", "b"):
        db.queue_add(session.id, text, max_entries=100)
    db.queue_add(idle.id, "c", max_entries=100)
    recover(db)
    state = db.queue_state(session.id)
    assert [e.content for e in state.entries] == ["a", "b"] and state.auto_run is False
    assert db.queue_state(idle.id).auto_run is True  # no turn interrupted there
    assert [m.content for m in db.list_messages(session.id) if m.kind == "status"] == [
        RESTART_STATUS]
    db.close()


#: The mock agent's ACP dialect with the steering extension (claude-agent-acp's).
STEERING_ACP = {"protocol": "acp", "command": [sys.executable, "-m", "protocols.mock_agent",
                                               "--protocol", "acp", "--steering"]}


@pytest.mark.parametrize("agent", ["mock-codex", "mock-steering"])
async def test_steer_into_a_running_turn(make_supervisor: SupervisorFactory, agent: str) -> None:
    """Codex ``turn/steer``; ACP ``_session/steering`` where the agent offers it."""
    async with make_supervisor(agents={"mock-steering": STEERING_ACP}) as sup:
        caller, sid = await new_session(sup, agent)
        idle = await sup.orchestrator.add_message(caller, sid, "/delay 1500", "steer")
        assert idle["delivery"] == "started"  # no turn running: a steer starts one
        await _running(sup, caller, sid)
        steered = await sup.orchestrator.add_message(caller, sid, "look left", "steer")
        assert steered["delivery"] == "steered" and steered["role"] == "user"
        assert steered["metadata"] == {"delivery": "steer"}
        assert steered["turn_id"] == idle["turn_id"]
        await _idle_with(sup, caller, sid, ["/delay 1500", "look left"])
        answer = [m.content for m in await sup.orchestrator.list_messages(caller, sid)
                  if m.role == "agent"]
        assert any("steered: look left" in text for text in answer), answer
        assert (await sup.orchestrator.queue_list(caller, sid)).entries == ()


async def test_a_steer_sits_where_the_agent_took_it(make_supervisor: SupervisorFactory) -> None:
    """Issue 41: the reply so far comes before the steered message, the rest after it (the
    steer does not sit after the whole reply)."""
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, "mock-codex")
        await sup.orchestrator.add_message(caller, sid, "/delay 1500", "auto")
        await _running(sup, caller, sid)
        await trio.sleep(0.4)  # some of the reply streams first
        await sup.orchestrator.add_message(caller, sid, "look left", "steer")
        await _idle_with(sup, caller, sid, ["/delay 1500", "look left"])
        shown = [(m.role, m.content) for m in await sup.orchestrator.list_messages(caller, sid)
                 if m.kind == "text"]
        at = shown.index(("user", "look left"))
        before, after = "".join(c for _, c in shown[1:at]), "".join(c for _, c in shown[at + 1:])
        assert "chunk0" in before and "steered: look left" not in before, shown
        assert "steered: look left" in after, shown


async def test_steer_where_the_agent_cannot_is_queued(make_supervisor: SupervisorFactory) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, "mock")
        await sup.orchestrator.add_message(caller, sid, "/delay 800")
        await _running(sup, caller, sid)
        queued = await sup.orchestrator.add_message(caller, sid, "look right", "steer")
        assert queued["delivery"] == "queued" and queued["steer_unsupported"] is True
        assert queued["entry"]["content"] == "look right"
        # It runs as the next turn (auto-run), never twice.
        await _idle_with(sup, caller, sid, ["/delay 800", "look right"])


async def test_a_hundred_concurrent_adds_to_a_busy_session(
    make_supervisor: SupervisorFactory
) -> None:
    """None lost, none twice; each answer's position is the entry's place in
    the final order (the order they were admitted), and that order runs."""
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.add_message(caller, sid, "/delay 30000")
        await _running(sup, caller, sid)
        replies: list[dict[str, Any]] = []

        async def add(i: int) -> None:
            replies.append(await sup.orchestrator.add_message(caller, sid, f"c{i}"))

        async with trio.open_nursery() as nursery:
            for i in range(100):
                nursery.start_soon(add, i)
        assert all(r["delivery"] == "queued" for r in replies)
        state = await sup.orchestrator.queue_list(caller, sid)
        assert sorted(e.content for e in state.entries) == sorted(f"c{i}" for i in range(100))
        by_position = sorted(replies, key=lambda r: r["entry"]["position"])
        assert [r["entry"]["position"] for r in by_position] == list(range(100))
        assert [r["entry"]["id"] for r in by_position] == [e.id for e in state.entries]
        # Let them run: the head replaces the long turn, all follow in order.
        order = [e.content for e in state.entries]
        now = await sup.orchestrator.queue_send_now(caller, sid, state.entries[0].id)
        assert now["delivery"] == "interrupting"
        await _idle_with(sup, caller, sid, ["/delay 30000", *order], timeout=40)


async def test_a_steer_of_uncertain_delivery_is_never_sent_again(
    make_supervisor: SupervisorFactory
) -> None:
    """The agent did not answer the steer in time: it may have taken it, so it
    is stored as steered (marked uncertain), neither queued nor re-sent."""
    from protocols.adapters import AgentTimeout

    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, "mock-codex")
        await sup.orchestrator.add_message(caller, sid, "/delay 1500")
        await _running(sup, caller, sid)
        adapter = sup.lifecycle.executions[sid].adapter
        sent: list[str] = []

        async def steer_without_answer(text: str, parts: tuple[PromptPart, ...] = ()) -> None:
            sent.append(text)
            raise AgentTimeout("no answer to turn/steer")

        adapter.steer = steer_without_answer  # type: ignore[method-assign]  # the test's double
        reply = await sup.orchestrator.add_message(caller, sid, "maybe taken", "steer")
        assert reply["delivery"] == "steered"
        assert reply["metadata"] == {"delivery": "steer", "delivery_uncertain": True}
        await _idle_with(sup, caller, sid, ["/delay 1500", "maybe taken"])
        assert sent == ["maybe taken"]
        assert (await sup.orchestrator.queue_list(caller, sid)).entries == ()


async def test_a_steer_the_agent_refuses_is_queued(
    make_supervisor: SupervisorFactory
) -> None:
    """The agent answered the steer with an error (the turn it names is
    ending): certainly not delivered, so queued, as a steer it cannot take."""
    from protocols.adapters import AgentRequestError

    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, "mock-codex")
        await sup.orchestrator.add_message(caller, sid, "/delay 1500")
        await _running(sup, caller, sid)
        adapter = sup.lifecycle.executions[sid].adapter

        async def steer_refused(text: str, parts: tuple[PromptPart, ...] = ()) -> None:
            raise AgentRequestError("turn/steer", -32600, "Invalid request",
                                    {"details": "the turn is ending"})

        adapter.steer = steer_refused  # type: ignore[method-assign]  # the test's double
        reply = await sup.orchestrator.add_message(caller, sid, "too late", "steer")
        assert reply["delivery"] == "queued" and reply["steer_unsupported"] is True
        await _idle_with(sup, caller, sid, ["/delay 1500", "too late"])
