"""A fence of its own for git run on a repository an agent can write (DESIGN.md §12, §17).

An agent writes its project, ``.git`` included: config (with conditional
includes that only apply once HEAD is a new branch, or in a linked worktree's
git dir), hooks, attributes, symlinks inside ``.git``.  Turnvisor's ``-c``
overrides and driver neutralisation (``supervisor.workspace.checkpoints.gitrun``) name
every program they know of, but ``git worktree add`` reads config the
overrides never listed (``[includeIf "onbranch:turnvisor/**"]`` defines a
smudge filter for the new branch only), and git follows symlinks planted in
``.git`` when it writes.  So the class is closed here, not the case: every git
command on such a repository runs in a bubblewrap sandbox where whatever git
is made to run or write can reach nothing but that repository:

- the file system read-only (``--ro-bind / /``), a /dev and /proc of its own
  (the kernel's knobs read-only again), a private empty /tmp, /var/tmp and
  /run (no host unix socket by path: Docker's, D-Bus's, an ssh agent's);
- every namespace new (``--unshare-all``): no network (nor the host's abstract
  unix sockets), its own pid, ipc, uts and user namespace; every capability
  dropped, the agents' seccomp filter, killed with its parent;
- each hidden directory (Turnvisor's data dir: token, database, config) under
  an empty tmpfs, its identity checked first (``HiddenDir.check``);
- ``visible``: directories bound read-only (the repository's work tree, which
  may lie under /tmp; a hidden directory inside one stays hidden);
  ``writable``: directories bound read-write, none holding a hidden one (the
  repository's git dir; for ``worktree add``, the new worktree's directory,
  created empty beforehand).  Both are opened here from ``/`` one component at
  a time without following a symbolic link (``O_NOFOLLOW``) and bound by
  descriptor (``--bind-fd``): the inode reached, not a name an agent can
  re-point between this check and bwrap's mount.  A symlink anywhere on such a
  path refuses the command (callers pass real paths).

Git's own home is the private /tmp.  bwrap's options and the seccomp filter
travel in memfds (``--args``, ``--seccomp``).  The process-group leader is a shell that ignores
SIGTERM and waits for bwrap, as for agents (``--die-with-parent`` fires when
the thread that spawned bwrap exits, and Trio spawns from worker threads that
retire); git gets SIGTERM's default action back (``env --default-signal``), so
a SIGTERM to the group stops git, which removes its lock files.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from .sandbox import HiddenDir, Launch, bwrap_works, host_filter, memfd_with
from .tools import current as current_tools

__all__ = [
    "FENCE_MISSING_WARNING",
    "FENCE_SCRATCH",
    "FenceError",
    "GitFence",
    "fence_for",
    "fence_warning",
    "open_dir_nofollow",
]

log = logging.getLogger(__name__)

FENCE_MISSING_WARNING: Final = (
    "bubblewrap (bwrap) cannot run on this machine: git on a project an agent can write "
    "(worktree add/remove, branch checks) runs WITHOUT its fence, guarded only by config "
    "overrides, so a program an agent names in a way they miss would run as Turnvisor's user "
    "(apt-get install bubblewrap)")
#: Empty and private in the fence: scratch places and /run (the host's unix sockets).
FENCE_SCRATCH: Final = ("/tmp", "/var/tmp", "/run")
#: The kernel's knobs, bound read-only over the fence's own /proc.
_PROC_READONLY: Final = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus")
#: Git's home inside the fence: its private /tmp.
FENCE_HOME: Final = "/tmp"
#: The group leader: SIGTERM ignored, bwrap run as a child, its status passed on.
_LEADER: Final = 'trap "" TERM; "$@"; status=$?; exit "$status"'
_DIR: Final = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class FenceError(OSError):
    """A fence that cannot be built as asked; the message says why."""


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


def open_dir_nofollow(path: str) -> int:
    """An ``O_PATH`` descriptor of the directory ``path`` (absolute, normalized),
    reached from ``/`` one component at a time, following no symbolic link;
    ``FenceError`` naming the component that is a link, missing or no directory."""
    if not os.path.isabs(path) or os.path.normpath(path) != path.rstrip("/") or \
            (path != "/" and path.endswith("/")):
        raise FenceError(f"{path!r}: not an absolute, normalized path")
    fd = os.open("/", _DIR)
    walked = ""
    try:
        for part in path.strip("/").split("/") if path != "/" else []:
            walked += "/" + part
            try:
                nxt = os.open(part, _DIR, dir_fd=fd)
            except OSError as exc:
                try:
                    st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    raise FenceError(f"{walked}: {exc.strerror or exc}") from None
                what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
                raise FenceError(f"{walked} is {what}: git's fence binds directories only "
                                 "as they are, never through a link") from None
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass(frozen=True, slots=True)
class GitFence:
    """How git on an agent-writable repository is launched here: ``bwrap`` (the
    trusted path resolved at start) and the directories to hide, by identity."""

    bwrap: str
    hide: tuple[HiddenDir, ...] = ()

    def launch(self, command: Sequence[str], *, cwd: str, visible: Iterable[str] = (),
               writable: Iterable[str] = ()) -> Launch:
        """``command`` (git's absolute path first) in the fence, run in ``cwd``.
        Raises ``SandboxError`` (a hidden directory moved: see ``HiddenDir``),
        ``FenceError`` (a path that cannot be bound as it is) or ``ToolsError``."""
        for hidden_dir in self.hide:
            hidden_dir.check()
        hidden = [h.path for h in self.hide]
        binds = [(p, False) for p in visible] + [(p, True) for p in writable]
        for path, rw in binds:
            # A read-only view may hold a hidden directory (its tmpfs comes after);
            # a writable one may not: what runs inside could move what is hidden.
            if rw and any(_inside(h, path) for h in hidden):
                raise FenceError(f"{path} holds {', '.join(hidden)}, which git's fence hides: "
                                 "it cannot be made writable")
        tools = current_tools()
        sh, env = tools.sh, tools.env  # (``ToolsError`` here, before a descriptor is open)
        fds: list[int] = []
        try:
            opened: list[tuple[str, bool, int]] = []
            for path, rw in binds:
                fds.append(open_dir_nofollow(path))
                opened.append((path, rw, fds[-1]))
            options = _options(opened, hidden, cwd)
            seccomp = host_filter()
            if seccomp is not None:
                fds.append(memfd_with("turnvisor-git-seccomp", seccomp))
                options += ["--seccomp", str(fds[-1])]
            # bwrap's options in a descriptor (``--args``), as for agents: no command
            # line shows what is hidden or bound.
            fds.append(memfd_with("turnvisor-git-bwrap-args",
                              b"".join(os.fsencode(o) + b"\0" for o in options)))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        argv = [sh, "-c", _LEADER, "sh", self.bwrap, "--args", str(fds[-1]),
                "--", env, "--default-signal=TERM", *command]
        # The descriptors reach bwrap through the leader, which inherits them.
        return Launch(argv, tuple(fds))


def _options(opened: Sequence[tuple[str, bool, int]], hidden: Sequence[str],
             cwd: str) -> list[str]:
    """bwrap's options (see the module docstring); ``opened``: (path, writable, fd)."""
    options = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for knob in _PROC_READONLY:
        options += ["--ro-bind-try", knob, knob]
    for scratch in FENCE_SCRATCH:
        if os.path.isdir(scratch):
            options += ["--tmpfs", scratch]
    # Parents before children, read-only before read-write at one depth (the git
    # dir inside the work tree); a bind inside a hidden directory after its tmpfs
    # (a worktree under the data dir), every other one before it.
    order = sorted(opened, key=lambda o: (_depth(o[0]), o[1]))
    inside = [any(_inside(path, h) for h in hidden) for path, _rw, _fd in order]
    for (path, rw, fd), late in zip(order, inside, strict=True):
        if not late:
            options += ["--bind-fd" if rw else "--ro-bind-fd", str(fd), path]
    for h in hidden:
        if os.path.isdir(h):
            options += ["--tmpfs", h]
    for (path, rw, fd), late in zip(order, inside, strict=True):
        if late:
            options += ["--bind-fd" if rw else "--ro-bind-fd", str(fd), path]
    return [*options, "--chdir", cwd, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]


def fence_for(hide: Iterable[HiddenDir]) -> GitFence | None:
    """The fence for git here, or None where bwrap cannot run (git then runs with
    its overrides only; ``fence_warning`` says so at start).  Runs the cached
    probe on first use: call it off the Trio thread."""
    bwrap = current_tools().get("bwrap")
    if bwrap is None or not bwrap_works():
        return None
    return GitFence(bwrap, tuple(hide))


def fence_warning() -> str | None:
    """``FENCE_MISSING_WARNING`` where git's fence cannot be built (probe cached)."""
    return None if bwrap_works() and current_tools().get("bwrap") else FENCE_MISSING_WARNING
