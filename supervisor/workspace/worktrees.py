"""A session's own git worktree (DESIGN.md §12): ``git worktree add`` of the
project's HEAD under ``DATA_DIR/worktrees/<session id>`` on a new branch
``turnvisor/<short id>``, and its removal when the session is deleted (the
branch is kept if it has commits of its own, else deleted too).

The project is a directory an agent may have written, so every command goes
through ``safe_git`` (no hook, filter, fsmonitor or diff driver it planted is
named to git) inside git's own fence (``protocols.git_fence``): whatever the
project's config still makes git run or write (a conditional include that
applies on the new branch only, a symlink planted in ``.git``) reaches no
network and no data dir, and can write only the project's ``.git`` directory
and, for the add, the new worktree's directory (made empty here first).  Only
a project whose ``.git`` is a directory of its own gets a worktree: a ``.git``
file (the project is itself a worktree or submodule) or link would name a git
dir elsewhere, which the fence would have to make writable by that name.
The worktree's files are removed by the backend (``shutil.rmtree`` follows no
link), never by git, so git needs no write access to them on removal.
A failed add leaves nothing behind: no directory, no branch, no worktree entry.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trio

from protocols.git_fence import fence_for, fence_warning
from protocols.sandbox import HiddenDir

from ..errors import InvalidRequest
from .checkpoints import GitError, GitRunner, safe_git
from .projects import is_git

__all__ = ["Worktree", "add_worktree", "check_git_fence", "remove_worktree"]

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


async def check_git_fence() -> None:
    """At start: warn once if git on projects must run without its fence here."""
    warning = await trio.to_thread.run_sync(fence_warning)
    if warning is not None:
        log.warning("%s", warning)


async def runner(data_dir: Path, hide: Sequence[HiddenDir]) -> GitRunner:
    """The runner for git on projects: fenced, hiding ``hide`` (the config's
    ``hidden_dirs()``, checked by identity at each command), where bwrap runs."""
    fence = await trio.to_thread.run_sync(fence_for, hide)
    return GitRunner(data_dir / "worktrees" / ".git-home", fence=fence)


async def _git(run: GitRunner, repo: Path, *args: str, writes: Sequence[Path] = ()) -> str:
    out = await safe_git(run, repo, args, timeout_s=GIT_S, writable=writes)
    return out.decode("utf-8", "replace").strip()


def _own_git_dir(project: Path) -> Path | None:
    """``project/.git`` when it is a directory itself (not a link, not a file)."""
    try:
        st = os.lstat(project / ".git")
    except OSError:
        return None
    return project / ".git" if stat.S_ISDIR(st.st_mode) else None


async def add_worktree(data_dir: Path, project: Path, session_id: str, *,
                       hide: Sequence[HiddenDir]) -> Worktree:
    """A new worktree of ``project`` (a real path) for the session;
    ``InvalidRequest`` if the project is no git repository with a ``.git``
    directory of its own, or the add fails (nothing is left behind)."""
    if not is_git(project):
        raise InvalidRequest(f"{project} is not a git repository: a worktree needs one "
                             "(launch without worktree to work in the directory itself)")
    git_dir = await trio.to_thread.run_sync(_own_git_dir, project)
    if git_dir is None:
        raise InvalidRequest(f"{project}/.git is not a directory (the project is a worktree "
                             "or submodule of another repository, or .git is a link): make "
                             "the worktree from the repository that holds its git directory")
    run = await runner(data_dir, hide)
    try:
        # One command (each one is a fenced process or two): the top level, then HEAD.
        top_line, _, base = (await _git(run, project, "rev-parse", "--show-toplevel",
                                        "--verify", "HEAD^{commit}")).partition("\n")
        top = Path(top_line)
    except GitError as exc:
        raise InvalidRequest(f"cannot make a worktree of {project}: {exc} (a repository "
                             "needs at least one commit)") from None
    if not await trio.to_thread.run_sync(_same_dir, top, project):
        raise InvalidRequest(f"{project} is inside the repository {top}: pick its top level "
                             "for a worktree")
    short = session_id.replace("-", "")[:12]
    branch = f"turnvisor/{short}"
    path = data_dir / "worktrees" / session_id
    # Made empty here, by us, under the data dir: the fence binds this directory
    # (opened without following links) and git fills it.
    try:
        await trio.to_thread.run_sync(_make_empty_dir, path)
    except OSError as exc:
        raise InvalidRequest(f"cannot make the worktree's directory {path}: "
                             f"{exc.strerror or exc}") from None
    try:
        await _git(run, project, "worktree", "add", "--no-track", "-b", branch,
                   str(path), base, writes=[git_dir, path])
    except GitError as exc:
        await _undo_add(run, project, git_dir, path, branch)
        raise InvalidRequest(f"git worktree add failed: {exc}") from None
    except BaseException:
        with trio.CancelScope(shield=True, deadline=trio.current_time() + GIT_S):
            await _undo_add(run, project, git_dir, path, branch)
        raise
    return Worktree(path=str(path), branch=branch, base_commit=base, repo=str(project))


def _make_empty_dir(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir()


def _same_dir(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


async def _forget_worktree(run: GitRunner, repo: Path, git_dir: Path, path: Path) -> None:
    """The worktree's files removed by us, then its entry in the repository's
    git dir by git (in the fence it sees no worktree directory: it only drops
    the entry); ``GitError`` if git could not."""
    await trio.to_thread.run_sync(lambda: shutil.rmtree(path, ignore_errors=True))
    await _git(run, repo, "worktree", "remove", "--force", str(path), writes=[git_dir])


async def _undo_add(run: GitRunner, project: Path, git_dir: Path, path: Path,
                    branch: str) -> None:
    with contextlib.suppress(GitError):
        await _forget_worktree(run, project, git_dir, path)
    with contextlib.suppress(GitError):
        await _git(run, project, "branch", "-D", branch, writes=[git_dir])


async def remove_worktree(data_dir: Path, worktree: dict[str, str], *,
                          hide: Sequence[HiddenDir]) -> bool:
    """Remove the worktree (its files with it); the branch goes too unless it has
    commits beyond its base.  Returns whether the branch was kept."""
    repo, path = Path(worktree["repo"]), Path(worktree["path"])
    branch, base = worktree["branch"], worktree["base_commit"]
    git_dir = await trio.to_thread.run_sync(_own_git_dir, repo)
    if git_dir is None:
        # Swapped for a link or a file since the add: git would write where it points.
        log.warning("worktree %s: %s/.git is no longer a directory; removing the worktree's "
                    "files only (its entry and branch %s stay in the repository)",
                    path, repo, branch)
        await trio.to_thread.run_sync(lambda: shutil.rmtree(path, ignore_errors=True))
        return True
    run = await runner(data_dir, hide)
    try:
        await _forget_worktree(run, repo, git_dir, path)
    except GitError as exc:
        log.warning("worktree %s: git worktree remove failed (%s); pruning", path, exc)
        with contextlib.suppress(GitError):
            await _git(run, repo, "worktree", "prune", writes=[git_dir])
    kept = True
    try:
        ahead = await _git(run, repo, "rev-list", "--count", f"{base}..refs/heads/{branch}")
        if ahead == "0":
            await _git(run, repo, "branch", "-D", branch, writes=[git_dir])
            kept = False
    except GitError as exc:
        log.warning("worktree %s: its branch %s is kept (%s)", path, branch, exc)
    return kept
