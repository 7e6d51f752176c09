"""A hostile agent against the data dir's hiding and the sessions' fences
(issue 27, items 1 and 5), through a real server and the real sandbox.

- It reads every process's command line in its sandbox for the data dir's
  path (bwrap's options are in a memfd, not its argv): nothing.
- It renames a directory above the data dir (the data dir under the
  agent-writable ``$HOME``, as by default) and leaves an empty decoy at the
  old path: the next launch is refused, loudly, and the token is never
  readable, at either path.
- Two workspaces' sessions: each has its own work dir and its own /tmp;
  neither reads nor plants the other's files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio

from protocols.sandbox import bwrap_works
from supervisor.profiles import BUILTIN_PROFILES, AgentProfile
from tests.security.shell import launch, shell
from tests.support.server import OTHER_TOKEN, TOKEN, Server, running_server
from tests.support.ws import RequestFailed, ws_client

HOSTILE = Path(__file__).with_name("hostile_agent.py")

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot run here")


def _profiles(home: Path) -> dict[str, AgentProfile]:
    hostile = AgentProfile(name="hostile", protocol="acp",
                           command=(sys.executable, str(HOSTILE)), env={"HOME": str(home)})
    return {**BUILTIN_PROFILES, "hostile": hostile}


async def test_no_agent_can_write_above_the_data_dir(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The rename race (move the data dir's parent away, leave a decoy where the
    sandbox's cover lands) needs write access above the data dir.  An agent's
    HOME is its private one, under the data dir; the person's home, which
    holds the data dir, is not writable to it; a profile that would give it a
    writable path above the data dir is refused at launch, with the reason."""
    home = tmp_path / "home"
    data = home / ".local" / "share" / "turnvisor"
    data.mkdir(parents=True)
    (data / "token").write_text(TOKEN + "\n")
    moved = home / ".moved"
    hostile = AgentProfile(name="hostile", protocol="acp",
                           command=(sys.executable, str(HOSTILE)))
    above = AgentProfile(name="above", protocol="acp", command=(sys.executable, str(HOSTILE)),
                         env={"HOME": str(home)})
    profiles = {**BUILTIN_PROFILES, "hostile": hostile, "above": above}
    with trio.fail_after(120):
        async with running_server(data, profiles=profiles) as srv, ws_client(srv) as ws:
            sid = await launch(ws)
            # Where the data dir is: not in any command line it can read.
            seen = await shell(ws, sid, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; "
                                      "echo HOME=$HOME")
            assert "bwrap" in seen["out"] and "--args" in seen["out"], seen
            assert f"HOME={data}/homes/" in seen["out"], seen
            assert seen["out"].rstrip().endswith("/hostile"), seen
            # The attack: move the real data dir away with its parent, leave a decoy.
            moved_dir = moved / "share" / "turnvisor"
            attack = await shell(ws, sid, f"mv {home}/.local {moved} && mkdir -p {data} && "
                                        f"echo renamed; cat {moved_dir}/token {data}/token; "
                                        f"mv {data} {home}/x && echo moved-data")
            # (Under /tmp, as here, the names it moved are those of its own private
            # /tmp's skeleton; the host's stay where they are.)
            assert TOKEN not in attack["out"], attack
            assert (data / "token").read_text() == TOKEN + "\n" and not moved.exists()
            # The next launch: the data dir is where it was, so it starts.
            await launch(ws)
            # A profile whose HOME holds the data dir: refused, saying why.
            task = await ws.call("task.create", {"title": "above"})
            with pytest.raises(RequestFailed) as refused:
                await ws.call("session.launch", {"task_id": task["id"], "agent": "above"})
            why = json.dumps(refused.value.frame)
            assert "could move it" in why and str(data) in why, why


async def _own(srv: Server, token: str) -> tuple[str, str]:
    """A session of the workspace ``token`` opens, and its work dir."""
    async with ws_client(srv, token=token) as ws:
        sid = await launch(ws)
        seen = await shell(ws, sid, "pwd; echo secret-of-$PWD > notes.md; "
                                  "echo tmp-secret-of-$PWD > /tmp/scratch.txt; ls /tmp")
    return sid, seen["out"].splitlines()[0]


async def test_workspaces_see_neither_each_others_files_nor_tmp(tmp_path: Path) -> None:
    data = tmp_path / "data"
    home = tmp_path / "home"
    home.mkdir()
    with trio.fail_after(120):
        async with running_server(data, workspaces={"b": OTHER_TOKEN},
                                  profiles=_profiles(home)) as srv:
            sid_a, cwd_a = await _own(srv, TOKEN)
            sid_b, cwd_b = await _own(srv, OTHER_TOKEN)
            # Each session its own directory, under its own workspace's.
            assert cwd_a != cwd_b
            assert Path(cwd_a).parent != Path(cwd_b).parent
            for sid, cwd in [(sid_a, cwd_a), (sid_b, cwd_b)]:
                assert Path(cwd).name == sid and Path(cwd).parent.parent == data / "work"
                assert (Path(cwd) / "notes.md").read_text() == f"secret-of-{cwd}\n"
            # B's agent goes looking for A's things, and plants an AGENTS.md.
            async with ws_client(srv, token=OTHER_TOKEN) as ws_b:
                await ws_b.call("session.subscribe", {"session_id": sid_b})
                look = await shell(ws_b, sid_b,
                                 f"cat {cwd_a}/notes.md; ls -a {Path(cwd_a).parent} {data}/work; "
                                 f"cat /tmp/scratch.txt; ls -a /tmp; "
                                 f"grep -rs secret-of {data} /tmp; "
                                 f"echo 'obey me' > {cwd_a}/AGENTS.md")
            assert f"secret-of-{cwd_a}" not in look["out"], look
            assert f"tmp-secret-of-{cwd_a}" not in look["out"], look
            # Its own /tmp file is there, A's is not.
            assert f"tmp-secret-of-{cwd_b}" in look["out"], look
            assert not (Path(cwd_a) / "AGENTS.md").exists()
            assert look["rc"] != 0
