"""What exists in a work tree an agent writes, found without trusting it (blocking; run it
in a worker thread).

The snapshot's content is staged by git, which honours the work tree's ignore rules; those
rules are the agent's to write (``.gitignore`` at any level, the project's
``info/exclude``), so what git stages cannot say what exists.  This walk does, by itself:
every file, symlink and other non-directory entry, however it is named (non-UTF-8
bytes, newlines) and however deep.  Ignore rules play no part in it.

It is iterative (an explicit stack of directories, each opened from its parent's
descriptor with ``O_NOFOLLOW``, so a symlink is never followed and no path is ever longer
than one name), so a directory nested thousands of levels deep costs no recursion and no
``ENAMETOOLONG``.  What git cannot store (a path near ``PATH_MAX``, a name git refuses:
``.GIT`` in any case but the exact ``.git`` git skips by itself) is reported as a
*unit*: the directory or file where it starts, handled whole.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from typing import Final

__all__ = ["MAX_STORABLE_PATH", "Presence", "walk"]

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
#: Longest relative path (bytes) git is asked to store: git reaches a work tree's files
#: by path, and a path of ``PATH_MAX`` (4096) or more is out of its reach.  A directory
#: whose path is this long is a unit (its name leaves room for a file name below it).
MAX_STORABLE_PATH: Final = 4096 - 256 - 2
#: At most this many units are listed (each is one directory, however much it holds).
MAX_UNITS: Final = 1000
#: Descriptors held open along the current chain of directories (the rest are reopened
#: when the walk comes back up to them): a deep tree cannot exhaust the descriptors.
_OPEN_FRAMES: Final = 64


@dataclass(slots=True)
class Presence:
    """Relative paths (``surrogateescape``-decoded) found by ``walk``."""

    #: Every non-directory entry git can store, ignored or not.
    files: list[str] = field(default_factory=list)
    #: Directories holding a ``.git`` entry: nested repositories, not descended into.
    repositories: list[str] = field(default_factory=list)
    #: Entries git cannot store (too deep, a name it refuses), each whole.
    units: list[str] = field(default_factory=list)
    #: The walk stopped early (its deadline, or ``MAX_UNITS``): it is not complete.
    partial: bool = False


def _refused(name: bytes) -> bool:
    # Git refuses ".git" as a path component in any case; the exact ".git" is the
    # user's repository (or a nested one), never part of a checkpoint.
    return name.lower() == b".git" and name != b".git"


@dataclass(slots=True)
class _Frame:
    """One directory of the current chain: its descriptor (None when closed to bound
    the open descriptors; reopened from its parent when needed), its relative path,
    and the names of its subdirectories still to visit."""

    fd: int | None
    rel: bytes
    todo: list[bytes]


def walk(root: str, *, skip: frozenset[bytes] = frozenset(),
         deadline: float | None = None) -> Presence:
    """Everything under ``root``.  ``skip``: relative paths (bytes) of directories left
    out (the data dir, the shadow repository).  ``deadline``: ``time.monotonic()``
    after which the walk stops (``partial``)."""
    found = Presence()
    root_fd = os.open(root, _DIR_FLAGS)
    frames = [_Frame(root_fd, b"", [])]
    try:
        frames[0].todo = _scan(root_fd, b"", found, skip)
        while frames:
            top = frames[-1]
            if not top.todo:
                frames.pop()
                if top.fd is not None:
                    os.close(top.fd)
                continue
            if deadline is not None and time.monotonic() > deadline:
                found.partial = True
                break
            name = top.todo.pop()
            parent = _reopen(frames)
            if parent is None:
                top.todo.clear()  # moved or replaced meanwhile: not walked
                continue
            path = top.rel + b"/" + name if top.rel else name
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=parent)
            except OSError:
                continue  # replaced by a symlink meanwhile, or unreadable
            frames.append(_Frame(child, path, []))
            if len(frames) > _OPEN_FRAMES:
                old = frames[-_OPEN_FRAMES - 1]
                if old.fd is not None and old is not frames[0]:
                    os.close(old.fd)
                    old.fd = None
            frames[-1].todo = _scan(child, path, found, skip)
    finally:
        for frame in frames:
            if frame.fd is not None:
                os.close(frame.fd)
    found.files.sort()
    found.units.sort()
    return found


def _reopen(frames: list[_Frame]) -> int | None:
    """The descriptor of the last frame, reopening closed ones from the nearest open
    ancestor, one component at a time (``O_NOFOLLOW``); None if that fails."""
    last = len(frames) - 1
    if frames[last].fd is not None:
        return frames[last].fd
    start = max(i for i, f in enumerate(frames) if f.fd is not None)
    for i in range(start + 1, last + 1):
        fd = frames[i - 1].fd
        assert fd is not None
        try:
            frames[i].fd = os.open(frames[i].rel.rpartition(b"/")[2], _DIR_FLAGS, dir_fd=fd)
        except OSError:
            return None
    return frames[last].fd


def _scan(fd: int, rel: bytes, found: Presence, skip: frozenset[bytes]) -> list[bytes]:
    """Record the entries of one directory; returns its subdirectories to visit."""
    try:
        names = [os.fsencode(n) for n in os.listdir(fd)]
    except OSError:
        return []  # unreadable: git cannot read it either
    if rel and b".git" in names:
        found.repositories.append(_decode(rel))
        return []
    subdirs: list[bytes] = []
    for name in names:
        path = rel + b"/" + name if rel else name
        if name == b".git" or path in skip:
            continue
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue  # gone meanwhile
        if len(path) >= MAX_STORABLE_PATH or _refused(name):
            if len(found.units) >= MAX_UNITS:
                found.partial = True
            else:
                found.units.append(_decode(path))
        elif stat.S_ISDIR(st.st_mode):
            subdirs.append(name)
        else:
            found.files.append(_decode(path))
    subdirs.reverse()  # popped from the end: visited in directory order
    return subdirs


def _decode(path: bytes) -> str:
    return path.decode("utf-8", "surrogateescape")
