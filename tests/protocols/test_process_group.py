"""protocols/process_group.py on real process groups: the scan names exactly the
processes the agent left, ending them spares the agent, and a listed pid is
signalled only while it is still the same process in the same group."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from protocols.process import start_agent_process, terminate_group
from protocols.process_group import (
    COMMAND_CHARS,
    GroupStrays,
    Stray,
    end_strays,
    scan_strays,
)

from .helpers import REPO_ROOT

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/proc/self/stat").exists(),
    reason="reads process groups from Linux's /proc",
)

TEST_S = 15.0
LAUNCHER = REPO_ROOT / "web" / "agentctl" / "launcher.py"

#: An agent (the group's leader) that starts a sleeper and a mover in its
#: group, says their pids, and waits for stdin's EOF.  The mover leaves the
#: group (``setsid``) on SIGUSR1; it says so once its handler is set.
AGENT = r"""
import subprocess, sys
sleeper = subprocess.Popen(["sleep", "60"])
mover = subprocess.Popen([sys.executable, "-c",
    "import os, signal, sys, time\n"
    "signal.signal(signal.SIGUSR1, lambda *_: os.setsid())\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"], stdout=subprocess.PIPE)
mover.stdout.readline()
print(sleeper.pid, mover.pid, flush=True)
sys.stdin.read()
"""


def state(pid: int) -> tuple[str, int] | None:
    """(state, pgrp) of ``pid``, None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0], int(fields[2])


async def execed(pid: int, program: str) -> None:
    """Wait until ``pid`` runs ``program`` (a shell says a child's pid before
    the child's exec)."""
    while not _cmdline(pid).startswith(program.encode() + b"\0"):
        await trio.sleep(0.01)


def _cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def alive(pid: int) -> bool:
    st = state(pid)
    return st is not None and st[0] not in ("Z", "X")


@asynccontextmanager
async def agent(argv: list[str]) -> AsyncIterator[tuple[trio.Process, list[int]]]:
    """``argv`` as an agent in a group of its own, and the pids of its first line."""
    proc = await start_agent_process(argv)
    try:
        assert proc.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            chunk = await proc.stdout.receive_some(4096)
            assert chunk, "the agent exited before saying its pids"
            line += chunk
        yield proc, [int(p) for p in line.split()]
    finally:
        await terminate_group(proc, grace_s=1.0)


async def test_the_scan_names_what_the_agent_left_and_ending_spares_the_agent() -> None:
    with trio.fail_after(TEST_S):
        async with agent([sys.executable, "-c", AGENT]) as (proc, (sleeper, mover)):
            found = scan_strays(proc.pid, layout="agent")
            # Exactly the two children, oldest first; the agent itself is not one.
            assert [s.pid for s in found] == [sleeper, mover]
            assert found[0].command == "sleep 60"
            assert found[1].command.startswith(f"{sys.executable} -c import os, signal")
            assert "\n" not in found[1].command

            ended = await GroupStrays(proc, "agent", grace_s=2.0).end()
            assert sorted(ended.killed) == sorted([sleeper, mover])
            assert ended.remaining == ()
            assert not alive(sleeper) and not alive(mover)
            assert proc.returncode is None and alive(proc.pid)
            assert scan_strays(proc.pid, layout="agent") == []


async def test_a_pid_that_left_the_group_is_not_signalled() -> None:
    with trio.fail_after(TEST_S):
        async with agent([sys.executable, "-c", AGENT]) as (proc, (sleeper, mover)):
            found = scan_strays(proc.pid, layout="agent")
            assert {s.pid for s in found} == {sleeper, mover}
            os.kill(mover, signal.SIGUSR1)
            while (st := state(mover)) is not None and st[1] == proc.pid:
                await trio.sleep(0.01)
            try:
                # The listed mover is now in a group of its own: left alone.
                killed = await end_strays(proc.pid, found, grace_s=2.0)
                assert killed == [sleeper]
                assert alive(mover) and not alive(sleeper)
                assert scan_strays(proc.pid, layout="agent") == []
            finally:
                os.kill(mover, signal.SIGKILL)


