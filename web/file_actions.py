"""``session.files`` (DESIGN.md §19): the files of a session's cwd the page offers
after an ``@`` in the composer, to mention one (``message.add``'s ``mentions``).

The walk opens each directory relative to its parent's descriptor without
following a link (an agent may have planted one to lead out of the cwd): a link
is neither listed nor entered.  ``.git`` is skipped, and so is every directory
the sandbox hides from agents (the data dir, by identity), so the list shows no
more than the agent itself could see.  The walk is breadth first (the shallow
files first) and bounded, so a huge tree answers quickly.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

import trio

from supervisor.models import Session
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor

from .contract import requests as rq
from .contract.requests import parse

__all__ = ["FILE_ACTIONS", "MAX_FILES", "list_files"]

#: The most paths one answer lists.
MAX_FILES: Final = 50
#: The most directory entries one walk reads (a bound on its time).
MAX_ENTRIES: Final = 20_000
_SKIPPED_NAMES: Final = frozenset({".git"})
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _rank(path: str, query: str) -> tuple[int, int, str]:
    # A query found in the file's own name ranks before one found in its directories.
    name = path.rsplit("/", 1)[-1].lower()
    return (0 if query in name else 1, path.count("/"), path)


def list_files(cwd: str, query: str, hidden: Iterable[tuple[int, int]]) -> list[str]:
    """At most MAX_FILES regular files under ``cwd`` (relative paths) whose path
    holds ``query`` (case-insensitive); directories whose (device, inode) is in
    ``hidden`` are skipped.  Blocking; [] when ``cwd`` cannot be opened."""
    needle = query.strip().lower()
    skip = set(hidden)
    found: list[str] = []
    try:
        root = os.open(cwd, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return []
    pending: deque[tuple[int, str]] = deque([(root, "")])
    read = 0
    try:
        while pending:
            fd, prefix = pending.popleft()
            try:
                with os.scandir(fd) as entries:
                    names = sorted((e.name, e.is_dir(follow_symlinks=False),
                                    e.is_file(follow_symlinks=False)) for e in entries)
            except OSError:
                names = []
            for name, is_dir, is_file in names:
                read += 1
                if read > MAX_ENTRIES:
                    pending.clear()
                    break
                rel = f"{prefix}{name}"
                if is_file and needle in rel.lower():
                    found.append(rel)
                elif is_dir and name not in _SKIPPED_NAMES:
                    try:
                        sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    except OSError:
                        continue  # a link put there meanwhile, or no permission
                    st = os.fstat(sub)
                    if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) in skip:
                        os.close(sub)
                        continue
                    pending.append((sub, f"{rel}/"))
            os.close(fd)
    finally:
        for fd, _ in pending:
            os.close(fd)
    found.sort(key=lambda p: _rank(p, needle))
    return found[:MAX_FILES]


def session_cwd(sup: Supervisor, session: Session) -> str:
    """Where the session's agent works (as its execution chose it), else where it will."""
    ex = sup.lifecycle.agents.running(session.id)
    if ex is not None:
        return str(ex.cwd)
    profile = sup.config.profiles.get(session.agent)
    return (session.cwd or (profile.cwd if profile else None)
            or str(sup.config.session_work_dir(session.workspace_id, session.id)))


async def session_files(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.SessionFiles, p, sup.config.limits)
    session = await sup.orchestrator.session(caller, req.session_id)  # the caller's, else 404
    cwd = session_cwd(sup, session)
    hidden = [i for i in (h.identity or _identity(h.path) for h in sup.config.hidden_dirs()) if i]
    files = await trio.to_thread.run_sync(list_files, cwd, req.query or "", hidden)
    return {"files": files}


FILE_ACTIONS: dict[str, Callable[[Supervisor, Caller, dict[str, Any]],
                                 Awaitable[dict[str, Any]]]] = {
    "session.files": session_files,
}
