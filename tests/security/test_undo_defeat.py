"""Issue 40 item 11, "undo cannot be defeated", written as the attacks.

A hostile agent writes its project so that the turn's checkpoint misses its work or
fails: a directory thousands of levels deep (it made every later snapshot fail and the
revert answer ``INTERNAL_ERROR``), files hidden by ignore rules it wrote itself (a root
or nested ``.gitignore``, the project's ``.git/info/exclude``, ``core.excludesFile`` in
the project's ``.git/config``, an ignore-all ``*``), names git refuses or cannot
decode.  Each is played through the real checkpoint engine (``ShadowRepo`` with real
git), and the first ones again through a real server and the real mock agent over the
WebSocket API: the agent's files are listed as the turn's changes (``ignored`` where
the rules hide them), the revert removes them, and a normal turn afterwards still gets
its checkpoints, changes and revert.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.config import Projects
from supervisor.workspace.checkpoints import ShadowRepo
from supervisor.workspace.checkpoints.walk import MAX_STORABLE_PATH
from tests.supervisor.checkpoints.support import repo_for, tree_bytes
from tests.support.server import Server, running_server
from tests.support.sessions import launch_subscribed
from tests.support.ws import WsClient, is_turn_completed, ws_client


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "keep.txt").write_text("original\n")
    return root


def _deep(root: Path, levels: int, name: bytes = b"d") -> str:
    """``levels`` nested directories under ``root`` (made through descriptors, as a
    shell loop of ``mkdir d; cd d`` would: no path is ever longer than one name) and a
    file at the bottom; returns the top directory's name."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        out = os.open(b"bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, b"hidden at the bottom\n")
        os.close(out)
    finally:
        os.close(fd)
    return name.decode()


async def _normal_turn_still_works(repo: ShadowRepo, project: Path) -> None:
    before = await repo.snapshot("a later, normal turn")
    (project / "keep.txt").write_text("changed by a normal turn\n")
    after = await repo.snapshot("its end")
    assert [(c.path, c.status) for c in await repo.changes(before, after)] == [
        ("keep.txt", "modified")]
    await repo.restore(before)
    assert (project / "keep.txt").read_text() == "original\n"


@pytest.mark.parametrize("levels", [1100, 5000])
async def test_a_deep_directory_neither_breaks_snapshots_nor_survives_the_revert(
        tmp_path: Path, project: Path, levels: int) -> None:
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("turn start")
    original = tree_bytes(project)
    top = _deep(project, levels)
    with trio.fail_after(60):
        end = await repo.snapshot("turn end")
        changes = await repo.changes(start, end)
        listed = {c.path.split("/", 1)[0] for c in changes} | {
            s.path.split("/", 1)[0] for s in end.skipped}
        assert top in listed
        if levels * 2 >= MAX_STORABLE_PATH:
            # Beyond what git can hold: listed whole, as unstorable.
            assert [s.reason for s in end.skipped] == ["unstorable"]
        result = await repo.restore(start)
    assert not (project / top).exists()
    assert tree_bytes(project) == original
    if levels * 2 >= MAX_STORABLE_PATH:
        assert next(r for _, r in result.removed_unsaved).startswith("unstorable")
    await _normal_turn_still_works(repo, project)


def _hide(project: Path, variant: str) -> str:
    """The agent writes an ignore rule of ``variant`` and a file it hides; returns
    that file's path."""
    if variant == "root .gitignore":
        (project / ".gitignore").write_text("secret.txt\n")
        path = "secret.txt"
    elif variant == "nested .gitignore":
        (project / "sub").mkdir()
        (project / "sub/.gitignore").write_text("*.bin\n")
        path = "sub/payload.bin"
    elif variant == "ignore everything":
        (project / ".gitignore").write_text("*\n")
        path = "tools/run.sh"
    elif variant in ("info/exclude", "core.excludesFile"):
        subprocess.run(["git", "init", "-q", str(project)], check=True,
                       env={**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null",
                            "GIT_CONFIG_NOSYSTEM": "1"})
        if variant == "info/exclude":
            (project / ".git/info").mkdir(exist_ok=True)
            (project / ".git/info/exclude").write_text("hook.py\n")
        else:
            (project / ".git/my-excludes").write_text("hook.py\n")
            with (project / ".git/config").open("a") as f:
                f.write(f"[core]\n\texcludesFile = {project / '.git/my-excludes'}\n")
        path = "hook.py"
    else:
        raise AssertionError(variant)
    target = project / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("planted by the agent\n")
    return path


