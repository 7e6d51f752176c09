"""The one leak counter: file descriptors, RSS, child processes, agent process
groups, processes in a directory, Trio tasks; a ``Snapshot`` of them and the
comparison of two.  Used by tests/faults (and tests/fuzz, tests/security
through it) and by the soak (bench/soak.py).

Everything reads /proc directly: the machine is shared with other test runs,
so "an agent process" is always narrowed to ours, by its working directory
(the agent's cwd is ``DATA_DIR/work``, a fresh temporary directory per run)
or by a process group id we recorded.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import trio
import trio.lowlevel

__all__ = [
    "Snapshot",
    "child_pids",
    "fd_count",
    "group_members",
    "kill_group",
    "pgid_alive",
    "processes_in",
    "processes_running",
    "rss_bytes",
    "stop_process",
    "task_names",
]


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_bytes(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _stat(pid: str) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) of a process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces.
    rest = data[data.rindex(")") + 2:].split()
    return rest[0], int(rest[1]), int(rest[2])


def _pids() -> Iterable[str]:
    return (p for p in os.listdir("/proc") if p.isdigit())


def child_pids(parent: int | None = None) -> set[int]:
    """Direct children of ``parent`` (this process by default), zombies included."""
    parent = os.getpid() if parent is None else parent
    out = set()
    for pid in _pids():
        st = _stat(pid)
        if st is not None and st[1] == parent:
            out.add(int(pid))
    return out


def group_members(pgids: Iterable[int]) -> dict[int, list[int]]:
    """Live (non-zombie) processes of each of ``pgids`` that still has any."""
    wanted = set(pgids)
    found: dict[int, list[int]] = {}
    if not wanted:
        return found
    for pid in _pids():
        st = _stat(pid)
        if st is not None and st[2] in wanted and st[0] != "Z":
            found.setdefault(st[2], []).append(int(pid))
    return found


def processes_in(directory: Path) -> list[int]:
    """Live processes whose working directory is ``directory`` or below it
    (agents run in ``DATA_DIR/work``)."""
    root = str(directory.resolve())
    out = []
    for pid in _pids():
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + "/"):
            st = _stat(pid)
            if st is not None and st[0] != "Z":
                out.append(int(pid))
    return out


def processes_running(command_line: bytes, *, exact: bool = False) -> set[int]:
    """Live (not zombie) processes whose command line (NUL-separated, as in
    /proc) holds ``command_line`` (or is it, ``exact``): a test's marked tool."""
    out = set()
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if cmd == command_line if exact else command_line in cmd:
            st = _stat(pid)
            if st is not None and st[0] != "Z":
                out.add(int(pid))
    return out


def pgid_alive(pgid: int) -> bool:
    """Whether group ``pgid`` has a live (non-zombie) process.  Zombies do not
    count: a sandboxed agent's namespace init can outlive bwrap by an instant
    and is then reaped by the system's init, not by the backend."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def kill_group(pgid: int) -> None:
    """SIGKILL a process group that may be gone already (the cleanup backstop)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 10) -> None:
    """Terminate a child and reap it; killed if it is still there after ``grace_s``."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def task_names() -> Counter[str]:
    """Every live Trio task of this run, by name, walking the nursery tree from the root."""
    names: Counter[str] = Counter()
    root = trio.lowlevel.current_root_task()
    stack = [root] if root is not None else []
    while stack:
        task = stack.pop()
        names[task.name] += 1
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return names


def _fd_targets() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(f"{fd}->{os.readlink(f'/proc/self/fd/{fd}')}")
        except OSError:
            pass
    return out


@dataclass(frozen=True)
class Snapshot:
    """What this process holds at one moment (take it inside ``trio.run``)."""

    fds: int
    children: frozenset[int]
    tasks: Counter[str]
    rss: int

    @classmethod
    def take(cls) -> Snapshot:
        return cls(fd_count(), frozenset(child_pids()), task_names(), rss_bytes())

    def leaks(self, now: Snapshot | None = None, *,
              respawned: bool = False) -> dict[str, object]:
        """What ``now`` (a fresh snapshot by default) holds beyond this one.

        ``respawned``: children may have been replaced meanwhile (agents restarted
        while a server runs), so only their number counts; otherwise any child
        that was not there before is a leak."""
        now = Snapshot.take() if now is None else now
        out: dict[str, object] = {}
        if sum(now.tasks.values()) > sum(self.tasks.values()):
            out["tasks"] = dict(now.tasks - self.tasks)
        if now.fds > self.fds:
            out["fds"] = (self.fds, now.fds, _fd_targets())
        if respawned:
            if len(now.children) > len(self.children):
                out["children"] = (len(self.children), len(now.children))
        elif now.children - self.children:
            out["children"] = sorted(now.children - self.children)
        return out

    async def settled(self, *, timeout: float = 10.0) -> dict[str, object]:
        """Polls until nothing is held beyond this snapshot (returns {}), or returns
        what still is after ``timeout``."""
        leaks = self.leaks()
        with trio.move_on_after(timeout):
            while leaks:
                await trio.sleep(0.05)
                leaks = self.leaks()
        return leaks
