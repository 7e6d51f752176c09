"""A hostile agent re-points the names the sandbox binds (issue 40, item 1).

Every writable path is opened component by component without following a
link an agent could have planted, and bwrap binds the descriptor: the inode
reached, whatever the name says by the time bwrap mounts it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import trio

from protocols.fence_paths import PathRefused, open_by_identity
from protocols.sandbox import SandboxError, bwrap_works, wrap
from supervisor.config import Projects
from tests.support.server import running_server
from tests.support.ws import RequestFailed, ws_client

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot run here")


def _run(launch_argv: list[str], fds: tuple[int, ...],
         cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(launch_argv, pass_fds=fds, cwd=cwd, capture_output=True, text=True,
                          timeout=60, check=False)


def _victim(tmp_path: Path) -> Path:
    """What the agent wants writable: a stand-in for /etc."""
    victim = tmp_path / "etc"
    victim.mkdir()
    (victim / "passwd").write_text("root:x:0:0\n")
    return victim


def test_a_home_planted_as_a_symlink_is_refused(tmp_path: Path) -> None:
    """CODEX_HOME named by the profile, not made yet: the agent made it first,
    as a link to where it wants to write."""
    victim = _victim(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / ".codex").symlink_to(victim)
    env = {"HOME": str(tmp_path / "home"), "CODEX_HOME": str(work / ".codex")}
    with pytest.raises(SandboxError, match="symbolic link"):
        wrap(["true"], "bwrap", cwd=str(work), env=env, hide=[], untrusted=[str(work)])


def test_a_project_whose_parent_became_a_symlink_is_refused(tmp_path: Path) -> None:
    """The agent renamed its project's parent and left a link to /etc there."""
    victim = _victim(tmp_path)
    root = tmp_path / "projects"
    (root / "team" / "app").mkdir(parents=True)
    (root / "team").rename(root / "team.old")
    (root / "team").symlink_to(victim)
    (victim / "app").mkdir()
    env = {"HOME": str(tmp_path / "home")}
    with pytest.raises(SandboxError, match="symbolic link"):
        wrap(["true"], "bwrap", cwd=str(root / "team" / "app"), env=env, hide=[],
             untrusted=[str(root)])
    with pytest.raises(PathRefused):
        open_by_identity(str(root / "team" / "app"), untrusted=[str(root)])


def test_the_bind_is_the_inode_opened_not_the_name(tmp_path: Path) -> None:
    """Opened, then swapped before bwrap mounts: the agent still writes where it
    was given, and the decoy's target is untouched."""
    victim = _victim(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    env = {"HOME": str(tmp_path / "home")}
    with wrap(["sh", "-c", "echo planted > out.txt"], "bwrap", cwd=str(work), env=env,
              hide=[], untrusted=[str(tmp_path)]) as launch:
        work.rename(tmp_path / "work.moved")
        work.symlink_to(victim)
        done = _run(launch.argv, launch.pass_fds, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "work.moved" / "out.txt").read_text() == "planted\n"
    assert sorted(p.name for p in victim.iterdir()) == ["passwd"]


def test_a_missing_home_is_made_without_following_links(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".config").symlink_to(victim)
    with pytest.raises(PathRefused, match="symbolic link"):
        open_by_identity(str(home / ".config" / "tool"), untrusted=[str(home)], create=True)
    assert sorted(p.name for p in victim.iterdir()) == ["passwd"]
    made = open_by_identity(str(home / "fresh" / "deep"), untrusted=[str(home)], create=True)
    try:
        assert made.is_dir and (home / "fresh" / "deep").is_dir()
        st = os.stat(home / "fresh" / "deep")
        assert made.identity == (st.st_dev, st.st_ino)
    finally:
        os.close(made.fd)


def test_a_link_outside_agent_trees_is_the_systems_and_followed(tmp_path: Path) -> None:
    """``/bin`` → ``usr/bin`` and a person's own links are not an agent's."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (tmp_path / "link").symlink_to(mine)
    opened = open_by_identity(str(tmp_path / "link"), untrusted=[str(tmp_path / "agent")])
    try:
        assert opened.real == str(mine)
    finally:
        os.close(opened.fd)
    if os.path.islink("/bin"):
        bin_dir = open_by_identity("/bin")
        try:
            assert bin_dir.real == os.path.realpath("/bin")
        finally:
            os.close(bin_dir.fd)


async def test_a_project_swapped_after_its_task_was_made_is_refused(tmp_path: Path) -> None:
    """The project dir's identity is recorded at ``task.create``: the same path
    naming another directory later (moved away, a look-alike in its place)
    gets the launch refused, saying why; the original still launches."""
    root = tmp_path / "projects"
    app = root / "app"
    app.mkdir(parents=True)
    (app / "README").write_text("the real one\n")
    with trio.fail_after(60):
        async with running_server(tmp_path / "data", projects=Projects(roots=(root,))) as srv, \
                ws_client(srv) as ws:
            task = await ws.call("task.create", {"title": "t", "project_dir": str(app)})
            other = await ws.call("task.create", {"title": "u", "project_dir": str(app)})
            first = await ws.call("session.launch", {"task_id": task["id"], "agent": "mock"})
            assert first["cwd"] == str(app)
            app.rename(root / "app.moved")
            app.mkdir()
            (app / "README").write_text("a look-alike\n")
            with pytest.raises(RequestFailed) as refused:
                await ws.call("session.launch", {"task_id": other["id"], "agent": "mock"})
            assert "not the project directory recorded" in str(refused.value.frame)
            # Put back: it launches again.
            app.rename(root / "look-alike")
            (root / "app.moved").rename(app)
            again = await ws.call("session.launch", {"task_id": other["id"], "agent": "mock"})
            assert again["cwd"] == str(app)
