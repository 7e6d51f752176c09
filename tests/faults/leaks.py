"""Counting what a test could leak: file descriptors, child processes, agent
process groups, Trio tasks.  Shared by tests/faults, tests/fuzz, tests/security
and the soak (bench/soak.py imports nothing from tests, it has its own copy of
the few lines it needs).

Everything reads /proc directly: the machine is shared with other test runs,
so "an agent process" is always narrowed to ours, by its working directory
(the agent's cwd is ``DATA_DIR/work``, a fresh temporary directory per test)
or by a process group id we recorded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import trio
import trio.lowlevel

__all__ = [
    "Baseline",
    "child_pids",
    "fd_count",
    "group_members",
    "processes_in",
    "rss_bytes",
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


def task_names() -> list[str]:
    """Every live Trio task of this run, by walking the nursery tree from the root."""
    names: list[str] = []
    root = trio.lowlevel.current_root_task()
    stack = [root] if root is not None else []
    while stack:
        task = stack.pop()
        names.append(task.name)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return names


@dataclass
class Baseline:
    """Counts taken before a server starts; ``settled`` waits until they are back."""

    fds: int = field(default_factory=fd_count)
    children: set[int] = field(default_factory=child_pids)
    tasks: list[str] = field(default_factory=task_names)

    def leaks(self) -> dict[str, object]:
        now_tasks = task_names()
        extra_tasks = list(now_tasks)
        for name in self.tasks:
            if name in extra_tasks:
                extra_tasks.remove(name)
        out: dict[str, object] = {}
        fds = fd_count()
        if fds > self.fds:
            out["fds"] = (self.fds, fds, _fd_targets())
        children = child_pids() - self.children
        if children:
            out["children"] = sorted(children)
        if len(now_tasks) > len(self.tasks):
            out["tasks"] = extra_tasks
        return out

    async def settled(self, *, timeout: float = 10.0) -> dict[str, object]:
        """Poll until nothing is left over (returns {}), or return what is after ``timeout``."""
        leaks = self.leaks()
        with trio.move_on_after(timeout):
            while leaks:
                await trio.sleep(0.05)
                leaks = self.leaks()
        return leaks


def _fd_targets() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(f"{fd}->{os.readlink(f'/proc/self/fd/{fd}')}")
        except OSError:
            pass
    return out