VARIANTS = ["root .gitignore", "nested .gitignore", "ignore everything", "info/exclude",
            "core.excludesFile"]


@pytest.mark.parametrize("variant", VARIANTS)
async def test_a_file_hidden_by_the_agents_own_ignore_rule_is_listed_and_reverted(
        tmp_path: Path, project: Path, variant: str) -> None:
    if variant in ("info/exclude", "core.excludesFile"):
        # The rule lives in a repository the project already was (the agent edits it).
        _hide(project, variant)
        (project / "hook.py").unlink()
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("turn start")
    before = tree_bytes(project)
    hidden = _hide(project, variant)
    end = await repo.snapshot("turn end")
    statuses = {c.path: c.status for c in await repo.changes(start, end)}
    assert statuses.get(hidden) in ("ignored", "added"), statuses
    if variant != "core.excludesFile":  # the shadow repository never reads that config
        assert statuses[hidden] == "ignored"
    result = await repo.restore(start)
    assert not (project / hidden).exists()
    assert {p: v for p, v in tree_bytes(project).items() if not p.startswith(".git/")} == {
        p: v for p, v in before.items() if not p.startswith(".git/")}
    if statuses[hidden] == "ignored":
        assert hidden in [p for p, _ in result.removed_unsaved]
    await _normal_turn_still_works(repo, project)


async def test_an_ignored_file_that_was_there_before_the_turn_is_left_alone(
        tmp_path: Path, project: Path) -> None:
    """The other side of the rule: an ignored file the turn did not create (a build
    output, an ``.env``) is not removed by a revert (its content is in no checkpoint)."""
    (project / ".gitignore").write_text(".env\n")
    (project / ".env").write_text("TOKEN=mine\n")
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("turn start")
    (project / ".env").write_text("TOKEN=edited\n")
    end = await repo.snapshot("turn end")
    assert ".env" not in {c.path for c in await repo.changes(start, end)}
    result = await repo.restore(start)
    assert (project / ".env").read_text() == "TOKEN=edited\n"
    assert result.removed_unsaved == ()


HOSTILE_NAMES: list[bytes] = [
    b"new\nline.txt",
    b"latin1-\xe9\xff.txt",
    b".GIT",  # git refuses it as a path component: it made every `git add` fail
    b"GIT~1",
    b"x" * 255,
    b" leading and trailing ",
    b"-rf",
    b"*[?]\\",
]


def _plant(path: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"agent\n")
    os.close(fd)


async def test_hostile_names_neither_raise_nor_survive_the_revert(tmp_path: Path,
                                                                  project: Path) -> None:
    repo = repo_for(tmp_path, project)
    start = await repo.snapshot("turn start")
    before = tree_bytes(project)
    root = os.fsencode(project)
    for name in HOSTILE_NAMES:
        os.mkdir(os.path.join(root, b"dir-" + name[:200]))
        _plant(os.path.join(root, b"dir-" + name[:200], name))
        _plant(os.path.join(root, name))
    (project / ".gitignore").write_text("dir-*\n")
    end = await repo.snapshot("turn end")
    seen = {os.fsencode(c.path) for c in await repo.changes(start, end)} | {
        os.fsencode(s.path) for s in end.skipped}
    for name in HOSTILE_NAMES:
        assert name in seen or name.lower() == b".git", name
        assert b"dir-" + name[:200] + b"/" + name in seen or name.lower() == b".git", name
    assert b".GIT" in seen and b"dir-.GIT/.GIT" in seen
    await repo.restore(start)
    assert tree_bytes(project) == before
    await _normal_turn_still_works(repo, project)


