"""Issue 40 item 4 (second half), written as the attack: what an agent plants in its
project's own ``.git`` (hooks, ``core.hooksPath``, an ``includeIf``, attributes, a
hook made executable, a hook that is a link to ``/etc/passwd``) used to survive a
revert of its turn, since git skips every ``.git`` of a work tree and so did the
checkpoints; at the person's next ``git commit`` it ran as the person, outside every
sandbox.  Now the turn's changes list those files and the revert puts them back.

The first test is the whole attack through a real server, the hostile agent's shell
and the WebSocket API, ending with the person's own ``git commit``: nothing the agent
planted runs, the person's own hook still does.  The others play variants through the
checkpoint engine (``ShadowRepo`` with real git): a submodule's git dir, links where
git expects directories, a worktree's ``.git`` file re-pointed, a hook too large to
save, a person's later edit, and a checkpoint written before ``.git`` was recorded.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.config import Projects
from supervisor.profiles import BUILTIN_PROFILES, AgentProfile
from supervisor.workspace.checkpoints import CheckpointSettings, ShadowRepo
from supervisor.workspace.checkpoints.model import Checkpoint
from tests.security.shell import shell
from tests.supervisor.checkpoints.support import GIT_ENV, git
from tests.support.server import Server, running_server
from tests.support.ws import WsClient, ws_client

HOSTILE = Path(__file__).with_name("hostile_agent.py")


def _marker_hook(marker: Path, word: str) -> str:
    return f"#!/bin/sh\necho {word} >> '{marker}'\n"


def _user_repo(path: Path, marker: Path) -> Path:
    """The person's repository: one commit, and hooks of their own: an executable
    ``prepare-commit-msg`` that leaves ``person`` in the marker, and a
    ``post-commit`` they keep disabled (not executable)."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("one\n")
    git(path, "add", "a.txt")
    git(path, "commit", "-qm", "first")
    hooks = path / ".git" / "hooks"
    (hooks / "prepare-commit-msg").write_text(_marker_hook(marker, "person"))
    (hooks / "prepare-commit-msg").chmod(0o755)
    (hooks / "post-commit").write_text(_marker_hook(marker, "disabled-post-commit"))
    (hooks / "post-commit").chmod(0o644)
    return path


def _git_state(repo: Path) -> dict[str, Any]:
    """Every configuration file of ``repo``'s ``.git`` with its bytes and mode (links
    as their target), by its path."""
    out: dict[str, Any] = {}
    top = repo / ".git"
    for where in ("config", "hooks", "info"):
        start = top / where
        paths = [start] if not start.is_dir() or start.is_symlink() else sorted(
            p for p in start.rglob("*"))
        for path in paths:
            rel = path.relative_to(top).as_posix()
            if path.is_symlink():
                out[rel] = f"-> {os.readlink(path)}"
            elif path.is_file():
                out[rel] = (path.read_bytes(), stat.S_IMODE(path.lstat().st_mode))
    return out


def _plant(marker: Path, passwd_link: str) -> str:
    """The agent's shell command: a hook, config that runs programs, attributes, the
    person's disabled hook enabled, the person's hook appended to, a hook that is a
    link, and the hooks ``core.hooksPath = x`` points at (a file of the project)."""
    evil = _marker_hook(marker, "PLANTED").replace("'", "'\\''")
    return " && ".join([
        f"printf '%s' '{evil}' > .git/hooks/pre-commit",
        "chmod 755 .git/hooks/pre-commit",
        "printf '[core]\\n\\thooksPath = x\\n' >> .git/config",
        "printf '[includeIf \"gitdir:/\"]\\n\\tpath = evil.config\\n' >> .git/config",
        f"printf '[core]\\n\\tfsmonitor = \"echo FSMONITOR >> {marker}\"\\n' > .git/evil.config",
        "printf '* filter=evil\\n' > .git/info/attributes",
        "chmod 755 .git/hooks/post-commit",
        f"printf 'echo PLANTED-IN-PERSON-HOOK >> {marker}\\n' >> .git/hooks/prepare-commit-msg",
        f"ln -s {passwd_link} .git/hooks/commit-msg",
        "mkdir -p x",
        f"printf '%s' '{evil}' > x/pre-commit",
        "chmod 755 x/pre-commit",
    ])


