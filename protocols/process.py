"""Agent subprocesses: started in their own process group, torn down as a group.

Trio's default shares the parent's process group, so a signal meant for the
agent could not reach its children (claude-code-acp leaves its ``claude``
child alive unless the whole group is signalled).  Teardown follows the shape
of trio's ``_run_process``: a shielded scope with its own deadline, SIGTERM to
the group, a grace period, SIGKILL to the group, and the child always reaped.
PR_SET_PDEATHSIG is not an option with trio (it forks on worker threads that
retire), so a crashed backend leaves groups behind; the supervisor records each
group id, with its leader's identity (``process_identity``), and sweeps it at
startup only where ``may_sweep`` says the id is still ours.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence

import trio

__all__ = [
    "drain_stderr",
    "kill_group",
    "may_sweep",
    "process_identity",
    "signal_group",
    "start_agent_process",
    "start_ticks",
    "terminate_group",
]


async def start_agent_process(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> trio.Process:
    """Spawn ``command`` with piped stdio, as the leader of a new process group
    (and session)."""
    return await trio.lowlevel.open_process(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        # A new session is a new process group led by the agent, and no
        # controlling terminal: an agent cannot type into the backend's
        # terminal (TIOCSTI) nor get its job-control signals.
        start_new_session=True,
    )


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Signal a whole group; False if it no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        # The id was reused by someone else's group: not ours to touch.
        return False
    return True


def kill_group(pgid: int) -> bool:
    return signal_group(pgid, signal.SIGKILL)


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return "?"


def process_identity(pid: int) -> str | None:
    """``BOOT_ID:START`` of a live process (START: field 22 of /proc/PID/stat,
    its start time in clock ticks after boot), or None if there is none.

    A pid number is reused once its process is gone; the same number with the
    same start time in the same boot is the same process.  The fields are
    counted after the last ``)``: the command name in between may hold spaces
    and parentheses."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:  # gone (or never was)
        return None
    start = start_ticks(stat)
    return None if start is None else f"{_boot_id()}:{start}"


def start_ticks(stat: bytes) -> int | None:
    """Field 22 (starttime) of a /proc/PID/stat line."""
    fields = stat[stat.rfind(b")") + 1:].split()
    # Fields 3.. follow the ")": starttime (22) is the 20th of them.
    if len(fields) < 20 or not fields[19].isdigit():
        return None
    return int(fields[19])


def may_sweep(recorded: str | None, current: str | None) -> bool:
    """Whether a recorded agent group may be SIGKILLed at startup.

    ``recorded``: its leader's identity when it was started; ``current``: the
    identity of the process that has the leader's pid now (None: no process).

    - The leader is alive with the recorded identity: it is our group.
    - A process with the leader's pid but another identity: the id was reused
      by an unrelated process (and its group, if it leads one): never killed.
      Without a recorded identity (a row from before identities were kept)
      there is no telling: not killed either.
    - No process with that pid: the kernel does not hand out a pid number
      while a process group still bears it, so a group with that id can only
      be what is left of ours (members that outlived the leader): killed.
    """
    if current is None:
        return True
    return recorded is not None and recorded == current


async def terminate_group(
    proc: trio.Process, *, grace_s: float, eof_grace_s: float = 0.3, reap_s: float = 5.0
) -> None:
    """Close stdin and wait ``eof_grace_s`` (well-behaved agents exit on EOF),
    SIGTERM the group, wait ``grace_s``, SIGKILL the group, reap.

    Runs shielded (teardown must finish even when its caller is cancelled) but
    bounded by ``grace_s + reap_s``.  The group is SIGKILLed even when the
    leader exited within the grace period, so that children that ignored
    SIGTERM do not outlive it.
    """
    pgid = proc.pid
    budget = eof_grace_s + grace_s + reap_s
    with trio.CancelScope(shield=True, deadline=trio.current_time() + budget):
        if proc.stdin is not None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await proc.stdin.aclose()
        if proc.returncode is None and eof_grace_s > 0:
            with trio.move_on_after(eof_grace_s):
                await proc.wait()
        if proc.returncode is None:
            signal_group(pgid, signal.SIGTERM)
            with trio.move_on_after(grace_s):
                await proc.wait()
        kill_group(pgid)
        if proc.returncode is None:
            await proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                await stream.aclose()


#: Longest stderr line passed on; an agent flooding stderr costs bounded memory.
STDERR_LINE_CAP = 2000


async def drain_stderr(stream: trio.abc.ReceiveStream, emit: Callable[[str], None]) -> None:
    """Read an agent's stderr until it ends, handing at most the last 20 lines
    of each read (each cut at ``STDERR_LINE_CAP``) to ``emit``: the pipe never
    fills (a full pipe would block the agent) and a flood is not logged whole."""
    buf = b""
    while True:
        try:
            data = await stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        if not data:
            return
        buf = (buf + data)[-STDERR_LINE_CAP * 4:]
        *lines, buf = buf.split(b"\n")
        for line in lines[-20:]:
            emit(line[:STDERR_LINE_CAP].decode(errors="replace"))