# -- through the server and the WebSocket API, the mock agent as the attacker ------


@pytest.fixture
async def psrv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Server]:
    root = tmp_path / "projects"
    root.mkdir()
    monkeypatch.setenv("MOCK_AGENT_STATE_DIR", str(tmp_path / "mock-state"))
    async with running_server(tmp_path / "data",
                              projects=Projects(roots=(root.resolve(),))) as srv:
        yield srv


async def _turn(ws: WsClient, sid: str, prompt: str) -> str:
    after = len(ws.notifications)
    msg = await ws.call("message.add", {"session_id": sid, "content": prompt})
    await ws.wait_for(is_turn_completed(sid), after=after, timeout=30)
    return str(msg["turn_id"])


def _changes(sid: str, turn_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: (f["action"] == "session.turn.changes"
                      and f["payload"]["session_id"] == sid
                      and f["payload"]["turn_id"] == turn_id)


def _tool_call(sid: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: (f["action"] == "session.message.added"
                      and f["payload"]["session_id"] == sid
                      and f["payload"]["message"]["kind"] == "tool_call")


async def test_through_the_api_deep_and_hidden_files_are_listed_and_reverted(
        psrv: Server, tmp_path: Path) -> None:
    project = tmp_path / "projects" / "p"
    project.mkdir()
    (project / "keep.txt").write_text("original\n")
    deep = "/".join(["d"] * 1100) + "/bottom.txt"  # as _deep makes it
    with trio.fail_after(120):
        async with ws_client(psrv) as ws:
            task = await ws.call("task.create", {"title": "t", "project_dir": "p"})
            sid = (await launch_subscribed(ws, task["id"]))["id"]
            # The deep tree, made while a turn runs (as the agent's shell would: the
            # mock's own /write cannot make a path that deep): listed, and the next
            # turns still get their checkpoints.
            after = len(ws.notifications)
            t1 = str((await ws.call("message.add", {"session_id": sid,
                                                    "content": "/edits 10"}))["turn_id"])
            await ws.wait_for(_tool_call(sid), after=after, timeout=30)
            top = _deep(project, 1100)
            await ws.wait_for(is_turn_completed(sid), after=after, timeout=30)
            files = (await ws.wait_for(_changes(sid, t1)))["payload"]["files"]
            assert (deep, "added") in [(f["path"], f["status"]) for f in files]
            assert top == "d"
            # The agent's own ignore-everything rule, then a file it hides.
            t2 = await _turn(ws, sid, "/write .gitignore *")
            await ws.wait_for(_changes(sid, t2))
            t3 = await _turn(ws, sid, "/write tools/backdoor.sh planted")
            files = (await ws.wait_for(_changes(sid, t3)))["payload"]["files"]
            assert {(f["path"], f["status"]) for f in files} == {
                ("tools/backdoor.sh", "ignored")}
            answer = await ws.call("turn.revert", {"session_id": sid, "turn_id": t3})
            assert answer["removed_unsaved"][0]["path"] == "tools/backdoor.sh"
            assert not (project / "tools").exists()
            # Back to before the deep tree: everything the agent made is gone.
            answer = await ws.call("turn.revert", {"session_id": sid, "turn_id": t1})
            assert answer["success"] is True
            assert not (project / "d").exists() and not (project / ".gitignore").exists()
            assert sorted(os.listdir(project)) == ["keep.txt"]
            # A normal turn afterwards: changes listed, revert works.
            t4 = await _turn(ws, sid, "/write keep.txt changed")
            files = (await ws.wait_for(_changes(sid, t4)))["payload"]["files"]
            assert [(f["path"], f["status"]) for f in files] == [("keep.txt", "modified")]
            await ws.call("turn.revert", {"session_id": sid, "turn_id": t4})
            assert (project / "keep.txt").read_text() == "original\n"
