"""No tool process outlives its agent's execution (issue 15, containment).

The weird agent's ``/spawn*`` prompts start ``sleep 600`` in a session of its
own (as codex-acp runs ``bash -lc``), outside the agent's process group; the
agent then streams, hangs or crashes.  After a stop, a crash, an escalation's
replacement, and a backend's death followed by the startup sweep, the tool is
gone."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from protocols.process import process_identity, start_agent_process
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor
from supervisor.session.lifecycle import CancelOutcome
from supervisor.storage.db import Db
from supervisor.turn.recovery import recover
from tests.support.sessions import new_session

from .conftest import SupervisorFactory

WEIRD = str(Path(__file__).resolve().parents[1] / "faults" / "weird_agent.py")
DIALECTS = ["acp", "codex"]


def _agents(protocol: str) -> dict[str, Any]:
    # Unsandboxed: the containment tested here is the one that holds without a
    # pid namespace (bwrap's namespace takes its processes with it), and the
    # tool's pid the agent reports must be a pid of ours.
    return {"weird": {"protocol": protocol, "sandbox": "none",
                      "command": [sys.executable, WEIRD, "--protocol", protocol]}}


def alive(pid: int) -> bool:
    """A live process (a zombie is dead: it only waits for its reaper)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def gone(pid: int, within: float = 10.0) -> bool:
    with trio.move_on_after(within):
        while alive(pid):
            await trio.sleep(0.05)
    return not alive(pid)


async def _tool_pid(sup: Supervisor, caller: Caller, sid: str) -> int:
    with trio.fail_after(10):
        while True:
            text = " ".join(m.content for m in await sup.orchestrator.list_messages(caller, sid))
            found = re.search(r"tool-pid: (\d+)", text)
            if found:
                return int(found.group(1))
            await trio.sleep(0.02)


async def _start(sup: Supervisor, prompt: str) -> tuple[Caller, str, int]:
    """The tool's pid.  (``sleep 600`` does not end by itself: if it is gone,
    the teardown took it.)"""
    caller, sid = await new_session(sup, "weird")
    await sup.orchestrator.send_message(caller, sid, prompt)
    return caller, sid, await _tool_pid(sup, caller, sid)


@pytest.mark.parametrize("protocol", DIALECTS)
async def test_a_tool_in_its_own_session_dies_with_a_stopped_agent(
    make_supervisor: SupervisorFactory, protocol: str
) -> None:
    async with make_supervisor(agents=_agents(protocol)) as sup:
        _, sid, pid = await _start(sup, "/spawn 30000")
        assert alive(pid)
        await sup.lifecycle.stop_execution(sid)
        assert await gone(pid)


@pytest.mark.parametrize("protocol", DIALECTS)
async def test_a_crashed_agents_tool_is_stopped_with_its_execution(
    make_supervisor: SupervisorFactory, protocol: str
) -> None:
    async with make_supervisor(agents=_agents(protocol)) as sup:
        _, sid, pid = await _start(sup, "/spawncrash")
        with trio.fail_after(10):
            while sid in sup.lifecycle.executions:
                await trio.sleep(0.05)
        assert await gone(pid)


async def test_an_escalated_agents_tool_dies_when_the_agent_is_replaced(
    make_supervisor: SupervisorFactory
) -> None:
    async with make_supervisor(agents=_agents("acp"), cancel_join_s=0.2,
                               cancel_escalate_s=0.4) as sup:
        caller, sid, pid = await _start(sup, "/spawnhang")
        with trio.fail_after(10):
            assert await sup.orchestrator.cancel(caller, sid) is CancelOutcome.ESCALATED
        # The next prompt replaces the agent that never ended its turn.
        await sup.orchestrator.send_message(caller, sid, "hello")
        assert await gone(pid)


async def test_a_tool_dies_at_shutdown(make_supervisor: SupervisorFactory) -> None:
    async with make_supervisor(agents=_agents("acp")) as sup:
        _, _, pid = await _start(sup, "/spawn 30000")
    assert await gone(pid)


async def test_the_startup_sweep_stops_a_dead_backends_agent_and_its_tools(
    tmp_path: Path
) -> None:
    """A backend killed with SIGKILL leaves its agent and the agent's tools
    running; the next start's sweep finds them by the recorded group and tag."""
    script = ("import subprocess, sys, time\n"
              "p = subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
              "print(p.pid, flush=True)\n"
              "time.sleep(600)\n")
    agent = await start_agent_process([sys.executable, "-c", script], tag="dead-backend-tag")
    assert agent.stdout is not None
    with trio.fail_after(10):
        tool = int((await agent.stdout.receive_some(100)).split()[0])
    db = Db(tmp_path / "t.db")
    try:
        db.record_agent_group(agent.pid, "s1", "python -c ...", "dead-backend-tag",
                              leader=process_identity(agent.pid))
        assert alive(tool) and alive(agent.pid)
        result = recover(db)
        assert result["swept_groups"] == 1
        with trio.fail_after(5):
            await agent.wait()
        assert await gone(tool)
        assert db.agent_groups() == []
    finally:
        db.close()
        for stream in (agent.stdin, agent.stdout, agent.stderr):
            if stream is not None:
                await stream.aclose()
        if alive(tool):
            os.kill(tool, 9)
