"""The shadow repository through its public surface: snapshot, changes, diff, restore.

Each test works on a real directory with real git; "the agent" is the test writing files
between snapshots.  Restore is checked byte for byte against the tree as it was.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from supervisor.workspace.checkpoints import CheckpointError, CheckpointSettings, ShadowRepo

from .support import git, repo_for, tree_bytes, user_repo_state


def write(root: Path, rel: str, data: bytes | str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    write(root, "README.md", "# project\n")
    write(root, "src/app.py", "def f():\n    return 1\n")
    write(root, "src/lib/util.py", "X = 1\n")
    return root


async def test_a_turn_is_listed_and_restored_byte_for_byte(tmp_path: Path,
                                                           project: Path) -> None:
    tool = write(project, "tool.sh", "#!/bin/sh\necho hi\n")
    tool.chmod(0o755)
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("turn 1 start")
    before = tree_bytes(project)

    write(project, "src/app.py", "def f():\n    return 2\n\n\ndef g():\n    pass\n")
    write(project, "notes/new.txt", "new\n")
    (project / "README.md").unlink()
    tool.chmod(0o644)
    end = await repo.snapshot("turn 1 end")

    changes = {c.path: c for c in await repo.changes(start, end)}
    assert {p: c.status for p, c in changes.items()} == {
        "src/app.py": "modified", "notes/new.txt": "added", "README.md": "deleted",
        "tool.sh": "modified"}
    assert (changes["src/app.py"].additions, changes["src/app.py"].deletions) == (5, 1)
    assert (changes["README.md"].additions, changes["README.md"].deletions) == (0, 1)
    diff = await repo.diff(start, end, "src/app.py")
    assert "-    return 1\n+    return 2\n" in diff
    assert "notes/new.txt" not in diff
    assert "+new" in await repo.diff(start, end)

    result = await repo.restore(start)
    assert tree_bytes(project) == before
    assert os.stat(tool).st_mode & 0o111
    assert sorted(result.written) == ["README.md", "src/app.py", "tool.sh"]
    assert result.deleted == ("notes/new.txt",)
    assert not (project / "notes").exists(), "a directory left empty goes too"


async def test_a_restore_can_be_restored(tmp_path: Path, project: Path) -> None:
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    write(project, "src/app.py", "changed by the agent\n")
    write(project, "added.txt", "added\n")
    after_turn = tree_bytes(project)
    result = await repo.restore(start)
    assert result.safety.label == "before restoring to: start"
    await repo.restore(result.safety)
    assert tree_bytes(project) == after_turn


async def test_ignore_rules_are_honoured_and_ignored_files_never_touched(
        tmp_path: Path, project: Path) -> None:
    write(project, ".gitignore", "*.log\nbuild/\n")
    write(project, "src/.gitignore", "generated.py\n")
    write(project, "app.log", "old log\n")
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    write(project, "app.log", "new log\n")
    write(project, "build/out.bin", b"\x00" * 10)
    write(project, "src/generated.py", "generated\n")
    write(project, "kept.txt", "kept\n")
    end = await repo.snapshot("end")
    # The content of ignored files is in no checkpoint; those the turn created are
    # listed as such (issue 40 item 11: the rules are the agent's to write).
    assert [(c.path, c.status) for c in await repo.changes(start, end)] == [
        ("kept.txt", "added"), ("build/out.bin", "ignored"), ("src/generated.py", "ignored")]

    result = await repo.restore(start)
    assert not (project / "kept.txt").exists()
    # An ignored file that was there at the start is neither deleted nor rewound; the
    # ones created since are removed, and the answer says their content is not saved.
    assert (project / "app.log").read_text() == "new log\n"
    assert not (project / "build").exists()
    assert not (project / "src/generated.py").exists()
    assert [p for p, _ in result.removed_unsaved] == ["build/out.bin", "src/generated.py"]


async def test_the_repositorys_info_exclude_is_honoured(tmp_path: Path, project: Path) -> None:
    git(project, "init", "-q")
    (project / ".git/info").mkdir(exist_ok=True)
    (project / ".git/info/exclude").write_text("secret.env\n")
    write(project, "secret.env", "TOKEN=1\n")
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    write(project, "secret.env", "TOKEN=2\n")
    write(project, "other.env", "A=1\n")
    end = await repo.snapshot("end")
    assert [c.path for c in await repo.changes(start, end)
            if c.status != "ignored"] == ["other.env"]


async def test_binary_files_and_line_endings_are_kept_as_bytes(tmp_path: Path,
                                                               project: Path) -> None:
    # Attributes asking for conversion must not change a checkpoint's bytes.
    write(project, ".gitattributes", "* text=auto eol=crlf ident\n*.bin binary\n")
    blob = bytes(range(256)) * 64
    write(project, "data.bin", blob)
    write(project, "dos.txt", b"one\r\ntwo\r\n$Id$\n")
    write(project, "unix.txt", b"one\ntwo\n")
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    before = tree_bytes(project)
    write(project, "data.bin", blob[::-1])
    write(project, "dos.txt", b"changed\n")
    write(project, "unix.txt", b"changed\r\n")
    end = await repo.snapshot("end")
    changes = {c.path: c for c in await repo.changes(start, end)}
    assert changes["data.bin"].binary and changes["data.bin"].additions == 0
    assert "Binary files" in await repo.diff(start, end, "data.bin")
    await repo.restore(start)
    assert tree_bytes(project) == before


async def test_renames_are_detected(tmp_path: Path, project: Path) -> None:
    write(project, "src/long.py", "".join(f"line {i}\n" for i in range(40)))
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    before = tree_bytes(project)
    (project / "src/long.py").rename(project / "src/moved.py")
    with (project / "src/moved.py").open("a") as f:
        f.write("one more\n")
    end = await repo.snapshot("end")
    [change] = await repo.changes(start, end)
    assert (change.status, change.path, change.old_path) == (
        "renamed", "src/moved.py", "src/long.py")
    assert (change.additions, change.deletions) == (1, 0)
    diff = await repo.diff(start, end, "src/moved.py")
    assert "rename from src/long.py" in diff and "+one more" in diff
    await repo.restore(start)
    assert tree_bytes(project) == before


async def test_deleted_and_replaced_directories_come_back(tmp_path: Path,
                                                         project: Path) -> None:
    write(project, "pkg/a/b/deep.txt", "deep\n")
    write(project, "pkg/a/c.txt", "c\n")
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    before = tree_bytes(project)
    for rel in ("pkg/a/b/deep.txt", "pkg/a/c.txt"):
        (project / rel).unlink()
    (project / "pkg/a/b").rmdir()
    (project / "pkg/a").rmdir()
    write(project, "pkg/a", "a file where the directory was\n")
    (project / "src/lib/util.py").unlink()
    (project / "src/lib").rmdir()
    write(project, "src/lib/new/mod.py", "new\n")
    end = await repo.snapshot("end")
    statuses = {c.path: c.status for c in await repo.changes(start, end)}
    assert statuses["pkg/a/b/deep.txt"] == "deleted" and statuses["pkg/a"] == "added"
    await repo.restore(start)
    assert tree_bytes(project) == before


async def test_symlinks_are_restored_as_links_and_never_followed(tmp_path: Path,
                                                                 project: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, "victim.txt", "outside\n")
    os.symlink("src/app.py", project / "link-in")
    os.symlink(str(outside / "victim.txt"), project / "link-out")
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    before = tree_bytes(project)
    outside_before = tree_bytes(outside)

    # The agent turns a directory into a symlink to outside the cwd, and a symlink
    # into a file; a restore must write into a real directory, and the link itself.
    for rel in ("src/lib/util.py", "src/app.py"):
        (project / rel).unlink()
    (project / "src/lib").rmdir()
    (project / "src").rmdir()
    os.symlink(str(outside), project / "src")
    (project / "link-out").unlink()
    write(project, "link-out", "now a file\n")
    end = await repo.snapshot("end")
    statuses = {c.path: c.status for c in await repo.changes(start, end)}
    assert statuses["src"] == "added" and statuses["src/app.py"] == "deleted"

    await repo.restore(start)
    assert tree_bytes(project) == before
    assert not (project / "src").is_symlink()
    assert (project / "link-out").is_symlink()
    assert tree_bytes(outside) == outside_before


async def test_a_symlink_the_safety_checkpoint_could_not_save_blocks_what_is_behind_it(
        tmp_path: Path, project: Path) -> None:
    """The agent swaps a tracked directory for a symlink to outside the cwd and
    ignores the link: the safety checkpoint cannot save it, but it was not there at
    the start, so the restore removes the link itself (never what it points at) and
    puts the directory back, writing nothing through it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    for rel in ("src/lib/util.py", "src/app.py"):
        (project / rel).unlink()
    (project / "src/lib").rmdir()
    (project / "src").rmdir()
    os.symlink(str(outside), project / "src")
    write(project, ".gitignore", "/src\n")
    result = await repo.restore(start)
    assert os.listdir(outside) == []
    assert not (project / "src").is_symlink()
    assert sorted(result.written) == ["src/app.py", "src/lib/util.py"]
    assert result.kept == ()
    assert [p for p, _ in result.removed_unsaved] == ["src"]
    assert not (project / ".gitignore").exists()


