"""start_agent_process / terminate_group with real processes.

Members of the group are found through /proc, and zombies count as gone: a
SIGKILLed grandchild is reparented to PID 1, and whether PID 1 reaps it is the
container's business (in some sandboxes it never does), not ours.
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from pathlib import Path

import pytest
import trio

from protocols.process import (
    kill_tree,
    process_tree,
    start_agent_process,
    tagged_processes,
    terminate_group,
)

from .helpers import MOCK_AGENT, REPO_ROOT

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/proc/self/stat").exists(),
    reason="reads process groups from Linux's /proc",
)

TEST_S = 10.0


def live_members(pgid: int) -> list[int]:
    """Pids in process group ``pgid`` that are not zombies."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # exited while we looked
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parens.
        state, _ppid, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == pgid and state not in ("Z", "X"):
            found.append(int(entry))
    return found


async def test_agent_gets_its_own_group_and_exits_on_eof() -> None:
    with trio.fail_after(TEST_S):
        proc = await start_agent_process([*MOCK_AGENT, "--protocol", "acp"], cwd=str(REPO_ROOT))
        try:
            assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)
            # Wait until the agent is up and reading, so the EOF below is
            # seen by its loop, not raced against interpreter start-up.
            assert proc.stdin is not None and proc.stdout is not None
            await proc.stdin.send_all(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n')
            assert b'"id":1' in await proc.stdout.receive_some()
        finally:
            started = trio.current_time()
            await terminate_group(proc, grace_s=2.0, eof_grace_s=2.0)
        # A well-behaved agent leaves on stdin EOF: no signal needed.
        assert proc.returncode == 0
        assert trio.current_time() - started < 2.0
        assert live_members(proc.pid) == []


async def test_group_that_ignores_sigterm_is_killed() -> None:
    # The leader and its child both ignore SIGTERM (an ignored signal is
    # inherited across fork and exec), as a stuck agent CLI and its helper might.
    script = "trap '' TERM; sleep 60 & echo $!; wait"
    with trio.fail_after(TEST_S):
        proc = await start_agent_process(["sh", "-c", script])
        try:
            assert proc.stdout is not None
            child = int(await proc.stdout.receive_some())
            assert os.getpgid(child) == proc.pid
            assert sorted(live_members(proc.pid)) == sorted([proc.pid, child])
        finally:
            started = trio.current_time()
            await terminate_group(proc, grace_s=0.3, eof_grace_s=0.1)
        elapsed = trio.current_time() - started
        assert proc.returncode == -signal.SIGKILL
        assert 0.3 <= elapsed < 3.0
        assert live_members(proc.pid) == []


async def test_teardown_finishes_even_when_its_caller_is_cancelled() -> None:
    with trio.fail_after(TEST_S):
        proc = await start_agent_process(["sh", "-c", "trap '' TERM; sleep 60"])
        with trio.CancelScope() as scope:
            scope.cancel()
            await terminate_group(proc, grace_s=0.2, eof_grace_s=0.1)
        assert proc.returncode == -signal.SIGKILL
        assert live_members(proc.pid) == []


def alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


#: An agent whose tool moves to a session of its own (as codex-acp's
#: ``bash -lc`` does), then waits for stdin to end, as agents do.
SESSION_TOOL_AGENT = (
    "import subprocess, sys\n"
    "p = subprocess.Popen(['sleep', '30'], start_new_session=True)\n"
    "print(p.pid, flush=True)\n"
    "sys.stdin.read()\n"
)


@pytest.mark.parametrize("exits_on_eof", [True, False], ids=["agent exits on EOF", "stuck agent"])
async def test_teardown_kills_a_tool_in_its_own_session(exits_on_eof: bool) -> None:
    script = SESSION_TOOL_AGENT
    if not exits_on_eof:
        script = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + script.replace(
            "sys.stdin.read()", "import time; time.sleep(60)"
        )
    with trio.fail_after(TEST_S):
        proc = await start_agent_process([sys.executable, "-c", script])
        try:
            assert proc.stdout is not None
            tool = int(await proc.stdout.receive_some())
            assert alive(tool)
            # Its own session and group: signalling the agent's group misses it.
            assert os.getsid(tool) == tool != os.getsid(proc.pid)
            assert process_tree(proc.pid) == {proc.pid, tool}
        finally:
            await terminate_group(proc, grace_s=0.3, eof_grace_s=0.3)
        assert not alive(tool)
        assert live_members(proc.pid) == []


def test_process_tree_follows_ppid_links_only() -> None:
    me = os.getpid()
    tree = process_tree(me)
    assert me in tree
    assert os.getppid() not in tree
    assert process_tree(2**22 + 17) == set()  # no such pid


def test_kill_tree_never_hits_its_caller() -> None:
    assert kill_tree([os.getpid()]) == []


async def test_tagged_tools_are_found_after_their_agent_is_gone() -> None:
    """The crash case: no ppid link leads from the backend to an orphaned tool,
    but the tag in its environment does (and only the right tag)."""
    tag = f"test-{uuid.uuid4().hex}"
    leaver = SESSION_TOOL_AGENT.replace("sys.stdin.read()\n", "")
    with trio.fail_after(TEST_S):
        proc = await start_agent_process([sys.executable, "-c", leaver], tag=tag)
        assert proc.stdout is not None
        tool = int(await proc.stdout.receive_some())
        await proc.wait()
        await terminate_group(proc, grace_s=0.2, eof_grace_s=0.2)
        # The agent exited before its teardown: its tree was already gone.
        assert alive(tool)
        assert tagged_processes([tag]) == {tool}
        assert tagged_processes([f"{tag}-other"]) == set()
        assert tagged_processes([]) == set()
        assert kill_tree(tagged_processes([tag])) == [tool]
        while alive(tool):
            await trio.sleep(0.01)