def _profiles() -> dict[str, AgentProfile]:
    hostile = AgentProfile(name="hostile", protocol="acp",
                           command=(sys.executable, str(HOSTILE)))
    return {**BUILTIN_PROFILES, "hostile": hostile}


@pytest.fixture
async def hsrv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Server]:
    root = tmp_path / "projects"
    root.mkdir()
    monkeypatch.setenv("MOCK_AGENT_STATE_DIR", str(tmp_path / "mock-state"))
    async with running_server(tmp_path / "data", profiles=_profiles(),
                              projects=Projects(roots=(root.resolve(),))) as srv:
        yield srv


async def _sh(ws: WsClient, sid: str, command: str) -> str:
    answer = await shell(ws, sid, command)
    assert answer["rc"] == 0, answer
    return str(answer["turn_id"])


def _changes(sid: str, turn_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: (f["action"] == "session.turn.changes"
                      and f["payload"]["session_id"] == sid
                      and f["payload"]["turn_id"] == turn_id)


def _passwd() -> bytes:
    return Path("/etc/passwd").read_bytes()


def _plain(*args: str, stdin: bytes = b"") -> str:
    """Plain git of the test's own (no config of the machine's)."""
    return subprocess.run(["git", *args], input=stdin, env=GIT_ENV, capture_output=True,
                          check=True, timeout=60).stdout.decode().strip()


def _person_commits(repo: Path) -> None:
    """The person's next commit, with plain git and no config of the machine's."""
    (repo / "a.txt").write_text("the person's next edit\n")
    subprocess.run(["git", "commit", "-qam", "mine"], cwd=repo, env=GIT_ENV, check=True,
                   capture_output=True, timeout=60)


async def test_what_an_agent_plants_in_git_is_listed_and_reverted_and_never_runs(
        hsrv: Server, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    project = _user_repo(tmp_path / "projects" / "p", marker)
    before = _git_state(project)
    passwd = _passwd()
    with trio.fail_after(120):
        async with ws_client(hsrv) as ws:
            task = await ws.call("task.create", {"title": "t", "project_dir": "p"})
            session = await ws.call("session.launch", {"task_id": task["id"],
                                                       "agent": "hostile"})
            sid = str(session["id"])
            await ws.call("session.subscribe", {"session_id": sid})
            turn = await _sh(ws, sid, _plant(marker, "/etc/passwd"))
            files = (await ws.wait_for(_changes(sid, turn)))["payload"]["files"]
            listed = {f["path"]: f["status"] for f in files}
            assert listed == {
                ".git/config": "modified",
                ".git/hooks/pre-commit": "added",
                ".git/hooks/commit-msg": "added",
                ".git/hooks/post-commit": "modified",  # its mode: made executable
                ".git/hooks/prepare-commit-msg": "modified",
                ".git/info/attributes": "added",
                "x/pre-commit": "added",
            }, listed
            # The diff of the config shows what was added to it.
            diff = await ws.call("turn.diff", {"session_id": sid, "turn_id": turn,
                                               "path": ".git/config"})
            assert "+\thooksPath = x" in diff["diff"] and "includeIf" in diff["diff"]
            answer = await ws.call("turn.revert", {"session_id": sid, "turn_id": turn})
            assert answer["success"] is True and answer["kept"] == []
    # Byte for byte and mode for mode; the link removed as a link.
    assert _git_state(project) == before
    assert not (project / ".git" / "hooks" / "commit-msg").is_symlink()
    assert _passwd() == passwd
    assert not (project / "x").exists()
    _person_commits(project)
    assert marker.read_text() == "person\n"


# -- variants through the engine --------------------------------------------------------


def _repo(tmp_path: Path, project: Path, **settings: Any) -> ShadowRepo:
    return ShadowRepo.for_session(tmp_path / "data", "s1", project,
                                  settings=CheckpointSettings(**settings))


def _digest(root: Path) -> dict[str, str]:
    """Every file and link under ``root`` (``.git`` included, links not followed).
    Directories are left out: like every checkpoint's, the ``.git`` part records
    files, so a directory emptied by the revert goes (``objects/info`` of a
    repository without alternates: git makes it again when it needs it)."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = f"-> {os.readlink(path)}"
            elif not stat.S_ISDIR(st.st_mode):
                out[rel] = f"{oct(st.st_mode)} {hashlib.sha256(path.read_bytes()).hexdigest()}"
    return out


async def _listed(repo: ShadowRepo, old: Checkpoint, new: Checkpoint) -> dict[str, str]:
    return {c.path: c.status for c in await repo.changes(old, new)}


async def test_a_submodules_git_dir_and_links_where_git_expects_directories(
        tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    project = _user_repo(tmp_path / "p", marker)
    module = project / ".git" / "modules" / "lib" / "inner"
    module.mkdir(parents=True)
    (module / "HEAD").write_text("ref: refs/heads/main\n")
    (module / "config").write_text("[core]\n\tbare = false\n")
    (module / "hooks").mkdir()
    (module / "hooks" / "post-update.sample").write_text("#!/bin/sh\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "pre-commit").write_text("#!/bin/sh\necho OUTSIDE\n")
    repo = _repo(tmp_path, project)
    start = await repo.snapshot("turn start")
    original = _digest(project)
    outside_before = _digest(outside)
    # The turn: the submodule's hook and config, a link in place of the hooks
    # directory (git would follow it), alternates, a remote of the legacy kind, and
    # a rebase whose todo runs a program.
    (module / "hooks" / "post-checkout").write_text("#!/bin/sh\necho PLANTED\n")
    (module / "config").write_text("[core]\n\tfsmonitor = echo PLANTED\n")
    hooks = project / ".git" / "hooks"
    hooks.rename(tmp_path / "moved-hooks")
    hooks.symlink_to(outside)
    (project / ".git" / "objects" / "info" / "alternates").write_text(f"{outside}\n")
    (project / ".git" / "remotes").mkdir()
    (project / ".git" / "remotes" / "origin").write_text("URL: ext::sh -c evil\n")
    (project / ".git" / "rebase-merge").mkdir()
    (project / ".git" / "rebase-merge" / "git-rebase-todo").write_text("exec evil\n")
    end = await repo.snapshot("turn end")
    listed = await _listed(repo, start, end)
    assert listed[".git/modules/lib/inner/hooks/post-checkout"] == "added"
    assert listed[".git/modules/lib/inner/config"] == "modified"
    assert listed[".git/hooks"] == "added"  # the link
    assert listed[".git/hooks/prepare-commit-msg"] == "deleted"
    assert listed[".git/objects/info/alternates"] == "added"
    assert listed[".git/remotes/origin"] == "added"
    assert listed[".git/rebase-merge/git-rebase-todo"] == "added"
    result = await repo.restore(start)
    assert result.kept == ()
    assert _digest(project) == original
    assert _digest(outside) == outside_before  # the link was removed, never written through
    # Reverting the revert brings the turn's state back (its safety checkpoint).
    await repo.restore(result.safety)
    assert (project / ".git" / "hooks").is_symlink()
    assert (module / "hooks" / "post-checkout").exists()


async def test_a_worktrees_git_file_re_pointed_is_put_back(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    main = _user_repo(tmp_path / "main", marker)
    tree = tmp_path / "wt"
    git(main, "worktree", "add", "-q", "-b", "side", str(tree))
    pointer = (tree / ".git").read_bytes()
    repo = _repo(tmp_path, tree)
    start = await repo.snapshot("turn start")
    evil = tmp_path / "evil.git"
    _plain("init", "-q", "--bare", str(evil))
    (tree / ".git").write_text(f"gitdir: {evil}\n")
    end = await repo.snapshot("turn end")
    assert await _listed(repo, start, end) == {".git": "modified"}
    await repo.restore(start)
    assert (tree / ".git").read_bytes() == pointer
    assert git(tree, "rev-parse", "--abbrev-ref", "HEAD").strip() == "side"


async def test_a_hook_too_large_to_save_is_still_listed_and_removed(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    project = _user_repo(tmp_path / "p", marker)
    repo = _repo(tmp_path, project, max_file_mb=0.01)
    start = await repo.snapshot("turn start")
    person = (project / ".git" / "hooks" / "prepare-commit-msg").read_bytes()
    padding = "#" * 20_000 + "\n"
    planted = project / ".git" / "hooks" / "pre-commit"
    planted.write_text(_marker_hook(marker, "PLANTED") + padding)
    planted.chmod(0o755)
    grown = project / ".git" / "hooks" / "prepare-commit-msg"
    grown.write_text(_marker_hook(marker, "PLANTED") + padding)
    end = await repo.snapshot("turn end")
    listed = await _listed(repo, start, end)
    assert listed[".git/hooks/pre-commit"] == "added"
    assert listed[".git/hooks/prepare-commit-msg"] == "modified"
    result = await repo.restore(start)
    assert [p for p, _ in result.removed_unsaved] == [".git/hooks/pre-commit"]
    assert not planted.exists() and grown.read_bytes() == person
    _person_commits(project)
    assert marker.read_text() == "person\n"


async def test_the_persons_later_edit_of_the_config_is_said_and_a_fifo_hangs_nothing(
        tmp_path: Path) -> None:
    project = _user_repo(tmp_path / "p", tmp_path / "marker")
    config = (project / ".git" / "config").read_bytes()
    repo = _repo(tmp_path, project)
    start = await repo.snapshot("turn start")
    os.mkfifo(project / ".git" / "info" / "attributes")
    (project / ".git" / "config").write_bytes(config + b"[alias]\n\tst = !evil\n")
    end = await repo.snapshot("turn end")
    assert await _listed(repo, start, end) == {".git/config": "modified",
                                               ".git/info/attributes": "added"}
    (project / ".git" / "config").write_bytes(config + b"[user]\n\tname = Me\n")
    with trio.fail_after(30):
        result = await repo.restore(start, since=end, overwrite=[".git/config"])
    assert result.edited_since == (".git/config",)
    assert (project / ".git" / "config").read_bytes() == config
    assert not (project / ".git" / "info" / "attributes").exists()


async def test_a_checkpoint_without_the_git_part_leaves_git_alone(tmp_path: Path) -> None:
    """A checkpoint written before ``.git`` was recorded says nothing of it: a restore
    to it must not take the person's hooks and config for deleted."""
    project = _user_repo(tmp_path / "p", tmp_path / "marker")
    repo = _repo(tmp_path, project)
    new = await repo.snapshot("now")
    # The old checkpoint's tree: the same commit's, without its ".git" entry.
    listing = git(project, "--git-dir", str(repo.git_dir), "ls-tree", new.tree)
    kept = "".join(line + "\n" for line in listing.splitlines()
                   if not line.endswith("\t.git"))
    tree = _plain("--git-dir", str(repo.git_dir), "mktree", stdin=kept.encode())
    commit = _plain("--git-dir", str(repo.git_dir), "commit-tree", tree, stdin=b"old\n")
    old = Checkpoint(commit=commit, tree=tree, label="old")
    before = _git_state(project)
    assert ".git/config" not in await _listed(repo, old, new)
    result = await repo.restore(old)
    assert not [p for p in (*result.deleted, *result.written) if p.startswith(".git")]
    assert _git_state(project) == before


async def test_a_worktree_pointer_is_put_back_and_another_worktree_left_working(
        tmp_path: Path) -> None:
    """The project's linked worktrees: one's ``commondir`` re-pointed at the agent's
    repository is put back; one made meanwhile (another session's worktree, made by
    Turnvisor while this turn ran) keeps its pointers, so it still works."""
    project = _user_repo(tmp_path / "p", tmp_path / "marker")
    git(project, "worktree", "add", "-q", "-b", "b", str(tmp_path / "b"))
    admin = project / ".git" / "worktrees" / "b"
    commondir = (admin / "commondir").read_bytes()
    repo = _repo(tmp_path, project)
    start = await repo.snapshot("turn start")
    evil = tmp_path / "evil.git"
    _plain("init", "-q", "--bare", str(evil))
    (admin / "commondir").write_text(f"{evil}\n")
    git(project, "worktree", "add", "-q", "-b", "c", str(tmp_path / "c"))
    end = await repo.snapshot("turn end")
    listed = await _listed(repo, start, end)
    assert listed[".git/worktrees/b/commondir"] == "modified"
    assert listed[".git/worktrees/c/gitdir"] == "added"
    await repo.restore(start)
    assert (admin / "commondir").read_bytes() == commondir
    assert git(tmp_path / "b", "rev-parse", "--abbrev-ref", "HEAD").strip() == "b"
    assert git(tmp_path / "c", "rev-parse", "--abbrev-ref", "HEAD").strip() == "c"