async def test_a_file_the_user_edited_meanwhile_is_kept_unless_chosen(
        tmp_path: Path, project: Path) -> None:
    """What a restore does with an edit made after the turn (DESIGN.md §15): the file is
    left as the person made it, listed in ``kept`` (``edited_since``) and in
    ``edited_since``; the other files go back.  ``preview`` says the same beforehand,
    and nothing it lists is written by it."""
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("turn start")
    write(project, "src/app.py", "agent's version\n")
    write(project, "new.txt", "made by the turn\n")
    end = await repo.snapshot("turn end")
    write(project, "src/app.py", "the user's edit on top\n")
    write(project, "README.md", "the user's edit of a file the turn did not touch\n")
    planned = await repo.preview(start, since=end)
    assert [(c.path, c.action, c.edited_since) for c in planned] == [
        ("README.md", "restored", True), ("new.txt", "deleted", False),
        ("src/app.py", "restored", True)]
    assert (project / "new.txt").exists()
    result = await repo.restore(start, since=end)
    assert (project / "src/app.py").read_text() == "the user's edit on top\n"
    assert "the user's edit" in (project / "README.md").read_text()
    assert not (project / "new.txt").exists()
    assert sorted(result.edited_since) == ["README.md", "src/app.py"]
    assert sorted(result.kept) == [("README.md", "edited_since"),
                                   ("src/app.py", "edited_since")]


