"""Paths the sandbox makes writable, opened by identity, never by a name an agent re-points.

An agent that can write a directory can replace any name in it: rename its
project's parent and leave a symlink to ``/etc`` at the old path, or create a
home its profile names (``CODEX_HOME``) as a symlink before the backend does.
A sandbox that binds such a *name* binds whatever it points at by then.  So
every writable path is opened here, one component at a time from ``/``,
without following a symbolic link that lies in a tree an agent can write
(``untrusted``), and the open descriptor (``O_PATH``) is what bwrap binds
(``--bind-fd``): the inode reached, not the name.  A symlink outside those
trees (``/bin`` → ``usr/bin``, a person's own ``~/work`` → ``/data/work``) is
the person's or the system's and is followed.  Missing directories are made
on the way (``create``), each opened again without following links, so a link
raced in between is refused, not followed.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["OpenedPath", "PathRefused", "open_by_identity"]

#: Symbolic links followed in one path at most (the kernel's own bound is 40).
MAX_LINKS: Final = 40
_DIR: Final = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_ANY: Final = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


class PathRefused(OSError):
    """A writable path that cannot be bound by identity; the message says why."""


@dataclass(frozen=True, slots=True)
class OpenedPath:
    """``fd`` (``O_PATH``) names the object reached from ``path``; ``real`` is
    where it was found, ``identity`` its (device, inode)."""

    path: str
    real: str
    fd: int
    identity: tuple[int, int]
    is_dir: bool


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _check_private(path: str, here: str, st: os.stat_result) -> None:
    """``here`` (opened) is a directory of this user's, closed to group and others:
    one made by another user (planted first in a shared tree) or left open to
    them could hold their sockets or links under our names."""
    mine = os.geteuid()
    if not stat.S_ISDIR(st.st_mode):
        raise PathRefused(f"{path}: {here} is not a directory; refusing it")
    if st.st_uid != mine:
        raise PathRefused(f"{path}: {here} belongs to uid {st.st_uid}, not to this user "
                          f"(uid {mine}); refusing it")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise PathRefused(f"{path}: {here} is open to other users (mode "
                          f"{stat.S_IMODE(st.st_mode):04o}, wanted 0700); refusing it")


def open_by_identity(path: str, *, untrusted: Iterable[str] = (), create: bool = False,
                     mode: int = 0o700, private_below: str | None = None) -> OpenedPath:
    """Open ``path`` (absolute) as described in the module docstring.

    ``untrusted``: trees an agent can write (real paths): a symbolic link found
    in one of them refuses the path.  ``create``: make missing directories.
    ``private_below`` (a real path): every component of ``path`` below it must
    be a directory of this user's that no one else may enter (the backend's
    sockets and run dirs, possibly under the shared temporary directory); a
    symbolic link there is refused like one in ``untrusted``.
    Raises ``PathRefused`` (with the reason) or ``FileNotFoundError`` when the
    path does not exist and ``create`` is false."""
    if not os.path.isabs(path):
        raise PathRefused(f"{path}: not an absolute path")
    trees = [os.path.normpath(t) for t in untrusted]
    private = os.path.normpath(private_below) if private_below is not None else None
    if private is not None:
        trees.append(private)
    pending = [p for p in os.path.normpath(path).split("/") if p]
    current = "/"
    fd = os.open("/", _DIR)
    links = 0
    try:
        while pending:
            part = pending.pop(0)
            if part == "..":
                # Only from a link's target: go up by name from the trusted walk so far.
                parent = os.path.dirname(current)
                os.close(fd)
                fd = -1
                return_to = [p for p in parent.split("/") if p] + pending
                pending = return_to
                current = "/"
                fd = os.open("/", _DIR)
                continue
            try:
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, mode, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile: opened below like any other
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            here = os.path.join(current, part)
            if stat.S_ISLNK(st.st_mode):
                if any(_inside(current, t) for t in trees):
                    raise PathRefused(
                        f"{path}: {here} is a symbolic link inside {current}, which an agent "
                        "can write; refusing to follow it (the agent may have re-pointed it)")
                links += 1
                if links > MAX_LINKS:
                    raise PathRefused(f"{path}: too many symbolic links")
                target = os.readlink(part, dir_fd=fd)
                joined = target if target.startswith("/") else os.path.join(current, target)
                pending = [p for p in joined.split("/") if p] + pending
                os.close(fd)
                fd = os.open("/", _DIR)
                current = "/"
                continue
            flags = _DIR if pending or stat.S_ISDIR(st.st_mode) else _ANY
            try:
                nfd = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                raise PathRefused(f"{path}: {here} changed while it was opened "
                                  f"({exc.strerror}); refusing it") from None
            os.close(fd)
            fd = nfd
            above, current = current, here
            opened = os.fstat(fd)
            if stat.S_ISLNK(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
                    st.st_dev, st.st_ino):
                raise PathRefused(f"{path}: {here} was replaced while it was opened; "
                                  "refusing it")
            if private is not None and _inside(above, private):
                _check_private(path, here, opened)
        final = os.fstat(fd)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise
    return OpenedPath(path, current, fd, (final.st_dev, final.st_ino),
                      stat.S_ISDIR(final.st_mode))
