"""Git as the attacker sees it (DESIGN.md §12): a project whose ``.git/config``, hooks and
attributes name programs.  Every planted program writes a marker file; snapshot, changes,
diff, restore and ``safe_git`` worktree add/remove run, and no marker may appear.

The last test proves the plant is live: plain git on the same project runs the programs.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from supervisor.workspace.checkpoints import GitRunner, safe_git

from .support import GIT_ENV, git, repo_for, tree_bytes

#: Every hook git may run around a checkout, a commit or a worktree.
HOOKS = ("post-checkout", "pre-commit", "post-commit", "post-index-change", "reference-transaction",
         "fsmonitor-watchman", "post-rewrite")


def plant(project: Path, markers: Path) -> None:
    """Make ``project`` a repository whose config and attributes run ``evil.sh``."""
    markers.mkdir()
    evil = project.parent / "evil.sh"
    # Each run records what ran it; a filter must still pass its input through.
    evil.write_text(f'#!/bin/sh\necho "$0 $*" > "{markers}/ran-$$"\ncat\n')
    evil.chmod(0o755)
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "first")
    hooks = project / ".git" / "planted-hooks"
    hooks.mkdir()
    for hook in HOOKS:
        (hooks / hook).symlink_to(evil)
    with (project / ".git" / "config").open("a") as config:
        config.write(f"""
[core]
\tfsmonitor = {evil}
\thooksPath = {hooks}
\tpager = {evil}
\teditor = {evil}
\tsshCommand = {evil}
\tattributesFile = {project}/.git/planted-attributes
[filter "evil"]
\tclean = {evil} clean
\tsmudge = {evil} smudge
\tprocess = {evil} process
\trequired = true
[filter "x=y"]
\tsmudge = {evil} equals-smudge
\tclean = {evil} equals-clean
[filter "lfs"]
\tclean = {evil} lfs-clean
\tsmudge = {evil} lfs-smudge
[diff]
\texternal = {evil} external
[diff "evil"]
\ttextconv = {evil} textconv
\tcommand = {evil} command
[merge "evil"]
\tdriver = {evil} merge
[gpg]
\tprogram = {evil}
[commit]
\tgpgSign = true
[credential]
\thelper = !{evil} credential
""")
    attributes = "* filter=evil diff=evil merge=evil\n*.txt filter=lfs\n*.py filter=x=y\n"
    (project / ".gitattributes").write_text(attributes)
    (project / ".git" / "info").mkdir(exist_ok=True)
    (project / ".git" / "info" / "attributes").write_text(attributes)
    (project / ".git" / "planted-attributes").write_text(attributes)


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("print(1)\n")
    (project / "notes.txt").write_text("notes\n")
    markers = tmp_path / "markers"
    plant(project, markers)
    return project, markers


async def test_checkpoints_run_nothing_the_project_planted(tmp_path: Path,
                                                           hostile: tuple[Path, Path]) -> None:
    project, markers = hostile
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    before = tree_bytes(project)
    (project / "app.py").write_text("print(2)\n")
    (project / "notes.txt").write_text("more notes\n")
    (project / "new.txt").write_text("new\n")
    end = await repo.snapshot("end")
    changes = await repo.changes(start, end)
    assert {c.path for c in changes} == {"app.py", "notes.txt", "new.txt"}
    diff = await repo.diff(start, end)
    assert "+print(2)" in diff
    assert "+more notes" in await repo.diff(start, end, "notes.txt")
    await repo.restore(start)
    assert tree_bytes(project) == before
    assert os.listdir(markers) == []


async def test_safe_git_worktree_add_and_remove_run_nothing_planted(
        tmp_path: Path, hostile: tuple[Path, Path]) -> None:
    project, markers = hostile
    runner = GitRunner(tmp_path / "git-home")
    worktree = tmp_path / "worktrees" / "s1"
    await safe_git(runner, project, ["worktree", "add", "-q", "-b", "turnvisor/s1",
                                     str(worktree), "HEAD"])
    # Checked out as committed: no smudge filter rewrote it.
    assert (worktree / "app.py").read_text() == "print(1)\n"
    assert (worktree / "notes.txt").read_text() == "notes\n"
    status = await safe_git(runner, worktree, ["status", "--porcelain"])
    assert status == b""
    listed = await safe_git(runner, project, ["worktree", "list", "--porcelain"])
    assert str(worktree).encode() in listed
    await safe_git(runner, project, ["worktree", "remove", "--force", str(worktree)])
    assert not worktree.exists()
    assert "turnvisor/s1" in git(project, "branch", "--list", "turnvisor/s1")
    assert os.listdir(markers) == []


def test_the_planted_programs_are_live(tmp_path: Path,
                                       hostile: tuple[Path, Path]) -> None:
    """Without Turnvisor's measures the same project runs them: the test above can fail."""
    project, markers = hostile
    (project / "app.py").write_text("print(3)\n")
    subprocess.run(["git", "status"], cwd=project, env=GIT_ENV, capture_output=True,
                   check=False)
    subprocess.run(["git", "diff"], cwd=project, env=GIT_ENV, capture_output=True,
                   check=False)
    ran = [(markers / name).read_text().split(" ", 1)[1] for name in os.listdir(markers)]
    assert any(r.startswith(("process", "equals-clean")) for r in ran), ran  # a filter
    assert any(r.startswith("2 ") for r in ran), ran  # core.fsmonitor (hook version 2)


async def test_nested_repositories_are_left_out_listed_and_run_nothing(
        tmp_path: Path, hostile: tuple[Path, Path]) -> None:
    project, markers = hostile
    inner = project / "vendor" / "inner"
    inner.mkdir(parents=True)
    (inner / "lib.py").write_text("x = 1\n")
    plant(inner, tmp_path / "inner-markers")
    empty = project / "scratch"
    empty.mkdir()
    git(empty, "init", "-q")  # a repository without a commit
    (empty / "draft.txt").write_text("draft\n")
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    assert {(s.path, s.reason) for s in start.skipped} == {
        ("vendor/inner", "repository"), ("scratch", "repository")}
    (inner / "lib.py").write_text("x = 2\n")
    (project / "app.py").write_text("print(4)\n")
    end = await repo.snapshot("end")
    assert [c.path for c in await repo.changes(start, end)] == ["app.py"]
    await repo.restore(start)
    assert (inner / "lib.py").read_text() == "x = 2\n"
    assert (project / "app.py").read_text() == "print(1)\n"
    assert os.listdir(markers) == [] and os.listdir(tmp_path / "inner-markers") == []
