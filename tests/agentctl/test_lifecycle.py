"""The supervisor's cancel path with the agentctl executor: the lifecycle drives a
spawned ``turnvisor agentctl`` (a real process on loopback) exactly as it drives a
local agent, and gets the same outcomes (tests/supervisor/test_cancel_integration.py)."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from agentctl_support import wait_group_gone

from supervisor.config import Config
from supervisor.executors.agentctl_adapter import AgentctlAdapter
from supervisor.models import CANCELLED_STATUS, SessionState
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor, open_supervisor
from supervisor.session.lifecycle import CancelOutcome
from tests.support.sessions import new_agentctl_session
from tests.support.wait import wait_state

AGENTS = pytest.mark.parametrize("agent", ["mock", "mock-codex"])


@asynccontextmanager
async def supervisor(tmp_path: Path, **timeouts: float) -> AsyncIterator[Supervisor]:
    """A supervisor whose mock profiles say ``executor = "agentctl"`` (no URL):
    the lifecycle's default launcher spawns a local agentctl for each session.
    No checkpoints: these tests time the cancel's phases against the agent, and a
    cancel during the turn's checkpoint withholds the prompt instead (tested in
    tests/supervisor)."""
    config = Config.from_mapping(tmp_path / "data", {
        "timeouts": timeouts, "projects": {"checkpoints": False},
        "agents": {"mock": {"executor": "agentctl"}, "mock-codex": {"executor": "agentctl"}},
    })
    async with open_supervisor(config) as sup:
        yield sup



async def _wait_chunks(sup: Supervisor, caller: Caller, sid: str) -> None:
    with trio.fail_after(10):
        while not any(m.role == "agent" for m in
                      await sup.orchestrator.list_messages(caller, sid)):
            await trio.sleep(0.02)


async def _agent_texts(sup: Supervisor, caller: Caller, sid: str) -> list[Any]:
    return [m.content for m in await sup.orchestrator.list_messages(caller, sid)
            if m.role == "agent"]


@AGENTS
async def test_delay_cancels_promptly_and_the_same_agent_answers_again(
        tmp_path: Path, agent: str) -> None:
    with trio.fail_after(40):
        async with supervisor(tmp_path) as sup:
            caller, sid = await new_agentctl_session(sup, agent)
            pgid = sup.lifecycle.executions[sid].agent.pgid
            await sup.orchestrator.send_message(caller, sid, "/delay 10000")
            await _wait_chunks(sup, caller, sid)
            start = trio.current_time()
            outcome = await sup.orchestrator.cancel(caller, sid)
            assert outcome is CancelOutcome.ACKNOWLEDGED
            assert trio.current_time() - start < 1.0
            assert (await sup.orchestrator.session(caller, sid)).state is \
                SessionState.WAITING_FOR_INPUT
            statuses = [m for m in await sup.orchestrator.list_messages(caller, sid)
                        if m.kind == "status"]
            assert [(m.content, m.metadata) for m in statuses] == [
                (CANCELLED_STATUS, {"cancelled": True, "variant": "warning"})]
            await sup.orchestrator.send_message(caller, sid, "hello again")
            await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
            assert sup.lifecycle.executions[sid].agent.pgid == pgid
            assert (await _agent_texts(sup, caller, sid))[-1] == "hello again"


async def test_slow_is_late_and_hang_is_escalated(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with supervisor(tmp_path, cancel_join_s=0.3, cancel_escalate_s=0.9) as sup:
            caller, sid = await new_agentctl_session(sup, "mock")
            await sup.orchestrator.send_message(caller, sid, "/slow 700")
            await _wait_chunks(sup, caller, sid)
            assert await sup.orchestrator.cancel(caller, sid) is CancelOutcome.LATE
            await sup.orchestrator.send_message(caller, sid, "next")
            await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
            assert (await _agent_texts(sup, caller, sid))[-1] == "next"

            await sup.orchestrator.send_message(caller, sid, "/hang")
            await wait_state(sup, caller, sid, SessionState.RUNNING)
            assert await sup.orchestrator.cancel(caller, sid) is CancelOutcome.ESCALATED
            assert (await sup.orchestrator.session(caller, sid)).state is \
                SessionState.WAITING_FOR_INPUT
            assert not sup.notify.projection.get(sid).pending
            # The lifecycle replaces an agent that never ended its escalated turn.
            await sup.orchestrator.send_message(caller, sid, "after hang")
            await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
            assert (await _agent_texts(sup, caller, sid))[-1] == "after hang"


@AGENTS
async def test_agentctl_killed_mid_cancel_is_reconciled(tmp_path: Path, agent: str) -> None:
    with trio.fail_after(60):
        async with supervisor(tmp_path, cancel_join_s=3, cancel_escalate_s=10) as sup:
            caller, sid = await new_agentctl_session(sup, agent)
            ex = sup.lifecycle.executions[sid]
            adapter = ex.adapter
            assert isinstance(adapter, AgentctlAdapter) and ex.agent.pgid is not None
            agent_pgid = (await adapter.status())["agent"]["pid"]
            await sup.orchestrator.send_message(caller, sid, "/slow 20000")
            await _wait_chunks(sup, caller, sid)
            results: list[CancelOutcome] = []
            async with trio.open_nursery() as nursery:
                async def cancel() -> None:
                    results.append(await sup.orchestrator.cancel(caller, sid))
                nursery.start_soon(cancel)
                with trio.fail_after(5):
                    while not sup.notify.projection.get(sid).pending:
                        await trio.sleep(0.01)
                await trio.sleep(0.2)  # the cancel is written; the agent ignores it
                os.kill(ex.agent.pgid, signal.SIGKILL)  # agentctl alone, mid-cancel
                killed = trio.current_time()
            assert trio.current_time() - killed < 3.0
            assert results and results[0] is not CancelOutcome.ESCALATED
            assert not sup.notify.projection.get(sid).pending
            session = await sup.orchestrator.session(caller, sid)
            assert session.state is not SessionState.RUNNING
            await wait_group_gone(agent_pgid, timeout=5)
            # Reconciled, never stuck: the next prompt starts a fresh agentctl.
            await sup.orchestrator.send_message(caller, sid, "after the loss")
            await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
            assert (await _agent_texts(sup, caller, sid))[-1] == "after the loss"
            assert sup.lifecycle.executions[sid].agent.pgid != ex.agent.pgid


async def test_cancel_right_after_the_prompt_never_overtakes_it(tmp_path: Path) -> None:
    """The prompt and the cancel are two HTTP requests: a cancel issued while the
    prompt's request is in flight waits for it instead of finding no turn."""
    with trio.fail_after(60):
        async with supervisor(tmp_path, cancel_join_s=1, cancel_escalate_s=2) as sup:
            caller, sid = await new_agentctl_session(sup, "mock")
            outcomes = []
            for _ in range(8):
                await sup.orchestrator.send_message(caller, sid, "/delay 30000")
                outcomes.append(await sup.orchestrator.cancel(caller, sid))
                await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
            assert outcomes == [CancelOutcome.ACKNOWLEDGED] * 8


