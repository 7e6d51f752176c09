"""What an agent leaves in its process group: found (``scan_strays``) and ended
(``end_strays``), for the stop receipt's ``strays`` and ``session.kill_strays``
(DESIGN.md §18).

A stray is a live process of the agent's group that is neither the agent nor
one of the processes that hold it (a background job a tool started, a server it
left running).  Which members are the agent and its holders depends on how the
group was started (``Layout``):

- ``agent``: the agent leads its own group (the local executor, unsandboxed);
  every other member is a stray.
- ``launcher``: agentctl's launcher (web/agentctl/launcher.py) leads the group
  and the agent is its child.  The launcher is its descendants' subreaper, so
  orphans are its children too: the agent is the child it started first (the
  earliest start time; the lowest pid between two started in the same tick).
- ``sandbox``: the agent runs in bubblewrap with ``--unshare-pid``, behind a
  leader (protocols/leader.py, itself under the launcher with agentctl).  The
  group then holds, outside the sandbox, the leader (and the launcher), bwrap's
  monitor and the network helper (pasta); inside the sandbox's pid namespace,
  bwrap's init (pid 1 there) and the agent, the first and only process that
  init starts (pid 2 there), and below them whatever the agent started.  A
  process can never leave its pid namespace, so nothing outside the sandbox's
  is the agent's doing: those members are never strays.  Inside, every member
  but pids 1 and 2 is one, however deep it nests its own namespaces (Codex
  sandboxes its commands with bwrap too).  The pid a process has in each
  namespace is the ``NSpid`` line of /proc/PID/status, counted from the
  namespace of the /proc we read (ours).

Why one pass, and why a re-check before each signal.  The scan reads /proc
once (a directory listing, one ``stat`` per process, ``status`` and
``cmdline`` only for the group's members): it runs after every stop, so it
must cost a few milliseconds, and a process list assembled from several
passes would mix moments anyway.  That list is a snapshot, and a pid is only
a number: by the time a person asks to end the strays, a listed process may
have exited and its pid been given to an unrelated process, or it may have
moved to a group of its own (``setsid``).  So each stray carries its start
time (its identity with the pid), and just before every signal its
``/proc/PID/stat`` is read again: the signal goes only to the same process
(same start time), still alive and still in the agent's group, and never to
the group's leader.  Processes vanishing mid-scan are skipped: gone is not a
stray.  Zombies are not strays either: they have exited and only wait for
their parent; no signal does anything to them.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import trio

from .process import clean_stderr_line

__all__ = [
    "COMMAND_CHARS",
    "STRAY_GRACE_S",
    "GroupStrays",
    "Layout",
    "Stray",
    "StraysEnded",
    "end_strays",
    "scan_strays",
]

Layout = Literal["agent", "launcher", "sandbox"]

#: How long a stray gets to exit on SIGTERM before it is SIGKILLed.
STRAY_GRACE_S: Final = 2.0
#: How long a SIGKILLed stray may take to be gone (the kill lands at once; a
#: process in uninterruptible sleep lands later, and is then reported remaining).
_KILL_WAIT_S: Final = 1.0
_POLL_S: Final = 0.02
#: A stray's command as shown: the argv joined, cut at this many characters.
COMMAND_CHARS: Final = 200
_DEAD: Final = ("Z", "X")


@dataclass(frozen=True, slots=True)
class Stray:
    """A live process of the agent's group that is not the agent or its holders."""

    pid: int
    #: The argv joined by spaces (the kernel's name for it when it has none),
    #: control characters removed, at most ``COMMAND_CHARS`` characters.
    command: str
    #: Its start time, in clock ticks after boot: the same pid with another
    #: start time is another process (pids are reused).
    start: int

    def wire(self) -> dict[str, Any]:
        """The receipt's ``{pid, command}``."""
        return {"pid": self.pid, "command": self.command}


@dataclass(frozen=True, slots=True)
class StraysEnded:
    """What ``end`` did: the pids it signalled that are gone now, and the strays
    the group holds after it (a fresh scan: it may name new ones)."""

    killed: tuple[int, ...]
    remaining: tuple[Stray, ...]

    def wire(self) -> dict[str, Any]:
        return {"killed": list(self.killed), "remaining": [s.wire() for s in self.remaining]}


@dataclass(frozen=True, slots=True)
class _Member:
    pid: int
    ppid: int
    start: int
    comm: str


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:  # exited between the open and the read
        return None
    finally:
        os.close(fd)


def _stat(pid: int) -> tuple[str, int, int, int, str] | None:
    """(state, ppid, pgrp, start time, comm) of ``pid``; None if it is gone."""
    data = _read(f"/proc/{pid}/stat")
    if data is None:
        return None
    # "pid (comm) state ppid pgrp ... starttime(22nd)": comm may hold spaces
    # and parentheses, so the fields are counted after its last ")".
    head, _, tail = data.rpartition(b")")
    fields = tail.split()
    try:
        return (fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[19]),
                head.partition(b"(")[2].decode(errors="replace"))
    except (IndexError, ValueError):
        return None


def _nspid(pid: int | str) -> tuple[int, ...] | None:
    """The pid of ``pid`` in each pid namespace from ours inwards (``NSpid``)."""
    data = _read(f"/proc/{pid}/status")
    if data is None:
        return None
    for line in data.splitlines():
        if line.startswith(b"NSpid:"):
            try:
                return tuple(int(v) for v in line.split()[1:])
            except ValueError:
                return None
    return None


