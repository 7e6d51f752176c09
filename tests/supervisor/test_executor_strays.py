"""The local executor's ``LaunchedAgent.strays`` on a real agent, unsandboxed
and in bubblewrap: the process the agent left in its group is listed, and
ending it leaves the agent running and answering."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from protocols.process_group import Stray
from protocols.sandbox import bwrap_works
from supervisor.config import Config
from supervisor.executors import LaunchedAgent, launch_local
from supervisor.profiles import AgentProfile

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/proc/self/stat").exists(),
    reason="reads process groups from Linux's /proc",
)

TEST_S = 30.0
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
        await trio.sleep(0.02)


@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
async def test_the_local_agents_stray_is_listed_and_ended(tmp_path: Path, sandbox: str) -> None:
    if sandbox == "bwrap" and not bwrap_works():
        pytest.skip("bwrap cannot run here")
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    config = Config(data_dir=data)
    profile = AgentProfile(name="straying", protocol="acp", command=STRAYING_AGENT,
                           sandbox=sandbox)
    with trio.fail_after(TEST_S):
        async with launch_local(config, profile, str(work)) as agent, \
                trio.open_nursery() as nursery:
            nursery.start_soon(agent.adapter.connection.run)
            await agent.adapter.initialize()
            # Sandboxed, the group also holds the leader, bwrap's monitor and
            # init, and the network helper: none of them is a stray.
            [stray] = await strays_once_settled(agent)
            assert stray.command == "sleep 61"
            assert agent.pgid is not None
            members = _group(agent.pgid)
            if sandbox == "bwrap":
                assert {"python", "bwrap", "sleep"} <= set(members.values())
                assert len(members) >= 5  # leader, monitor, init, agent, sleeper
            else:
                assert sorted(members) == sorted([agent.pgid, stray.pid])
            assert stray.wire() == {"pid": stray.pid, "command": "sleep 61"}

            assert agent.strays is not None
            ended = await agent.strays.end()
            assert ended.killed == (stray.pid,)
            assert ended.remaining == ()
            assert _gone(stray.pid)
            # The agent is untouched: it still answers.
            assert agent.returncode is None
            session = await agent.adapter.new_session(str(work))
            assert session
            assert await agent.strays.scan() == []
            nursery.cancel_scope.cancel()


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _group(pgid: int) -> dict[int, str]:
    """pid → command name of the live members of group ``pgid``."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out[int(entry.name)] = stat[stat.index("(") + 1:stat.rindex(")")]
    return out
