"""git in a test's repository, isolated from the machine's and the user's git configuration."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["committed_repo", "git"]


def git(repo: Path, *args: str) -> str:
    """``git ARGS`` in ``repo`` (its HOME, no system config, a fixed identity); stdout."""
    env = {"PATH": os.environ["PATH"], "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def committed_repo(path: Path, files: dict[str, str]) -> Path:
    """A new repository at ``path`` on ``main`` with ``files`` in its one commit."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in files.items():
        (path / name).write_text(text)
    git(path, "add", ".")
    git(path, "commit", "-qm", "init")
    return path
