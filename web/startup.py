"""Starting ``turnvisor serve``: one server per data dir, and every start-up
failure said in one line with its fix (exit status 2, as configuration errors).

The lock is ``fcntl.flock`` on ``DATA_DIR/serve.lock``, taken before anything
else reads or writes the data dir (no database opened, no start-up sweep of
the previous server's agents: a second server would otherwise end the first
one's running turns and kill its agents).  The kernel releases it when the
process ends, however it ends, so a SIGKILLed server leaves no stale lock.
The file holds the holder's pid, for the refusal's message.  Its descriptor
is close-on-exec: agents (and their tools) do not inherit the lock.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from supervisor.errors import StartError

__all__ = ["LOCK_NAME", "check_port", "hold_data_dir", "start_failure"]

LOCK_NAME = "serve.lock"


@contextmanager
def hold_data_dir(data_dir: Path) -> Iterator[None]:
    """Hold the data dir for this process's server (``StartError`` if another
    holds it, or it cannot be made or written)."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StartError(
            f"data dir {data_dir} is not writable ({exc.strerror or exc}): fix its "
            "permissions or pick another --data-dir") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            who = f"pid {holder}" if holder.isdigit() else "another process"
            raise StartError(f"data dir {data_dir} in use by {who}: stop that server first, "
                             "or pick another --data-dir") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:
            raise StartError(
                f"data dir {data_dir} is not writable ({exc.strerror or exc}): free space "
                "or fix its permissions, or pick another --data-dir") from None
        yield
    finally:
        os.close(fd)  # (the lock goes with it)


def check_port(port: int) -> None:
    if not 0 <= port <= 65535:
        raise StartError(f"--port {port} is out of range: give 1 to 65535, or 0 for a free port")


def start_failure(exc: BaseException, *, host: str, port: int) -> str | None:
    """The one line for a failure before the server listened, if it is one of
    the known ones (None: a bug, left to its traceback)."""
    for leaf in _leaves(exc):
        if isinstance(leaf, StartError):
            return str(leaf)
        if isinstance(leaf, socket.gaierror):
            return (f"--host {host} cannot be resolved ({leaf.strerror}): give an address "
                    "or name of this machine, e.g. 127.0.0.1")
        if isinstance(leaf, OSError) and leaf.errno == errno.EADDRINUSE:
            return (f"port {port} on {host} is in use: stop what listens there, or pick "
                    "another --port (0 picks a free one)")
        if isinstance(leaf, OSError) and leaf.errno == errno.EADDRNOTAVAIL:
            return (f"--host {host} is not an address of this machine: give one of its "
                    "addresses, e.g. 127.0.0.1")
        if isinstance(leaf, OSError) and leaf.errno == errno.EACCES:
            return (f"port {port} on {host} needs privileges this user lacks: pick a port "
                    "above 1023")
        if isinstance(leaf, sqlite3.Error):
            return (f"the database cannot be used ({leaf}): if it is corrupt, move "
                    "turnvisor.db away or restore a backup")
    return None


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) groups, first to last."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