async def test_a_file_edited_meanwhile_is_put_back_when_chosen_and_the_safety_has_it(
        tmp_path: Path, project: Path) -> None:
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("turn start")
    write(project, "src/app.py", "agent's version\n")
    end = await repo.snapshot("turn end")
    write(project, "src/app.py", "the user's edit on top\n")
    write(project, "README.md", "the user's edit of a file the turn did not touch\n")
    result = await repo.restore(start, since=end, overwrite=["src/app.py"])
    assert (project / "src/app.py").read_text() == "def f():\n    return 1\n"
    assert "the user's edit" in (project / "README.md").read_text()
    assert sorted(result.edited_since) == ["README.md", "src/app.py"]
    assert result.kept == (("README.md", "edited_since"),)
    await repo.restore(result.safety, overwrite="all")
    assert (project / "src/app.py").read_text() == "the user's edit on top\n"
    result = await repo.restore(start, since=end, overwrite="all")
    assert (project / "README.md").read_text() == "# project\n"
    assert result.kept == ()


async def test_large_files_are_skipped_listed_and_never_overwritten(
        tmp_path: Path, project: Path) -> None:
    limit_mb = 0.01  # 10,485 bytes
    write(project, "big.dat", b"x" * 20_000)
    write(project, "grows.txt", "small\n")
    repo = repo_for(tmp_path, project, max_file_mb=limit_mb)
    start = await repo.snapshot("start")
    assert [(s.path, s.size) for s in start.skipped] == [("big.dat", 20_000)]
    assert (await repo.load(start.commit)).skipped == start.skipped

    write(project, "grows.txt", b"y" * 30_000)  # tracked, now too large
    write(project, "big.dat", b"z" * 25_000)
    end = await repo.snapshot("end")
    assert [s.path for s in end.skipped] == ["big.dat", "grows.txt"]
    # The grown file left the checkpoint; its large content was saved nowhere, so a
    # restore leaves it as it is rather than lose it.
    result = await repo.restore(start)
    assert (project / "grows.txt").read_bytes() == b"y" * 30_000
    assert (project / "big.dat").read_bytes() == b"z" * 25_000
    assert [path for path, _ in result.kept] == ["grows.txt"]
    assert "not saved" in result.kept[0][1]