async def test_another_process_under_a_listed_pid_is_not_signalled() -> None:
    # A listed pid whose start time is not the listed one is another process
    # (the pid was reused): never signalled.
    with trio.fail_after(TEST_S):
        async with agent([sys.executable, "-c", AGENT]) as (proc, (sleeper, _mover)):
            [first, _] = scan_strays(proc.pid, layout="agent")
            assert first.pid == sleeper
            other = Stray(first.pid, first.command, first.start + 1)
            assert await end_strays(proc.pid, [other], grace_s=0.5) == []
            assert alive(sleeper)
            # Nor the group's leader, whatever the list says.
            leader = Stray(proc.pid, "leader", 0)
            assert await end_strays(proc.pid, [leader], grace_s=0.5) == []
            assert alive(proc.pid)


#: An agent with a child that has exited and that it never reaps (a zombie of
#: the group), and a sleeper that ignores SIGTERM.
ZOMBIE_AGENT = r"""
import os, subprocess, sys
zombie = os.fork()
if zombie == 0:
    os._exit(0)
sleeper = subprocess.Popen(["sh", "-c", "trap '' TERM; exec sleep 61"])
print(zombie, sleeper.pid, flush=True)
sys.stdin.read()
"""


async def test_sigterm_then_sigkill_and_zombies_are_not_strays() -> None:
    with trio.fail_after(TEST_S):
        async with agent([sys.executable, "-c", ZOMBIE_AGENT]) as (proc, (zombie, sleeper)):
            while (st := state(zombie)) is not None and st[0] != "Z":
                await trio.sleep(0.01)
            assert state(zombie) == ("Z", proc.pid)
            await execed(sleeper, "sleep")
            found = scan_strays(proc.pid, layout="agent")
            assert [(s.pid, s.command) for s in found] == [(sleeper, "sleep 61")]
            started = trio.current_time()
            assert await end_strays(proc.pid, found, grace_s=0.3) == [sleeper]
            assert trio.current_time() - started >= 0.3  # it took the SIGKILL
            assert not alive(sleeper) and alive(proc.pid)


async def test_launcher_layout_spares_the_launchers_first_child() -> None:
    # agentctl's launcher leads the group and is its descendants' subreaper:
    # an orphan becomes its child too, and is a stray; the agent it started is not.
    script = "(sleep 62 & echo $!); sleep 61 & echo $!; exec sleep 60"
    lifeline_r, lifeline_w = os.pipe()
    try:
        proc = await start_agent_process(
            [sys.executable, str(LAUNCHER), "--lifeline", str(lifeline_r), "--",
             "sh", "-c", script], pass_fds=(lifeline_r,))
    finally:
        os.close(lifeline_r)
    try:
        with trio.fail_after(TEST_S):
            assert proc.stdout is not None
            out = b""
            while out.count(b"\n") < 2:
                out += await proc.stdout.receive_some(4096)
            orphan, child = (int(p) for p in out.split())
            await execed(orphan, "sleep")
            await execed(child, "sleep")
            while _ppid(orphan) != proc.pid:
                await trio.sleep(0.01)
            found = scan_strays(proc.pid, layout="launcher")
            assert sorted(s.pid for s in found) == sorted([orphan, child])
            assert {s.command for s in found} == {"sleep 61", "sleep 62"}
    finally:
        os.close(lifeline_w)
        await terminate_group(proc, grace_s=1.0)


def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


async def test_a_long_command_is_cut_and_a_reused_leader_pid_reports_nothing() -> None:
    long_arg = "x" * 500
    script = (f"{sys.executable} -c 'import time; time.sleep(60)' {long_arg} & echo $!; "
              "exec sleep 60")
    with trio.fail_after(TEST_S):
        async with agent(["sh", "-c", script]) as (proc, (sleeper,)):
            await execed(sleeper, sys.executable)
            [s] = scan_strays(proc.pid, layout="agent")
            assert s.pid == sleeper
            assert len(s.command) == COMMAND_CHARS and s.command.endswith("…")
            assert s.command.startswith(f"{sys.executable} -c import time; time.sleep(60) xxx")
            # A caller that reaped the leader and still finds a live process
            # under its pid: that is another process, the group is not ours.
            assert scan_strays(proc.pid, layout="agent", leader_reaped=True) == []
