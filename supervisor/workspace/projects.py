"""Projects (DESIGN.md §12): the directories a task may work in, limited to the
configured roots, and what ``project.list`` and ``project.browse`` show of them.

Every path a client sends is resolved with symlinks followed before it is
compared with the roots, so a link inside a root that points outside it is
outside (``InvalidRequest``: ``VALIDATION_ERROR``), as is ``..``.  A project
never holds the data dir nor lies in it (DESIGN.md §17), compared by real path
and by identity (``supervisor.data_dir_fence``): the roots are clear of it, but
a bind mount or a link inside a root may still lead there.  Nothing here runs
git: whether a directory is a repository is read from the file system.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

import trio

from ..config import Config, ConfigError
from ..data_dir_fence import DataDirFence
from ..errors import InvalidRequest
from ..storage.db import Db

__all__ = ["browse", "is_git", "recent_projects", "resolve_project"]

#: Directories one ``project.browse`` lists at most (a huge directory stays usable).
MAX_ENTRIES: Final = 1000
RECENT: Final = 10


def _inside(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _resolve(config: Config, raw: str) -> Path:
    roots = config.projects.roots
    try:
        # (`serve` refuses to start so; a server built otherwise serves no project.)
        config.check_start_dir()
    except ConfigError as exc:
        raise InvalidRequest(str(exc)) from None
    if "\0" in raw:
        raise InvalidRequest("project_dir must not contain NUL")
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = roots[0] / path
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise InvalidRequest(f"{raw!r} does not exist") from None
    if not real.is_dir():
        raise InvalidRequest(f"{raw!r} is not a directory")
    fence = DataDirFence.of(config.data_dir)
    overlap = fence.meets(real)
    if overlap is not None:
        # Said before the roots: this is why, whatever the roots are.
        raise InvalidRequest(f"{raw!r} ({real}) {fence.describe(overlap)}: a project must "
                             "lie outside it (agents would reach Turnvisor's own files)")
    if not _inside(real, roots):
        raise InvalidRequest(f"{raw!r} is outside the project roots "
                             f"({', '.join(str(r) for r in roots)})")
    return real


async def resolve_project(config: Config, raw: str) -> Path:
    """``raw`` (absolute, or relative to the first root) as a real directory
    inside a root, or ``InvalidRequest`` saying why not."""
    return await trio.to_thread.run_sync(_resolve, config, raw)


def is_git(path: Path) -> bool:
    """A working tree's top level: it has ``.git`` (a directory, or the file a
    worktree or submodule has)."""
    try:
        return (path / ".git").exists()
    except OSError:
        return False


def _browse(config: Config, raw: str) -> dict[str, Any]:
    real = _resolve(config, raw)
    fence = DataDirFence.of(config.data_dir)
    dirs: list[dict[str, Any]] = []
    try:
        with os.scandir(real) as entries:
            for entry in entries:
                if entry.name.startswith(".") or len(dirs) >= MAX_ENTRIES:
                    continue
                try:
                    if not entry.is_dir():  # (follows a link: shown if it leads inside)
                        continue
                    target = Path(entry.path).resolve()
                except OSError:
                    continue
                if _inside(target, config.projects.roots) and fence.meets(target) is None:
                    dirs.append({"name": entry.name, "is_git": is_git(target)})
    except OSError as exc:
        raise InvalidRequest(f"cannot list {raw!r}: {exc.strerror or exc}") from None
    dirs.sort(key=lambda d: str(d["name"]).lower())
    return {"path": str(real), "is_git": is_git(real), "dirs": dirs}


async def browse(config: Config, raw: str | None) -> dict[str, Any]:
    """``project.browse``: the directories in ``raw`` (default: the first root)."""
    return await trio.to_thread.run_sync(_browse, config,
                                         raw or str(config.projects.roots[0]))


def recent_projects(db: Db, workspace_id: str) -> list[str]:
    """The project directories of the workspace's tasks, most recently used first."""
    rows = db.conn.execute(
        "SELECT project_dir, MAX(updated_at) AS used FROM tasks WHERE workspace_id = ? "
        "AND project_dir IS NOT NULL GROUP BY project_dir ORDER BY used DESC LIMIT ?",
        (workspace_id, RECENT)).fetchall()
    return [str(r["project_dir"]) for r in rows]