def test_warm_up_builds_the_acp_schema_in_a_fresh_process() -> None:
    """agentctl's warm-up builds the models itself: a plain text chunk no
    longer does, so without it the first build fell on a turn's end (and
    a cancel's answer waited for it)."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from web.agentctl.host import warm_up\n"
        "assert 'protocols._acp_models' not in sys.modules\n"
        "warm_up('acp')\n"
        "assert 'protocols._acp_models' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr


async def _children(sup: Supervisor, caller: Caller, sid: str) -> list[dict[str, Any]]:
    session = await sup.orchestrator.session(caller, sid)
    children: list[dict[str, Any]] = sup.notify.session_dto(session)["subagents"]
    return children


async def test_one_subagent_is_stopped_through_agentctl_while_the_parent_goes_on(
        tmp_path: Path) -> None:
    """DESIGN.md §13 through agentctl: ``subagent.cancel`` reaches agentctl's core
    (``POST /api/v1/acp/subagent_cancel``), which writes the child's own cancel."""
    async with supervisor(tmp_path) as sup:
        caller, sid = await new_agentctl_session(sup, "mock")
        # Children of 8 s: the first's cancel lands while both run even when a
        # loaded machine is slow to show them running (with 2.5 s it could end first).
        await sup.orchestrator.send_message(caller, sid, "/subagents 2 8000")
        with trio.fail_after(15):
            while [c["state"] for c in await _children(sup, caller, sid)] != [
                    "running", "running"]:
                await trio.sleep(0.02)
        first, _ = await _children(sup, caller, sid)
        outcome, _ = await sup.subagents.cancel(sid, first["id"])
        assert outcome == "cancel_sent"
        with trio.fail_after(5):
            while (await _children(sup, caller, sid))[0]["state"] != "cancelled":
                await trio.sleep(0.02)
        assert (await _children(sup, caller, sid))[1]["state"] == "running"
        assert (await sup.orchestrator.session(caller, sid)).state is SessionState.RUNNING
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=30)
        assert [c["state"] for c in await _children(sup, caller, sid)] == [
            "cancelled", "completed"]
        # Ended: a second ask is a no-op answer, through agentctl too.
        assert (await sup.subagents.cancel(sid, first["id"]))[0] == "already_finished"
