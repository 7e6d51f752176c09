"""Agent subprocesses: started in their own process group, torn down as a group.

Trio's default shares the parent's process group, so a signal meant for the
agent could not reach its children (claude-code-acp leaves its ``claude``
child alive unless the whole group is signalled).  Teardown follows the shape
of trio's ``_run_process``: a shielded scope with its own deadline, SIGTERM to
the group, a grace period, SIGKILL to the group, and the child always reaped.
PR_SET_PDEATHSIG is not an option with trio (it forks on worker threads that
retire), so a crashed backend leaves groups behind; the supervisor records each
group id and sweeps it at startup.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence

import trio

__all__ = [
    "EOF_GRACE_S",
    "REAP_S",
    "drain_stderr",
    "kill_group",
    "signal_group",
    "start_agent_process",
    "terminate_group",
]


async def start_agent_process(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> trio.Process:
    """Spawn ``command`` with piped stdio, as the leader of a new process group."""
    return await trio.lowlevel.open_process(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        process_group=0,
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


#: How long a well-behaved agent gets to exit on stdin EOF before SIGTERM.
EOF_GRACE_S = 0.3
#: How long reaping may take after SIGKILL.
REAP_S = 5.0


async def terminate_group(
    proc: trio.Process, *, grace_s: float, eof_grace_s: float = EOF_GRACE_S,
    reap_s: float = REAP_S,
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
