"""An agent plants programs where the backend might look them up (issue 40, item 3).

The backend's own programs (git, bwrap, env, sh, the network helper) are
resolved once, at start, from directories no agent can write.  Each attack
plants a ``git`` (and the others) that would leave a mark when run, in a
directory at the front of ``PATH``, and runs the backend's git: the planted
one never runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocols import tools
from supervisor.config import Config, ConfigError
from supervisor.workspace.checkpoints import GitRunner
from supervisor.workspace.sandboxing import check_sandbox, resolve_tools


@pytest.fixture(autouse=True)
def _restore_installed() -> Iterator[None]:
    saved = list(tools._installed)
    yield
    tools._installed[:] = saved


def _plant(directory: Path, mark: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in tools.TOOL_NAMES:
        prog = directory / name
        prog.write_text(f"#!/bin/sh\necho {name} >> {mark}\nexit 0\n")
        prog.chmod(0o755)


def _real_git() -> str:
    """git as the resolver names it: in the real path of the first system
    directory that has it."""
    for d in tools.DEFAULT_SEARCH:
        if os.path.exists(os.path.join(d, "git")):
            return os.path.join(os.path.realpath(d), "git")
    raise AssertionError("no git on this machine")


@pytest.mark.parametrize("where", ["agent-home", "project-root", "work-dir", "tmp",
                                   "profile-writable"])
async def test_planted_git_on_path_never_runs(where: str, tmp_path: Path, outside_tmp: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    data = outside_tmp / "data"
    root = outside_tmp / "projects"
    extra = outside_tmp / "cache"
    planted = {
        "agent-home": data / "homes" / "default" / "codex" / ".local" / "bin",
        "project-root": root / "proj" / "node_modules" / ".bin",
        "work-dir": data / "work" / "default" / "s1" / "bin",
        "tmp": tmp_path / "bin",
        "profile-writable": extra / "bin",
    }[where]
    mark = outside_tmp / "ran"
    _plant(planted, mark)
    monkeypatch.setenv("PATH", f"{planted}{os.pathsep}{os.environ['PATH']}")
    root.mkdir(exist_ok=True)
    config = Config.from_mapping(data, {
        "projects": {"roots": [str(root)]},
        "agents": {"x": {"protocol": "acp", "command": ["x"],
                         "sandbox_writable": [str(extra)]}},
    })
    await check_sandbox(config)
    resolved = tools.current()
    assert resolved.git == _real_git()
    for name in ("env", "sh"):
        assert not resolved.need(name).startswith(str(planted))
    assert any(entry == str(planted) for entry, _ in resolved.skipped)
    repo = outside_tmp / "repo"
    repo.mkdir()
    out = await GitRunner(outside_tmp / "git-home").run(["init", "-q", "."], cwd=repo)
    assert out == b"" and (repo / ".git").is_dir()
    assert not mark.exists(), mark.read_text()


def test_world_and_group_writable_dirs_are_skipped(outside_tmp: Path) -> None:
    mark = outside_tmp / "ran"
    world = outside_tmp / "world"
    group = outside_tmp / "group"
    _plant(world, mark)
    _plant(group, mark)
    world.chmod(0o777)
    group.chmod(0o775)
    os.chown(group, -1, os.getgid())
    resolved = tools.resolve(f"{world}{os.pathsep}{group}")
    assert resolved.git == _real_git()
    reasons = dict(resolved.skipped)
    assert "every user" in reasons[str(world)]
    assert "group" in reasons[str(group)]


def test_a_directory_below_another_users_is_skipped(outside_tmp: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to make a directory owned by another user")
    mark = outside_tmp / "ran"
    theirs = outside_tmp / "theirs"
    _plant(theirs / "bin", mark)
    os.chown(theirs, 65534, 65534)
    resolved = tools.resolve(str(theirs / "bin"))
    assert resolved.git == _real_git()
    assert "owned by uid 65534" in dict(resolved.skipped)[str(theirs / "bin")]


def test_a_trusted_link_into_an_agent_tree_is_not_followed(outside_tmp: Path) -> None:
    """A link in a trusted directory whose target lies where agents write."""
    mark = outside_tmp / "ran"
    agent_tree = outside_tmp / "project"
    _plant(agent_tree / "bin", mark)
    linkdir = outside_tmp / "links"
    linkdir.mkdir()
    (linkdir / "git").symlink_to(agent_tree / "bin" / "git")
    resolved = tools.resolve(str(linkdir), untrusted=[str(agent_tree)])
    assert resolved.git == _real_git()


def test_unsandboxed_agents_trust_only_roots_directories(outside_tmp: Path) -> None:
    """With an agent outside every fence, the user's own directories are its too."""
    if os.getuid() == 0:
        pytest.skip("root's directories are root's: nothing to tell apart")
    mine = outside_tmp / "mine"
    _plant(mine, outside_tmp / "ran")
    assert tools.resolve(str(mine), owner_ok=True).git == str(mine / "git")
    assert tools.resolve(str(mine), owner_ok=False).git == _real_git()


def test_tools_path_replaces_path(outside_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = outside_tmp / "mine"
    mine.mkdir()
    real = _real_git()
    (mine / "git").symlink_to(real)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    (outside_tmp / "projects").mkdir()
    mine.rename(outside_tmp / "projects" / "mine")
    mine = outside_tmp / "projects" / "mine"
    config = Config.from_mapping(outside_tmp / "data", {
        "server": {"tools_path": [str(mine)]},
        "projects": {"roots": [str(outside_tmp / "projects")]}})
    # The tools path itself inside a project root: skipped, the defaults answer.
    resolved = resolve_tools(config, unsandboxed=False)
    assert str(mine) in dict(resolved.skipped)
    assert resolved.git == real
    (outside_tmp / "elsewhere").mkdir()
    elsewhere = Config.from_mapping(outside_tmp / "data", {
        "server": {"tools_path": [str(mine)]},
        "projects": {"roots": [str(outside_tmp / "elsewhere")]}})
    # Outside every agent tree: its git (a link to the system's) is the one used.
    assert resolve_tools(elsewhere, unsandboxed=False).git == str(mine / "git")
    assert str(mine) not in dict(resolve_tools(elsewhere, unsandboxed=False).skipped)


def test_a_missing_program_says_what_to_do(outside_tmp: Path) -> None:
    resolved = tools.resolve(str(outside_tmp), names=["no-such-program-here"])
    with pytest.raises(tools.ToolsError, match="tools_path"):
        resolved.need("no-such-program-here")


def test_config_rejects_a_relative_tools_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tools_path"):
        Config.from_mapping(tmp_path, {"server": {"tools_path": ["bin"]}})
