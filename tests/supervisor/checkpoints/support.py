"""Helpers of the checkpoint tests: a project directory, its files as bytes, plain git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from supervisor.workspace.checkpoints import CheckpointSettings, ShadowRepo

__all__ = ["git", "repo_for", "tree_bytes", "user_repo_state"]

#: The tests' user repositories: their own identity, no config of the machine's.
GIT_ENV = {
    **os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "User", "GIT_AUTHOR_EMAIL": "user@example.com",
    "GIT_COMMITTER_NAME": "User", "GIT_COMMITTER_EMAIL": "user@example.com",
}


def git(repo: Path, *args: str) -> str:
    """Plain git in a test's own (trusted) repository."""
    done = subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, capture_output=True,
                          check=True)
    return done.stdout.decode()


def repo_for(tmp_path: Path, project: Path, *, max_file_mb: float = 10.0) -> ShadowRepo:
    return ShadowRepo.for_session(tmp_path / "data", "s1", project,
                                  settings=CheckpointSettings(max_file_mb=max_file_mb))


def tree_bytes(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root`` but ``.git``: a file's bytes, a symlink's target
    (``"-> target"``), a directory as ``"dir"``."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        base = Path(dirpath)
        for name in dirnames:
            path = base / name
            rel = path.relative_to(root).as_posix()
            out[rel] = f"-> {os.readlink(path)}" if path.is_symlink() else "dir"
        for name in filenames:
            path = base / name
            rel = path.relative_to(root).as_posix()
            out[rel] = f"-> {os.readlink(path)}" if path.is_symlink() else path.read_bytes()
    return out


def user_repo_state(repo: Path) -> dict[str, str | bytes]:
    """What a checkpoint must never touch in the user's repository, read with plumbing."""
    return {
        "head": git(repo, "rev-parse", "HEAD"),
        "symbolic_head": git(repo, "symbolic-ref", "-q", "HEAD"),
        "refs": git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "stash": git(repo, "stash", "list"),
        "index_file": (repo / ".git" / "index").read_bytes(),
        "staged": git(repo, "diff", "--cached", "--name-status"),
        "config": (repo / ".git" / "config").read_bytes(),
        "objects": git(repo, "count-objects", "-v"),
    }
