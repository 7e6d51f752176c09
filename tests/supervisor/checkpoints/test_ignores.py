"""The rules of the repository around a cwd, rewritten relative to the cwd."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from supervisor.workspace.checkpoints.ignores import repository_excludes, translate

from .support import git, repo_for


@pytest.mark.parametrize(
    ("line", "prefix", "expected"),
    [
        ("*.log", ("app",), "*.log"),  # no slash: any depth
        ("build/", ("app",), "build/"),
        ("!keep.log", ("app",), "!keep.log"),
        ("**/cache/x", ("app",), "**/cache/x"),
        ("/app/dist/", ("app",), "/dist/"),
        ("app/dist", ("app",), "/dist"),
        ("!/app/dist/keep", ("app",), "!/dist/keep"),
        ("/a*/gen/*.py", ("app",), "/gen/*.py"),
        ("/other/dist", ("app",), None),  # another directory's rule
        ("/app", ("app",), None),  # it would ignore the cwd itself
        ("/x/**/y/z", ("x", "sub"), None),  # cannot be rewritten
        ("/dist", (), "/dist"),  # the cwd is the top: as it is
        ("*", ("projects", "app"), None),  # a dotfiles repository's "ignore all"
        ("/*", (), None),
        ("!*", ("app",), "!*"),
        ("# comment", ("app",), None),
        ("   ", ("app",), None),
    ],
)
def test_translate(line: str, prefix: tuple[str, ...], expected: str | None) -> None:
    assert translate(line, prefix) == expected


async def test_a_cwd_inside_a_repository_honours_the_rules_above_it(tmp_path: Path) -> None:
    top = tmp_path / "monorepo"
    app = top / "services" / "app"
    app.mkdir(parents=True)
    git(top, "init", "-q")
    (top / ".gitignore").write_text("*.tmp\n/services/app/dist/\n/services/other/\n")
    (top / "services" / ".gitignore").write_text("app/secrets.env\n")
    (top / ".git" / "info" / "exclude").write_text("local-notes.md\n")
    for rel in ("main.py", "x.tmp", "dist/bundle.js", "secrets.env", "local-notes.md"):
        path = app / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rel)
    assert "/dist/" in repository_excludes(app)
    repo = repo_for(tmp_path, app)
    start = await repo.snapshot("start")
    for rel in ("main.py", "x.tmp", "dist/bundle.js", "secrets.env", "local-notes.md"):
        (app / rel).write_text("changed")
    end = await repo.snapshot("end")
    assert [c.path for c in await repo.changes(start, end)] == ["main.py"]


def test_a_fifo_in_place_of_an_ignore_file_is_not_read(tmp_path: Path) -> None:
    top = tmp_path / "repo"
    (top / "sub").mkdir(parents=True)
    (top / ".git").mkdir()
    os.mkfifo(top / ".gitignore")
    assert repository_excludes(top / "sub") == ""
    assert repository_excludes(tmp_path / "repo") == ""
