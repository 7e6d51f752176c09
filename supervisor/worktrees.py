"""A session's own git worktree (DESIGN.md §12): ``git worktree add`` of the
project's HEAD under ``DATA_DIR/worktrees/<session id>`` on a new branch
``turnvisor/<short id>``, and its removal when the session is deleted (the
branch is kept if it has commits of its own, else deleted too).

The project is a directory an agent may have written, so every command goes
through ``safe_git`` (no hook, filter, fsmonitor or diff driver it planted runs).
A failed add leaves nothing behind: no directory, no branch, no worktree entry.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trio

from .checkpoints import GitError, GitRunner, safe_git
from .errors import InvalidRequest
from .projects import is_git

__all__ = ["Worktree", "add_worktree", "remove_worktree"]

log = logging.getLogger(__name__)

GIT_S: Final = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Worktree:
    path: str
    branch: str
    base_commit: str
    #: The repository it belongs to (for its removal; not on the wire).
    repo: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "branch": self.branch, "base_commit": self.base_commit,
                "repo": self.repo}


def runner(data_dir: Path) -> GitRunner:
    return GitRunner(data_dir / "worktrees" / ".git-home")


async def _git(data_dir: Path, repo: Path, *args: str) -> str:
    out = await safe_git(runner(data_dir), repo, args, timeout_s=GIT_S)
    return out.decode("utf-8", "replace").strip()


async def add_worktree(data_dir: Path, project: Path, session_id: str) -> Worktree:
    """A new worktree of ``project`` for the session; ``InvalidRequest`` if the
    project is no git repository or the add fails (nothing is left behind)."""
    if not is_git(project):
        raise InvalidRequest(f"{project} is not a git repository: a worktree needs one "
                             "(launch without worktree to work in the directory itself)")
    try:
        top = Path(await _git(data_dir, project, "rev-parse", "--show-toplevel"))
        base = await _git(data_dir, project, "rev-parse", "--verify", "HEAD^{commit}")
    except GitError as exc:
        raise InvalidRequest(f"cannot make a worktree of {project}: {exc} (a repository "
                             "needs at least one commit)") from None
    if not await trio.to_thread.run_sync(_same_dir, top, project):
        raise InvalidRequest(f"{project} is inside the repository {top}: pick its top level "
                             "for a worktree")
    short = session_id.replace("-", "")[:12]
    branch = f"turnvisor/{short}"
    path = data_dir / "worktrees" / session_id
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        await _git(data_dir, project, "worktree", "add", "--no-track", "-b", branch,
                   str(path), base)
    except GitError as exc:
        await _undo_add(data_dir, project, path, branch)
        raise InvalidRequest(f"git worktree add failed: {exc}") from None
    except BaseException:
        with trio.CancelScope(shield=True, deadline=trio.current_time() + GIT_S):
            await _undo_add(data_dir, project, path, branch)
        raise
    return Worktree(path=str(path), branch=branch, base_commit=base, repo=str(project))


def _same_dir(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


async def _undo_add(data_dir: Path, project: Path, path: Path, branch: str) -> None:
    with contextlib.suppress(GitError):
        await _git(data_dir, project, "worktree", "remove", "--force", str(path))
    await trio.to_thread.run_sync(lambda: shutil.rmtree(path, ignore_errors=True))
    with contextlib.suppress(GitError):
        await _git(data_dir, project, "worktree", "prune")
    with contextlib.suppress(GitError):
        await _git(data_dir, project, "branch", "-D", branch)


async def remove_worktree(data_dir: Path, worktree: dict[str, str]) -> bool:
    """Remove the worktree (its files with it); the branch goes too unless it has
    commits beyond its base.  Returns whether the branch was kept."""
    repo, path = Path(worktree["repo"]), Path(worktree["path"])
    branch, base = worktree["branch"], worktree["base_commit"]
    kept = True
    try:
        await _git(data_dir, repo, "worktree", "remove", "--force", str(path))
    except GitError as exc:
        log.warning("worktree %s: git worktree remove failed (%s); removing its files", path,
                    exc)
        await trio.to_thread.run_sync(lambda: shutil.rmtree(path, ignore_errors=True))
        with contextlib.suppress(GitError):
            await _git(data_dir, repo, "worktree", "prune")
    try:
        ahead = await _git(data_dir, repo, "rev-list", "--count", f"{base}..refs/heads/{branch}")
        if ahead == "0":
            await _git(data_dir, repo, "branch", "-D", branch)
            kept = False
    except GitError as exc:
        log.warning("worktree %s: its branch %s is kept (%s)", path, branch, exc)
    return kept
