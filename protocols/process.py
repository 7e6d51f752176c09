"""Agent subprocesses: started in their own process group, torn down with
every process they started.

Trio's default shares the parent's process group, so a signal meant for the
agent could not reach its children (claude-code-acp leaves its ``claude``
child alive unless the whole group is signalled).  Teardown follows the shape
of trio's ``_run_process``: a shielded scope with its own deadline, SIGTERM to
the group, a grace period, SIGKILL to the group, and the child always reaped.

A group is not enough: agents run tools in groups or sessions of their own
(codex-acp's ``bash -lc`` does), and a tool's parent may exit first.  So
teardown first collects the agent's whole process tree from /proc
(``process_tree``, ppid links, whatever group or session) while the agent is
still its root, and signals every collected process and its group after the
agent's own group.  A tool orphaned by an agent that exited first is outside
that tree; an agent started with a ``tag`` passes it to its tools in their
environment, and teardown (``terminate_group(..., tag=)``) and the startup
sweep after a backend crash (``tagged_processes``) find them by it.

PR_SET_PDEATHSIG is not an option with trio (it forks on worker threads that
retire), so a crashed backend leaves groups behind; the supervisor records each
group id, with its leader's identity (``process_identity``), and sweeps it at
startup only where ``may_sweep`` says the id is still ours.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

import trio

__all__ = [
    "AGENT_TAG_ENV",
    "EOF_GRACE_S",
    "REAP_S",
    "clean_stderr_line",
    "drain_stderr",
    "group_alive",
    "kill_group",
    "kill_tree",
    "may_sweep",
    "process_identity",
    "process_tree",
    "signal_group",
    "start_agent_process",
    "start_ticks",
    "tagged_processes",
    "terminate_group",
]


#: Set in an agent's environment when it is started with a ``tag``; its tools
#: inherit it, so ``tagged_processes`` finds them after a backend crash, when
#: no ppid link leads to them any more.
AGENT_TAG_ENV: Final = "TURNVISOR_AGENT_TAG"


async def start_agent_process(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    tag: str | None = None,
    pass_fds: Sequence[int] = (),
) -> trio.Process:
    """Spawn ``command`` with piped stdio, as the leader of a new process group
    (and session); ``tag`` goes into its environment as ``AGENT_TAG_ENV``;
    ``pass_fds`` are inherited (a sandbox's descriptors, protocols/sandbox.py)."""
    full_env = dict(env) if env is not None else None
    if tag is not None:
        full_env = {**(full_env if full_env is not None else os.environ), AGENT_TAG_ENV: tag}
    return await trio.lowlevel.open_process(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=full_env,
        cwd=cwd,
        pass_fds=tuple(pass_fds),
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


#: How long a well-behaved agent gets to exit on stdin EOF before SIGTERM.
EOF_GRACE_S = 0.3
#: How long reaping may take after SIGKILL.
REAP_S = 5.0


async def terminate_group(
    proc: trio.Process, *, grace_s: float, eof_grace_s: float = EOF_GRACE_S,
    reap_s: float = REAP_S, tag: str | None = None,
) -> None:
    """Close stdin and wait ``eof_grace_s`` (well-behaved agents exit on EOF),
    SIGTERM the group, wait ``grace_s``, SIGKILL the group, reap.

    Runs shielded (teardown must finish even when its caller is cancelled) but
    bounded by ``grace_s + reap_s``.  The group is SIGKILLed even when the
    leader exited within the grace period, so that children that ignored
    SIGTERM do not outlive it.  The agent's process tree is collected before
    anything is signalled (once the agent exits, its children are no longer
    its children) and every process in it is SIGKILLed with the group, whatever
    group or session it moved to.  With ``tag`` (the agent
    was started with it), every process still carrying it is killed too: the
    tools of an agent that exited before its teardown, which no ppid link
    leads to any more.
    """
    pgid = proc.pid
    budget = eof_grace_s + grace_s + reap_s
    with trio.CancelScope(shield=True, deadline=trio.current_time() + budget):
        tree = await _tree_of(proc.pid)
        if proc.stdin is not None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await proc.stdin.aclose()
        if proc.returncode is None and eof_grace_s > 0:
            with trio.move_on_after(eof_grace_s):
                await proc.wait()
        if proc.returncode is None:
            # The group only: processes that left it get the SIGKILL below.  A
            # SIGTERM to them now would also reach a sandbox's namespace init (a
            # session of its own), whose death takes the agent down before the
            # agent could end on its own SIGTERM.
            signal_group(pgid, signal.SIGTERM)
            with trio.move_on_after(grace_s):
                await proc.wait()
        # Children started during the grace period, while the leader lived.
        if proc.returncode is None:
            tree.update(await _tree_of(proc.pid))
        kill_group(pgid)
        _signal_snapshot(tree, signal.SIGKILL)
        if tag is not None:
            tree.update(await trio.to_thread.run_sync(
                lambda: _snapshot(tagged_processes({tag}))))
            _signal_snapshot(tree, signal.SIGKILL)
        if proc.returncode is None:
            await proc.wait()
        # Done means gone; those that are our children are ours to reap.
        await _reap_ours(tree)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                await stream.aclose()


async def _tree_of(pid: int) -> dict[int, int]:
    """``pid``'s descendants, identified (a walk of all of /proc: milliseconds
    with a few hundred processes, so on a worker thread, not the event loop)."""
    return await trio.to_thread.run_sync(lambda: _snapshot(process_tree(pid) - {pid}))


# -- the process tree, from /proc ------------------------------------------------

_PROC: Final = "/proc"


def _read(path: str) -> bytes | None:
    # os.open/os.read: a pathlib read costs several times more, and teardown
    # reads every process's stat once or twice.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgrp, start time) of ``pid``, or None if it is gone."""
    data = _read(f"/proc/{pid}/stat")
    if data is None:
        return None
    # "pid (comm) state ppid pgrp session ... starttime(22nd)": comm may hold
    # spaces and parentheses, so split after its last ")".
    fields = data.rsplit(b")", 1)[-1].split()
    try:
        return fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _all_pids() -> list[int]:
    try:
        return [int(e) for e in os.listdir(_PROC) if e.isdigit()]
    except OSError:
        return []


def group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` has a live member (zombies waiting for a
    reaper are not alive: signalling them does nothing)."""
    for pid in _all_pids():
        st = _stat(pid)
        if st is not None and st[2] == pgid and st[0] not in ("Z", "X"):
            return True
    return False


def _parents() -> dict[int, int]:
    """pid → ppid for every live (non-zombie) process."""
    out: dict[int, int] = {}
    for pid in _all_pids():
        st = _stat(pid)
        if st is not None and st[0] not in ("Z", "X"):
            out[pid] = st[1]
    return out


def process_tree(pid: int) -> set[int]:
    """``pid`` and all its live descendants, by ppid links in /proc, whatever
    process group or session each is in.  Empty if ``pid`` is gone (or on a
    system without /proc)."""
    parents = _parents()
    if pid not in parents:
        return set()
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    tree, todo = {pid}, [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return tree


def _snapshot(pids: Iterable[int]) -> dict[int, int]:
    """pid → start time: a pid is signalled later only if it is still the same
    process (pids are reused)."""
    out: dict[int, int] = {}
    for pid in pids:
        st = _stat(pid)
        if st is not None:
            out[pid] = st[3]
    return out


def _signal_snapshot(snapshot: dict[int, int], sig: signal.Signals) -> list[int]:
    """Signal each process of ``snapshot`` still alive as itself, and its group
    (never ours, never one whose leader is not the process); return those hit."""
    own_group = os.getpgrp()
    hit = []
    for pid, started in snapshot.items():
        st = _stat(pid)
        if st is None or st[3] != started or st[0] in ("Z", "X") or pid == os.getpid():
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            hit.append(pid)
        pgrp = st[2]
        if pgrp == pid and pgrp != own_group:
            # A group of its own (setsid, setpgid): its members die with it.
            signal_group(pgrp, sig)
    return hit


def kill_tree(pids: Iterable[int]) -> list[int]:
    """SIGKILL each of ``pids`` (and the group each leads); return those killed.
    Not the caller's own process or group."""
    return _signal_snapshot(_snapshot(pids), signal.SIGKILL)


def _try_reap(pid: int) -> bool:
    """Reap ``pid`` if it has exited (never blocks); True once it is no
    longer ours to wait for."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True  # reaped elsewhere, or never ours
    return done != 0


def _gone(pid: int, started: int | None) -> bool:
    """True once ``pid`` is dead: reaped if it is our child, otherwise gone or a
    zombie (another parent's to reap), or a different process by now."""
    st = _stat(pid)
    if st is None or (started is not None and st[3] != started):
        return True
    if st[1] == os.getpid():
        return _try_reap(pid)
    return st[0] in ("Z", "X")


async def _reap(pids: Iterable[int] | dict[int, int], *, wait_s: float) -> None:
    """Wait up to ``wait_s`` for ``pids`` (SIGKILLed) to die, reaping those
    that are our children: a SIGKILL takes a moment to land."""
    pending = dict(pids) if isinstance(pids, dict) else dict.fromkeys(pids)
    with trio.move_on_after(wait_s):
        while pending:
            pending = {pid: st for pid, st in pending.items() if not _gone(pid, st)}
            if pending:
                await trio.sleep(0.01)


async def _reap_ours(snapshot: dict[int, int]) -> None:
    await _reap(snapshot, wait_s=REAP_WAIT_S)


#: How long a teardown or a sweep waits for SIGKILLed orphans to be reapable.
REAP_WAIT_S: Final = 1.0


def tagged_processes(tags: Iterable[str]) -> set[int]:
    """Live processes whose environment carries ``AGENT_TAG_ENV`` with one of
    ``tags``: the agents started with those tags and every process below them
    that kept its environment, wherever it was re-parented.  For the startup
    sweep after a backend crash (pass the tags the dead backend recorded, so
    another backend's agents are left alone); only this user's processes can
    be read."""
    wanted = {f"{AGENT_TAG_ENV}={t}".encode() for t in tags}
    if not wanted:
        return set()
    me = os.getpid()
    found = set()
    for pid in _all_pids():
        if pid == me:
            continue
        environ = _read(f"/proc/{pid}/environ")
        if environ is None:
            continue  # gone, or not ours to read
        if wanted.intersection(environ.split(b"\0")):
            st = _stat(pid)
            if st is not None and st[0] not in ("Z", "X"):
                found.add(pid)
    return found


#: Longest stderr line passed on; an agent flooding stderr costs bounded memory.
STDERR_LINE_CAP = 2000


#: Terminal escape sequences (CSI ``ESC [ ... final``, OSC ``ESC ] ... BEL|ST``,
#: two-byte ``ESC x``), then any other C0 control but tab, DEL and the C1 controls.
_CONTROLS: Final = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[ -~]?)"
    r"|[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def clean_stderr_line(line: bytes | str) -> str:
    """One line of an agent's stderr as text safe for a log or a client: its
    escape sequences and control characters (all but tab) removed.  Why: an
    agent's stderr goes to the operator's terminal (the log) and into start
    errors a page shows; an escape sequence there could rewrite what the
    operator sees (clear the screen, retitle the window, fake a log line
    after a carriage return) or hide text."""
    text = line.decode(errors="replace") if isinstance(line, bytes) else line
    return _CONTROLS.sub("", text)


async def drain_stderr(stream: trio.abc.ReceiveStream, emit: Callable[[str], None]) -> None:
    """Read an agent's stderr until it ends, handing at most the last 20 lines
    of each read (each cut at ``STDERR_LINE_CAP``, cleaned by
    ``clean_stderr_line``) to ``emit``: the pipe never fills (a full pipe would
    block the agent) and a flood is not logged whole."""
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
            emit(clean_stderr_line(line[:STDERR_LINE_CAP]))