async def test_an_empty_directory(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    repo = repo_for(tmp_path, empty)
    first = await repo.snapshot("first")
    second = await repo.snapshot("second")
    assert first.commit != second.commit and first.tree == second.tree
    assert await repo.changes(first, second) == []
    assert await repo.diff(first, second) == ""
    result = await repo.restore(first)
    assert result.written == result.deleted == ()


async def test_a_cwd_that_is_a_git_repository_keeps_its_index_stash_branches_and_head(
        tmp_path: Path, project: Path) -> None:
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "first")
    git(project, "branch", "feature")
    write(project, "src/app.py", "stashed\n")
    git(project, "stash", "-q")
    write(project, "staged.txt", "staged\n")
    git(project, "add", "staged.txt")
    write(project, "unstaged.txt", "not staged\n")
    state = user_repo_state(project)

    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    write(project, "src/app.py", "the agent's edit\n")
    write(project, "agent.txt", "new\n")
    end = await repo.snapshot("end")
    assert {c.path for c in await repo.changes(start, end)} == {"src/app.py", "agent.txt"}
    await repo.diff(start, end)
    await repo.restore(start)
    assert user_repo_state(project) == state
    assert not (project / "agent.txt").exists()
    assert (project / "staged.txt").exists() and (project / "unstaged.txt").exists()


async def test_a_missing_cwd_and_a_snapshot_out_of_time_say_so(tmp_path: Path) -> None:
    repo = repo_for(tmp_path, tmp_path / "nowhere")
    with pytest.raises(CheckpointError, match="does not exist"):
        await repo.snapshot("x")
    (tmp_path / "somewhere").mkdir()
    slow = ShadowRepo.for_session(tmp_path / "data", "s2", tmp_path / "somewhere",
                                  settings=CheckpointSettings(snapshot_s=0))
    with pytest.raises(CheckpointError, match="took longer than 0 s"):
        await slow.snapshot("x")
    # The repository is usable afterwards.
    fast = ShadowRepo.for_session(tmp_path / "data", "s2", tmp_path / "somewhere")
    assert (await fast.snapshot("y")).tree


async def test_a_restore_leaves_no_journal_and_a_bad_id_is_refused(tmp_path: Path,
                                                                  project: Path) -> None:
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    await repo.restore(start)
    assert repo.interrupted_restore() is None
    assert await repo.recover() is None
    with pytest.raises(CheckpointError, match="not a checkpoint id"):
        await repo.load("HEAD~1")
    with pytest.raises(CheckpointError, match="not a usable session id"):
        ShadowRepo.for_session(tmp_path, "../escape", project)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
async def test_an_unreadable_file_is_skipped_not_a_failed_snapshot(tmp_path: Path,
                                                                   project: Path) -> None:
    secret = write(project, "secret.txt", "no\n")
    secret.chmod(0)
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    assert [(s.path, s.reason) for s in start.skipped] == [("secret.txt", "unreadable")]


async def test_an_empty_directory_where_a_file_was_gives_way(tmp_path: Path,
                                                             project: Path) -> None:
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("start")
    before = tree_bytes(project)
    (project / "README.md").unlink()
    (project / "README.md").mkdir()  # no file in it: no checkpoint can hold it
    result = await repo.restore(start)
    assert result.kept == () and "README.md" in result.written
    assert tree_bytes(project) == before
