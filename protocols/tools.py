"""The programs the backend runs itself, resolved once, from places no agent can write.

An agent writes its project, its home and its tmp.  ``PATH`` commonly starts
with ``~/.cargo/bin`` or ``~/.local/bin``: a backend that looked ``git`` up on
``PATH`` at each use ran whatever ``git`` the agent had planted there, as the
backend's user, outside every namespace.  So each program the backend runs
(``git``, ``bwrap``, ``env``, ``sh``, the network helper, ``ssh``) is resolved once,
at start, to an absolute real path, searching only directories that are

- owned, all the way up from ``/``, by root or by the backend's own user
  (the latter only while every agent is sandboxed: an unsandboxed agent can
  write whatever the user can), with no component writable by others or by a
  group the backend belongs to;
- not inside a tree an agent can write (``untrusted``: the agent homes and
  work dirs under the data dir, the project roots, every profile's writable
  paths, the scratch directories).

A ``PATH`` entry that fails is skipped with a warning; ``[server] tools_path``
replaces ``PATH`` as the list searched (the same checks apply).  What was
resolved is installed for the process (``install``) and never looked up again.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "DEFAULT_SEARCH",
    "SCRATCH_DIRS",
    "TOOL_NAMES",
    "Tools",
    "ToolsError",
    "current",
    "install",
    "resolve",
    "untrusted_reason",
]

log = logging.getLogger(__name__)

#: What the backend runs itself.  ``pasta`` / ``slirp4netns``: the agents' network;
#: ``ssh``: the ssh executor's and remote engines' client.
TOOL_NAMES: Final = ("git", "bwrap", "env", "sh", "pasta", "slirp4netns", "ssh")
#: Searched when neither ``PATH`` nor ``tools_path`` yields a program.
DEFAULT_SEARCH: Final = ("/usr/local/bin", "/usr/bin", "/bin")
#: World-writable scratch places: never trusted, whoever owns them.
SCRATCH_DIRS: Final = ("/tmp", "/var/tmp", "/dev/shm", "/run/user")


class ToolsError(RuntimeError):
    """A program the backend needs was not found in any trusted directory."""


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def untrusted_reason(directory: str, *, untrusted: Iterable[str] = (),
                     owner_ok: bool = True) -> str | None:
    """Why ``directory`` cannot hold a program the backend runs, or None if it can.

    ``untrusted``: trees an agent can write (real paths).  ``owner_ok``: whether
    directories owned by the backend's user count (False while any agent runs
    unsandboxed)."""
    if not os.path.isabs(directory):
        return "not an absolute path"
    real = os.path.realpath(directory)
    for tree in (*SCRATCH_DIRS, *untrusted):
        if _inside(real, os.path.realpath(tree)):
            return f"inside {tree}, which agents can write"
    me = os.getuid()
    groups = set(os.getgroups()) | {os.getgid()}
    parts = real.strip("/").split("/") if real != "/" else []
    walked = "/"
    for part in ["", *parts]:
        walked = os.path.join(walked, part) if part else "/"
        try:
            st = os.lstat(walked)
        except OSError as exc:
            return f"cannot inspect {walked}: {exc.strerror}"
        if not stat.S_ISDIR(st.st_mode):
            return f"{walked} is not a directory"
        if st.st_uid != 0 and not (owner_ok and st.st_uid == me):
            return f"{walked} is owned by uid {st.st_uid}"
        if st.st_mode & stat.S_IWOTH:
            return f"{walked} is writable by every user"
        if st.st_mode & stat.S_IWGRP and st.st_gid in groups:
            return f"{walked} is writable by group {st.st_gid}, one of the backend's"
    return None


@dataclass(frozen=True, slots=True)
class Tools:
    """Program name → its absolute real path (None: not found in a trusted place)."""

    paths: Mapping[str, str | None] = field(default_factory=dict)
    #: The search directories skipped, each with its reason (warned at start).
    skipped: tuple[tuple[str, str], ...] = ()

    def get(self, name: str) -> str | None:
        return self.paths.get(name)

    def need(self, name: str) -> str:
        """The path of ``name``; ``ToolsError`` with what to do if there is none."""
        path = self.paths.get(name)
        if path is None:
            raise ToolsError(f"{name} was not found in a directory no agent can write "
                             "(install it system-wide, or name its directory in "
                             "[server] tools_path)")
        return path

    @property
    def git(self) -> str:
        return self.need("git")

    @property
    def env(self) -> str:
        return self.need("env")

    @property
    def sh(self) -> str:
        return self.need("sh")


def resolve(search: str | None = None, *, untrusted: Iterable[str] = (),
            owner_ok: bool = True, names: Iterable[str] = TOOL_NAMES) -> Tools:
    """Each of ``names`` from the first trusted directory of ``search``
    (``os.pathsep``-separated; default ``PATH``) that has it as an executable
    regular file, then from ``DEFAULT_SEARCH``."""
    trees = [os.path.realpath(t) for t in untrusted]
    text = os.environ.get("PATH", "") if search is None else search
    dirs: list[str] = []
    skipped: list[tuple[str, str]] = []
    for entry in [*text.split(os.pathsep), *DEFAULT_SEARCH]:
        if not entry or entry in dirs or any(entry == s for s, _ in skipped):
            continue
        reason = untrusted_reason(entry, untrusted=trees, owner_ok=owner_ok)
        if reason is None:
            dirs.append(entry)
        elif os.path.isdir(entry):
            skipped.append((entry, reason))
    paths: dict[str, str | None] = {}
    for name in names:
        paths[name] = None
        for d in dirs:
            # Named as found (``pasta`` is a link to ``passt`` that acts by its
            # name), in the directory's real path; the link's target must
            # itself lie in a trusted directory.
            candidate = os.path.join(os.path.realpath(d), name)
            target = os.path.realpath(candidate)
            try:
                st = os.stat(target)
            except OSError:
                continue
            if (stat.S_ISREG(st.st_mode) and os.access(target, os.X_OK)
                    and untrusted_reason(os.path.dirname(target), untrusted=trees,
                                         owner_ok=owner_ok) is None):
                paths[name] = candidate
                break
    return Tools(paths, tuple(skipped))


_installed: list[Tools] = []


def install(tools: Tools) -> Tools:
    """Make ``tools`` this process's programs (at start) and warn of each
    search directory skipped."""
    for entry, reason in tools.skipped:
        log.warning("not running programs from %s (%s): a program found there could be "
                    "one an agent planted", entry, reason)
    _installed[:] = [tools]
    return tools


def current() -> Tools:
    """This process's programs: those installed at start, else resolved now from
    ``PATH`` with the scratch directories untrusted, once."""
    if not _installed:
        _installed.append(resolve())
    return _installed[0]
