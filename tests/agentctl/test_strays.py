"""agentctl's strays endpoints through a real agentctl, spawned by the agentctl
executor (``launch_agentctl``): ``LaunchedAgent.strays`` lists what the agent
left in its group (agentctl's launcher leads it; sandboxed, bubblewrap's
processes are in it too), ends it, and leaves the agent running."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
import trio
from agentctl_support import group_pids

from protocols.process_group import Stray
from protocols.sandbox import bwrap_works
from supervisor.config import Config
from supervisor.executors import LaunchedAgent, launch_agentctl
from supervisor.executors.agentctl_link import AgentctlLink
from supervisor.profiles import AgentProfile
from tests.support.agentctl_status import status_once_started

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/proc/self/stat").exists(),
    reason="reads process groups from Linux's /proc",
)

TEST_S = 40.0
#: The mock agent, behind a shell that leaves ``sleep 61`` in its group first.
STRAYING_AGENT = ("sh", "-c",
                  f"sleep 61 & exec {sys.executable} -m protocols.mock_agent --protocol acp")


async def strays_once_settled(agent: LaunchedAgent) -> list[Stray]:
    """The strays once the sleeper has exec'd (its shell says nothing before)."""
    assert agent.strays is not None
    while True:
        found = await agent.strays.scan()
        if found and all(s.command.startswith("sleep") for s in found):
            return found
        await trio.sleep(0.05)


def link_of(agent: LaunchedAgent) -> AgentctlLink:
    link = agent.adapter.connection
    assert isinstance(link, AgentctlLink)
    return link


@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
async def test_strays_through_agentctl(tmp_path: Path, sandbox: str) -> None:
    if sandbox == "bwrap" and not bwrap_works():
        pytest.skip("bwrap cannot run here")
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    profile = AgentProfile(name="straying", protocol="acp", command=STRAYING_AGENT,
                           executor="agentctl", sandbox=sandbox)
    with trio.fail_after(TEST_S):
        async with launch_agentctl(Config(data_dir=data), profile, str(work),
                                   owner="s1") as agent:
            link = link_of(agent)
            [stray] = await strays_once_settled(agent)
            assert stray.command == "sleep 61"
            _, status = await link.request("GET", "/api/v1/status", None, timeout_s=10)
            agent_pid = status["agent"]["pid"]
            assert stray.pid != agent_pid
            # Launcher, agent, sleeper; sandboxed also the leader, bwrap's
            # monitor and init, and the network helper where there is one.
            expected = (3,) if sandbox == "none" else (6, 7)
            with trio.move_on_after(10):
                # Polled: a helper that forks as it starts (the network's) is
                # briefly one more on a loaded machine.
                while len(group_pids(agent_pid)) not in expected:
                    await trio.sleep(0.05)
            members = len(group_pids(agent_pid))
            assert members in expected, members

            # Authenticated like agentctl's other endpoints; a bad grace is refused.
            async with httpx.AsyncClient(base_url=link.url) as anonymous:
                resp = await anonymous.get("/api/v1/agent/strays")
                assert resp.status_code == 401
                resp = await anonymous.post("/api/v1/agent/strays/kill", json={})
                assert resp.status_code == 401
            _, refused = await link.request("POST", "/api/v1/agent/strays/kill",
                                            {"grace_s": -1}, timeout_s=10, expect=(422,))
            assert "grace_s" in refused["error"]
            _, listed = await link.request("GET", "/api/v1/agent/strays", None, timeout_s=10)
            assert listed["pgid"] == agent_pid
            assert listed["strays"] == [{"pid": stray.pid, "command": "sleep 61",
                                         "start": stray.start}]

            assert agent.strays is not None
            ended = await agent.strays.end()
            assert ended.killed == (stray.pid,)
            assert ended.remaining == ()
            assert await agent.strays.scan() == []
            # The agent (and its launcher) are untouched. It may still be
            # initializing on a loaded machine (nothing above waited for it).
            after = await status_once_started(link)
            assert after["agent"]["state"] == "ready"
            assert after["agent"]["pid"] == agent_pid and after["agents_started"] == 1
            _, session = await link.request("POST", "/api/v1/session", {"owner": "s1"},
                                            timeout_s=20)
            assert session["success"] is True
