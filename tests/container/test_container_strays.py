"""The container executor's ``LaunchedAgent.strays``: agentctl (the container's
PID 1) scans its agent's group inside the container and ends what the agent
left, through the same endpoints as any agentctl."""

from __future__ import annotations

from pathlib import Path

import trio

from supervisor.config import Config
from supervisor.executors import launch_container
from supervisor.executors.agentctl_link import AgentctlLink
from supervisor.profiles import AgentProfile
from tests.container.container_support import Engine
from tests.support.agentctl_status import status_once_started

TEST_S = 120.0


async def test_a_container_agents_stray_is_listed_and_ended(tmp_path: Path,
                                                            engine: Engine) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    profile = AgentProfile(
        name="straying", protocol="acp", executor="container", image=engine.image,
        command=("sh", "-c", "sleep 61 & exec python -m protocols.mock_agent --protocol acp"),
        pids=64)
    with trio.fail_after(TEST_S):
        async with launch_container(Config(data_dir=data), profile, str(work),
                                    owner="c1") as agent:
            assert agent.strays is not None
            while not (found := await agent.strays.scan()) or any(
                    not s.command.startswith("sleep") for s in found):
                await trio.sleep(0.05)
            [stray] = found
            assert stray.command == "sleep 61"
            ended = await agent.strays.end()
            assert ended.killed == (stray.pid,) and ended.remaining == ()
            assert await agent.strays.scan() == []
            link = agent.adapter.connection
            assert isinstance(link, AgentctlLink)
            # The agent may still be initializing (nothing above waited for it).
            status = await status_once_started(link)
            assert status["agent"]["state"] == "ready" and status["agents_started"] == 1
