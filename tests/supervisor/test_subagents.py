"""Subagents (DESIGN.md §13) against the mock agent as a real subprocess, ACP v1 and
v2: ``/subagents N ms`` runs N child sessions while the parent streams; one child
is stopped through its own cancel while the parent and the other go on; a cancel of
the parent stops them all and its status message counts them."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from supervisor.bus import Subscriber
from supervisor.errors import NotFound
from supervisor.models import CANCELLED_STATUS, SessionState
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor
from supervisor.session.lifecycle import CancelOutcome
from tests.support.bus_frames import queued
from tests.support.messages import status_messages
from tests.support.sessions import new_session
from tests.support.wait import wait_state

from .conftest import SupervisorFactory
from .fake_agent import FakeLauncher

AGENTS = ["mock", "mock-acp2", "mock-codex"]


async def _subagents(sup: Supervisor, caller: Caller, sid: str) -> list[dict[str, Any]]:
    session = await sup.orchestrator.session(caller, sid)
    children: list[dict[str, Any]] = sup.notify.session_dto(session)["subagents"]
    return children


async def _wait_for(sup: Supervisor, caller: Caller, sid: str, states: list[str],
                    timeout: float = 10) -> list[dict[str, Any]]:
    with trio.fail_after(timeout):
        while True:
            children = await _subagents(sup, caller, sid)
            if [c["state"] for c in children] == states:
                return children
            await trio.sleep(0.02)


async def _running_children(sup: Supervisor, agent: str, ms: int) -> tuple[
        Caller, str, Subscriber, list[dict[str, Any]]]:
    caller, sid = await new_session(sup, agent)
    assert await _subagents(sup, caller, sid) == []
    sub = sup.bus.subscriber()
    sub.subscribe(sid)
    await sup.orchestrator.send_message(caller, sid, f"/subagents 2 {ms}")
    children = await _wait_for(sup, caller, sid, ["running", "running"])
    return caller, sid, sub, children


@pytest.mark.parametrize("agent", AGENTS)
async def test_one_child_stops_while_the_parent_and_the_other_go_on(
        make_supervisor: SupervisorFactory, agent: str) -> None:
    async with make_supervisor() as sup:
        caller, sid, sub, children = await _running_children(sup, agent, 2500)
        first, second = children
        assert second["title"] == "Subagent 2"
        assert first["title"] == "Subagent 1" and first["cancellable"]
        turn_id = first["turn_id"]
        assert turn_id == (await sup.orchestrator.session(caller, sid)).current_turn_id
        outcome, dto = await sup.subagents.cancel(sid, first["id"])
        assert outcome == "cancel_sent" and dto["id"] == first["id"]
        with trio.fail_after(5):
            while (await _subagents(sup, caller, sid))[0]["state"] != "cancelled":
                await trio.sleep(0.02)
        now = await _subagents(sup, caller, sid)
        assert now[1]["state"] == "running" and not now[0]["cancellable"]
        session = await sup.orchestrator.session(caller, sid)
        assert session.state is SessionState.RUNNING
        assert not sup.notify.projection.get(sid).pending
        # A second ask is a no-op answer; an unknown child is NOT_FOUND.
        assert (await sup.subagents.cancel(sid, first["id"]))[0] == "already_finished"
        with pytest.raises(NotFound):
            await sup.subagents.cancel(sid, "no-such-child")
        # The other child streams to its end, then the parent ends its turn normally.
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
        assert [c["state"] for c in await _subagents(sup, caller, sid)] == [
            "cancelled", "completed"]
        assert await status_messages(sup, caller, sid) == []
        text = " ".join(m.content for m in await sup.orchestrator.list_messages(caller, sid)
                        if m.role == "agent")
        # The children's own text is theirs, not the parent's transcript.
        assert "parent chunk" in text and "subagents done" in text
        assert "Subagent 1 chunk" not in text
        changed = [f for f in queued(sub) if '"session.subagent.changed"' in f]
        assert any('"cancelling"' in f for f in changed)
        assert any('"cancelled"' in f for f in changed)
        # Each child left its trace in the parent's transcript (issue 41): its own output and
        # tool, how it ended.
        traces = {m.content: m.metadata for m in await sup.orchestrator.list_messages(caller, sid)
                  if m.kind == "subagent"}
        assert sorted(traces) == ["Subagent 1", "Subagent 2"], traces
        assert traces["Subagent 1"]["outcome"] == "stopped_by_you"
        assert traces["Subagent 2"]["outcome"] == "finished"
        for n in (1, 2):
            assert f"Subagent {n} chunk0" in traces[f"Subagent {n}"]["output"]
            assert traces[f"Subagent {n}"]["tools"] == [f"cat notes-{n}.txt"]
        assert "Subagent 2" not in traces["Subagent 1"]["output"]


@pytest.mark.parametrize("agent", AGENTS)
async def test_a_parent_cancel_stops_every_child_and_counts_them(
        make_supervisor: SupervisorFactory, agent: str) -> None:
    async with make_supervisor() as sup:
        caller, sid, _sub, children = await _running_children(sup, agent, 20_000)
        with trio.fail_after(5):
            outcome = await sup.orchestrator.cancel(caller, sid)
        assert outcome is CancelOutcome.ACKNOWLEDGED
        [status] = await status_messages(sup, caller, sid)
        assert status.content == CANCELLED_STATUS
        assert status.metadata["subagents_cancelled"] == 2
        assert status.metadata["cancelled"] is True
        await _wait_for(sup, caller, sid, ["cancelled", "cancelled"], timeout=5)
        assert not sup.notify.projection.get(sid).pending
        # The person's cancel stopped them: their traces say so.
        with trio.fail_after(5):
            while len(traces := [m for m in await sup.orchestrator.list_messages(caller, sid)
                                 if m.kind == "subagent"]) < 2:
                await trio.sleep(0.02)
        assert [m.metadata["outcome"] for m in traces] == ["stopped_by_you"] * 2
        # Nothing left to stop: a later ask for either is a no-op answer.
        for child in children:
            assert (await sup.subagents.cancel(sid, child["id"]))[0] == "already_finished"


async def test_the_next_turns_children_replace_the_ended_ones(
        make_supervisor: SupervisorFactory) -> None:
    async with make_supervisor() as sup:
        caller, sid, _sub, first = await _running_children(sup, "mock-acp2", 300)
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
        await sup.orchestrator.send_message(caller, sid, "/subagents 1 300")
        with trio.fail_after(10):
            while True:
                children = await _subagents(sup, caller, sid)
                if len(children) == 1 and children[0]["id"] not in {c["id"] for c in first}:
                    break
                await trio.sleep(0.02)


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("mode", ["hang", "hang-all"])
async def test_an_escalated_parent_cancel_stops_every_child_and_counts_them(
        make_supervisor: SupervisorFactory, agent: str, mode: str,
        autojump_clock: MockClock) -> None:
    """The agent does not confirm the parent's cancel (``hang``: its children
    confirm theirs; ``hang-all``: nothing is confirmed): the supervisor ends the
    turn itself, and the children end with it, counted as a confirmed cancel's."""
    async with make_supervisor(launcher=FakeLauncher(), inline=True, cancel_join_s=0.3,
                               cancel_escalate_s=0.8) as sup:
        caller, sid = await new_session(sup, agent)
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        await sup.orchestrator.send_message(caller, sid, f"/subagents 2 20000 {mode}")
        children = await _wait_for(sup, caller, sid, ["running", "running"])
        with trio.fail_after(5):
            outcome = await sup.orchestrator.cancel(caller, sid)
        assert outcome is CancelOutcome.ESCALATED
        [status] = await status_messages(sup, caller, sid)
        assert status.content == CANCELLED_STATUS
        assert status.metadata["escalated"] is True
        assert status.metadata["subagents_cancelled"] == 2
        now = await _subagents(sup, caller, sid)
        assert [(c["state"], c["cancellable"]) for c in now] == [("cancelled", False)] * 2
        changed = [f for f in queued(sub) if '"session.subagent.changed"' in f]
        assert sum('"cancelled"' in f for f in changed) >= 2
        for child in children:
            assert (await sup.subagents.cancel(sid, child["id"]))[0] == "already_finished"
        # The abandoned agent's later word on its children changes nothing shown.
        await trio.sleep(0.3)
        assert [c["state"] for c in await _subagents(sup, caller, sid)] == ["cancelled"] * 2
