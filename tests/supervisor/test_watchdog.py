"""The stall watchdog and never-started turns (DESIGN.md §9), on virtual time."""

from __future__ import annotations

import trio
from trio.testing import MockClock

from supervisor.models import SessionState
from supervisor.session.lifecycle import NEVER_STARTED_STATUS
from tests.support.bus_frames import queued_json
from tests.support.messages import status_messages
from tests.support.sessions import new_session

from .conftest import SupervisorFactory
from .fake_agent import FakeLauncher

WATCH = {"stall_notice_s": 120, "never_started_s": 300}


async def test_a_silent_turn_gets_a_notice_resolved_when_output_resumes(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    async with make_supervisor(launcher=FakeLauncher(), inline=True, **WATCH) as sup:
        caller, sid = await new_session(sup)
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        await sup.orchestrator.add_message(caller, sid, "/pause 150000")
        await trio.sleep(119)
        assert await status_messages(sup, caller, sid) == []
        await trio.sleep(2)
        [notice] = await status_messages(sup, caller, sid)
        assert notice.content == "No output from the agent for 2 min"
        assert notice.metadata == {"stalled": True, "variant": "warning"}
        stalled = [f["payload"] for f in queued_json(sub) if f["action"] == "session.turn.stalled"]
        assert len(stalled) == 1 and stalled[0]["session_id"] == sid
        assert stalled[0]["turn_id"] == notice.turn_id and stalled[0]["silent_s"] == 120
        # Output resumes at 150 s: the notice is resolved, announced as an update.
        await trio.sleep(40)
        [notice] = await status_messages(sup, caller, sid)
        assert notice.metadata == {"stalled": True, "variant": "warning", "resolved": True}
        updated = [f["payload"]["message"] for f in queued_json(sub)
                   if f["action"] == "session.message.updated"]
        assert any(m["id"] == notice.id and m["metadata"]["resolved"] for m in updated)
        session = await sup.orchestrator.session(caller, sid)
        assert session.state is SessionState.WAITING_FOR_INPUT
        assert [m.content for m in await status_messages(sup, caller, sid)] == [notice.content]


async def test_metadata_is_not_progress_and_a_busy_turn_gets_no_notice(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    async with make_supervisor(launcher=FakeLauncher(), inline=True, **WATCH) as sup:
        caller, sid = await new_session(sup)
        # Streams a chunk every 100 ms for 200 s: never silent, never stalled.
        await sup.orchestrator.add_message(caller, sid, "/delay 200000")
        await trio.sleep(210)
        assert await status_messages(sup, caller, sid) == []
        session = await sup.orchestrator.session(caller, sid)
        assert session.state is SessionState.WAITING_FOR_INPUT


async def test_a_never_started_turn_ends_as_an_error_and_parks_the_queue(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    launcher = FakeLauncher()
    async with make_supervisor(launcher=launcher, inline=True, **WATCH) as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.add_message(caller, sid, "/hang")
        queued = await sup.orchestrator.add_message(caller, sid, "waiting")
        assert queued["delivery"] == "queued"
        await trio.sleep(299)
        assert (await sup.orchestrator.session(caller, sid)).state is SessionState.RUNNING
        await trio.sleep(2)
        session = await sup.orchestrator.session(caller, sid)
        assert session.state is SessionState.WAITING_FOR_INPUT
        statuses = await status_messages(sup, caller, sid)
        assert [m.content for m in statuses] == ["No output from the agent for 2 min",
                                                 NEVER_STARTED_STATUS]
        assert statuses[1].metadata == {"variant": "error", "never_started": True}
        # The queue is parked, its entry kept; the agent was replaced.
        state = await sup.orchestrator.queue_list(caller, sid)
        assert [e.content for e in state.entries] == ["waiting"] and state.auto_run is False
        assert sid not in sup.lifecycle.executions
        started = await sup.orchestrator.add_message(caller, sid, "hello")
        assert started["delivery"] == "started"
        assert len(launcher.agents) == 2
