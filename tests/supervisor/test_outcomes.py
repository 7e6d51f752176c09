"""Outcomes that say what happened (issue 15): each status message matches the
turn's real end, against real agent subprocesses in both dialects."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from supervisor.errors import AgentStartError
from supervisor.models import CANCELLED_STATUS, SessionState
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor
from supervisor.session.lifecycle import SHUTDOWN_STATUS, CancelOutcome
from tests.support.bus_frames import queued
from tests.support.sessions import new_session

from .conftest import SupervisorFactory
from .fake_agent import FakeLauncher

WEIRD = str(Path(__file__).resolve().parents[1] / "faults" / "weird_agent.py")
DIALECTS = ["acp", "codex"]


def weird(protocol: str, **env: str) -> dict[str, Any]:
    return {"protocol": protocol, "command": [sys.executable, WEIRD, "--protocol", protocol],
            "env": env}


async def _wait(sup: Supervisor, caller: Caller, sid: str, pred: Any,
                timeout: float = 10) -> list[Any]:
    with trio.fail_after(timeout):
        while True:
            msgs = await sup.orchestrator.list_messages(caller, sid)
            if pred(msgs):
                return list(msgs)
            await trio.sleep(0.02)


def _statuses(msgs: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(m.content, m.metadata) for m in msgs if m.kind == "status"]


@pytest.mark.parametrize("protocol", DIALECTS)
async def test_shutdown_is_not_recorded_as_the_users_cancel(
    make_supervisor: SupervisorFactory, protocol: str
) -> None:
    agent = "mock" if protocol == "acp" else "mock-codex"
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, agent)
        await sup.orchestrator.send_message(caller, sid, "/delay 20000")
        await _wait(sup, caller, sid, lambda ms: any(m.role == "agent" for m in ms))
    # The supervisor shut down with the turn running; a new one reads what it wrote.
    async with make_supervisor() as sup:
        caller = await sup.caller()
        msgs = await sup.orchestrator.list_messages(caller, sid)
        assert _statuses(msgs) == [(SHUTDOWN_STATUS, {"interrupted": True,
                                                      "variant": "warning"})]
        assert (await sup.orchestrator.session(caller, sid)).state is \
            SessionState.WAITING_FOR_INPUT


@pytest.mark.parametrize("protocol", DIALECTS)
async def test_an_agent_error_after_a_user_cancel_reads_as_the_users_cancel(
    make_supervisor: SupervisorFactory, protocol: str
) -> None:
    async with make_supervisor(agents={"weird": weird(protocol)}) as sup:
        caller, sid = await new_session(sup, "weird")
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        await sup.orchestrator.send_message(caller, sid, "/errorcancel 20000")
        await trio.sleep(0.3)
        with trio.fail_after(5):
            assert await sup.orchestrator.cancel(caller, sid) is CancelOutcome.ACKNOWLEDGED
        msgs = await sup.orchestrator.list_messages(caller, sid)
        [(text, meta)] = _statuses(msgs)
        assert text == CANCELLED_STATUS
        assert meta["cancelled"] is True and meta["agent_stop_reason"] == "error"
        assert "Agent error" not in " ".join(m.content for m in msgs)
        frames = " ".join(queued(sub))
        assert '"stop_reason":"cancelled"' in frames
        # The agent did not acknowledge the cancel: it failed.
        assert "session.agent.cancelled" not in frames


async def test_an_escalated_cancel_is_not_an_acknowledgement(
    make_supervisor: SupervisorFactory,
    autojump_clock: MockClock,
) -> None:
    async with make_supervisor(launcher=FakeLauncher(), inline=True,
                               cancel_join_s=0.3, cancel_escalate_s=0.6) as sup:
        caller, sid = await new_session(sup, "mock")
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        await sup.orchestrator.send_message(caller, sid, "/hang")
        await trio.sleep(0.2)
        with trio.fail_after(10):
            assert await sup.orchestrator.cancel(caller, sid) is CancelOutcome.ESCALATED
        frames = queued(sub)
        joined = " ".join(frames)
        assert "session.agent.cancelled" not in joined
        phases = [f.split('"phase":"')[1].split('"')[0] for f in frames
                  if "session.cancel.progress" in f]
        assert phases == ["sent", "late", "escalated"]
        msgs = await sup.orchestrator.list_messages(caller, sid)
        assert _statuses(msgs) == [(CANCELLED_STATUS, {"cancelled": True, "variant": "warning",
                                                       "escalated": True})]


@pytest.mark.parametrize("protocol", DIALECTS)
async def test_a_dropped_early_cancel_is_resent_and_lands_in_under_a_second(
    make_supervisor: SupervisorFactory, protocol: str
) -> None:
    agent = "mock" if protocol == "acp" else "mock-codex"
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, agent)
        await sup.orchestrator.send_message(caller, sid, "/dropcancel 20000")
        start = trio.current_time()
        with trio.fail_after(5):
            outcome = await sup.orchestrator.cancel(caller, sid)
        assert outcome is CancelOutcome.ACKNOWLEDGED
        assert trio.current_time() - start < 1.0


@pytest.mark.parametrize("protocol", DIALECTS)
async def test_a_start_failure_says_why(make_supervisor: SupervisorFactory, protocol: str) -> None:
    async with make_supervisor(agents={"broken": weird(protocol, WEIRD_AGENT_BOOM="1"),
                                       "missing": {"protocol": protocol,
                                                   "command": ["no-such-agent-cli"]}}) as sup:
        caller = await sup.caller()
        task = await sup.orchestrator.create_task(caller, "t")
        with pytest.raises(AgentStartError) as broken:
            await sup.orchestrator.launch_session(caller, task.id, "broken")
        text = str(broken.value)
        assert "exited with status 3" in text and "boom: bad config" in text, text
        assert "Trio nursery" not in text
        with pytest.raises(AgentStartError) as missing:
            await sup.orchestrator.launch_session(caller, task.id, "missing")
        assert "'no-such-agent-cli' was not found" in str(missing.value)
        sessions = await sup.orchestrator.list_sessions(caller, task.id)
        assert [s["state"] for s in sessions] == ["FAILED", "FAILED"]
        first = await sup.orchestrator.list_messages(caller, sessions[0]["id"])
        assert _statuses(first) == [(text, {"variant": "error", "start_failed": True})]


async def test_a_start_timeout_says_it_timed_out_and_after_how_long(
    make_supervisor: SupervisorFactory
) -> None:
    # A shell, not Python: its line is on stderr within the bound even on a loaded
    # machine (a Python that took longer than 0.5 s to start lost the "loading").
    hang = {"protocol": "acp", "command": ["/bin/sh", "-c", "echo loading >&2; exec sleep 60"]}
    async with make_supervisor(agents={"slow": hang}, agent_start_s=2.0) as sup:
        caller = await sup.caller()
        task = await sup.orchestrator.create_task(caller, "t")
        with pytest.raises(AgentStartError) as slow:
            await sup.orchestrator.launch_session(caller, task.id, "slow")
        assert str(slow.value) == "agent 'slow' did not start within 2s: loading"


async def test_deny_and_stop_ends_the_turn_as_the_users_cancel(
    make_supervisor: SupervisorFactory
) -> None:
    """Codex's ``cancel`` decision: the agent is told (the decision is sent) and
    the turn ends through the one user-cancel operation: pending true → false,
    one status message "Turn cancelled by user"."""
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, "mock-codex")
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        await sup.orchestrator.send_message(caller, sid, "/permission")
        with trio.fail_after(10):
            while not sup.lifecycle.executions[sid].permissions:
                await trio.sleep(0.02)
        [(request_id, card)] = sup.lifecycle.executions[sid].permissions.items()
        options = {o["option_id"]: o["name"] for o in card.metadata["options"]}
        assert options == {"accept": "Allow", "acceptForSession": "Allow for this session",
                           "decline": "Deny", "cancel": "Deny and stop"}
        assert card.metadata["details"]["command"] == "touch file.txt"
        await sup.orchestrator.respond_permission(caller, sid, request_id, "cancel")
        msgs = await _wait(sup, caller, sid, lambda ms: any(m.kind == "status" for m in ms))
        assert _statuses(msgs) == [(CANCELLED_STATUS, {"cancelled": True, "variant": "warning"})]
        with trio.fail_after(10):
            while sup.notify.projection.get(sid).pending or sid in sup.orchestrator.operations:
                await trio.sleep(0.02)
        assert sup.orchestrator.settled[-1].session_id == sid
        changes = [f for f in queued(sub) if "session.cancellation_changed" in f]
        assert len(changes) == 2
        assert (await sup.orchestrator.session(caller, sid)).state is \
            SessionState.WAITING_FOR_INPUT