def _command(pid: int, comm: str) -> str:
    raw = _read(f"/proc/{pid}/cmdline") or b""
    argv = [a.decode(errors="replace") for a in raw.split(b"\0")]
    while argv and not argv[-1]:
        argv.pop()
    text = clean_stderr_line(" ".join(argv)) if argv else f"[{clean_stderr_line(comm)}]"
    return text if len(text) <= COMMAND_CHARS else text[:COMMAND_CHARS - 1] + "…"


def _members(pgid: int) -> list[_Member]:
    """The live members of group ``pgid``: one pass over /proc."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    out = []
    for entry in entries:
        if not entry.isdigit():
            continue
        pid = int(entry)
        st = _stat(pid)
        if st is None or st[2] != pgid or st[0] in _DEAD:
            continue
        out.append(_Member(pid, st[1], st[3], st[4]))
    return out


def _holders(pgid: int, members: list[_Member], layout: Layout) -> set[int]:
    """The pids of ``members`` that are the agent or hold it (module doc)."""
    held = {pgid}
    if layout == "launcher":
        children = [m for m in members if m.ppid == pgid]
        if children:
            held.add(min(children, key=lambda m: (m.start, m.pid)).pid)
    elif layout == "sandbox":
        ours = _nspid("self")
        level = len(ours) if ours else 1
        for m in members:
            ns = _nspid(m.pid)
            # Unreadable (gone, or a kernel without NSpid): not reported.
            if ns is None or len(ns) <= level or ns[level] in (1, 2):
                held.add(m.pid)
    return held


def scan_strays(pgid: int, *, layout: Layout, leader_reaped: bool = False,
                exclude: frozenset[int] = frozenset()) -> list[Stray]:
    """The strays of group ``pgid`` (module doc), oldest first; also never the
    pids in ``exclude``.  Reads /proc only (blocking: call it on a worker
    thread).

    ``leader_reaped``: the caller has reaped the group's leader, so its pid
    number may have been given to another process.  While a member of our
    group lives the kernel hands out neither that number nor that group id, so
    a live process with the leader's pid means the group is gone and the
    number reused: nothing is reported."""
    members = _members(pgid)
    if leader_reaped and _stat(pgid) is not None:
        return []
    held = _holders(pgid, members, layout) | exclude
    found = [Stray(m.pid, _command(m.pid, m.comm), m.start)
             for m in members if m.pid not in held]
    return sorted(found, key=lambda s: (s.start, s.pid))


def _alive(s: Stray) -> bool:
    """Whether ``s`` is still the same live process (any group)."""
    st = _stat(s.pid)
    return st is not None and st[3] == s.start and st[0] not in _DEAD


def _signal(pgid: int, s: Stray, sig: signal.Signals) -> bool:
    """Send ``sig`` to ``s`` if it is still itself, alive and in group ``pgid``
    (module doc: the re-check); True if sent."""
    if s.pid == pgid or s.pid == os.getpid():
        return False
    st = _stat(s.pid)
    if st is None or st[3] != s.start or st[0] in _DEAD or st[2] != pgid:
        return False
    try:
        os.kill(s.pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def _wait_gone(strays: list[Stray], wait_s: float) -> list[Stray]:
    """Wait up to ``wait_s`` for ``strays`` to be gone; those still alive."""
    left = [s for s in strays if _alive(s)]
    with trio.move_on_after(wait_s):
        while left:
            await trio.sleep(_POLL_S)
            left = [s for s in left if _alive(s)]
    return left


async def end_strays(pgid: int, strays: list[Stray], *,
                     grace_s: float = STRAY_GRACE_S) -> list[int]:
    """SIGTERM each of ``strays`` still in group ``pgid`` (re-checked just
    before: module doc), SIGKILL those still alive after ``grace_s`` (re-checked
    again); return the pids signalled that are gone now.  Never the group's
    leader, never a process that left the group or is another by now."""
    termed = [s for s in strays if _signal(pgid, s, signal.SIGTERM)]
    left = await _wait_gone(termed, grace_s)
    for s in left:
        _signal(pgid, s, signal.SIGKILL)
    left = await _wait_gone(left, _KILL_WAIT_S)
    return [s.pid for s in termed if s not in left]


@dataclass(frozen=True, slots=True)
class GroupStrays:
    """The strays of a group whose leader is our child ``process`` (the local
    executor's agent or leader, agentctl's launcher): what
    ``supervisor.executors.base.LaunchedAgent.strays`` offers."""

    process: trio.Process
    layout: Layout
    grace_s: float = STRAY_GRACE_S

    async def scan(self) -> list[Stray]:
        # Read on the event loop's thread: reading it reaps the leader if it exited.
        reaped = self.process.returncode is not None
        return await trio.to_thread.run_sync(
            lambda: scan_strays(self.process.pid, layout=self.layout, leader_reaped=reaped))

    async def end(self, only: Sequence[Stray] | None = None) -> StraysEnded:
        """End ``only`` these (each re-checked: the same pid and start time, still
        in the group), or every stray of the group, then scan it again."""
        targets = list(only) if only is not None else await self.scan()
        killed = await end_strays(self.process.pid, targets, grace_s=self.grace_s)
        return StraysEnded(tuple(killed), tuple(await self.scan()))
