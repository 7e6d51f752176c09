"""Issue 40 item 5: project roots never contain the data dir, and a project is
never inside it (DESIGN.md §17), each tried as the attack.

The attack seen: `turnvisor serve` started in ``$HOME`` made ``$HOME`` the
default project root, and ``$HOME`` holds the default data dir
(``~/.local/share/turnvisor``): another workspace's agent browsed and poisoned
this workspace's shadow repos.  And a task whose project was
``DATA_DIR/checkpoints`` let its agent plant a filter in its own shadow repo.

- the start directory as default root, ``--project-root`` and ``[projects]
  roots``: a root that is, holds or lies in the data dir (by a symlink, ``..``,
  ``~``, a path relative to the data dir) is refused at start with one line
  naming the fix, exit status 2; a sibling directory is accepted;
- ``task.create``: a ``project_dir`` that is, holds or lies in the data dir
  (absolute, through a link in a root, through ``..``) is refused with one line;
  so is a project swapped for such a link after its task was created;
- by identity: a bind mount of the home (as a root) or of ``DATA_DIR/checkpoints``
  (inside a root) names the same directories under another path; both are
  refused (root only, in a mount namespace of the test's own).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from supervisor.config import Config, ConfigError, Projects
from tests.support.server import running_server
from tests.support.serverproc import REPO_ROOT, ServerProcess
from tests.support.ws import ws_client

TOKEN = "roots-test-token-0123456789-0123456789"
HINT = ("pass --project-root DIR to `turnvisor serve`, or set [projects] roots in "
        "turnvisor.toml")
_LISTENING = re.compile(r"Turnvisor listening on (http://[^\s/]+)")


def _home(tmp_path: Path) -> tuple[Path, Path]:
    """A person's home holding Turnvisor's default data dir (with checkpoints,
    as after a first turn), and a source directory beside it."""
    home = (tmp_path / "home").resolve()
    data = home / ".local" / "share" / "turnvisor"
    (data / "checkpoints").mkdir(parents=True)
    (home / "src" / "app").mkdir(parents=True)
    return home, data


def _env(home: Path) -> dict[str, str]:
    """`turnvisor serve` as the person runs it: the data dir is the default one."""
    env = {**os.environ, "HOME": str(home), "TURNVISOR_TOKEN": TOKEN,
           "TURNVISOR_LOG": "WARNING", "PYTHONUNBUFFERED": "1"}
    for name in ("TURNVISOR_DATA_DIR", "XDG_DATA_HOME"):
        env.pop(name, None)
    return env


def _serve(*args: str) -> list[str]:
    return [sys.executable, "-m", "web", "serve", "--host", "127.0.0.1", "--port", "0", *args]


async def _refused(cmd: Sequence[str], cwd: Path, env: dict[str, str]) -> str:
    """The one line of a start that must not happen (exit status 2)."""
    with trio.fail_after(30):
        done = await trio.run_process(list(cmd), stdin=subprocess.DEVNULL, capture_stdout=True,
                                      capture_stderr=True, check=False, env=env, cwd=cwd)
    assert b"listening" not in done.stdout, done.stdout
    lines = done.stderr.decode(errors="replace").splitlines()
    assert done.returncode == 2, (done.returncode, lines)
    assert len(lines) == 1 and lines[0].startswith("turnvisor: configuration error: "), lines
    assert HINT in lines[0], lines
    return lines[0]


@asynccontextmanager
async def _serving(cmd: Sequence[str], cwd: Path, env: dict[str, str],
                   data: Path) -> AsyncIterator[ServerProcess]:
    """A `turnvisor serve` that must start; stopped (SIGTERM) at the end."""
    log_path = data.parent / "serve.log"
    with log_path.open("ab") as log:
        proc = await trio.lowlevel.open_process(list(cmd), stdin=subprocess.DEVNULL,
                                                stdout=subprocess.PIPE, stderr=log, env=env,
                                                cwd=cwd)
    assert proc.stdout is not None
    try:
        text = ""
        with trio.fail_after(30):
            while (found := _LISTENING.search(text)) is None:
                chunk = await proc.stdout.receive_some(4096)
                assert chunk, f"serve exited ({await proc.wait()}): {log_path.read_text()}"
                text += chunk.decode(errors="replace")
        yield ServerProcess(found.group(1), TOKEN, data, log_path, proc=proc)
    finally:
        with trio.CancelScope(shield=True):
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                with trio.move_on_after(15):
                    await proc.wait()
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            await proc.stdout.aclose()


# -- the start directory, the command line, the configuration file ----------------------


@pytest.mark.parametrize("where", ["home", "data dir", "checkpoints"])
async def test_serve_started_where_the_data_dir_is_refuses_in_one_line(
    tmp_path: Path, where: str
) -> None:
    home, data = _home(tmp_path)
    cwd = {"home": home, "data dir": data, "checkpoints": data / "checkpoints"}[where]
    line = await _refused(_serve(), cwd, _env(home))
    what = {"home": f"contains Turnvisor's data dir {data}",
            "data dir": f"is Turnvisor's data dir ({data})",
            "checkpoints": f"is inside Turnvisor's data dir {data}"}[where]
    assert line.startswith(f"turnvisor: configuration error: the start directory {cwd}, the "
                           f"default project root (no roots configured), {what}; "), line
    # Nothing was opened: no database, no server file.
    assert not (data / "turnvisor.db").exists() and not (data / "server.json").exists()


async def test_serve_from_home_with_a_project_root_beside_the_data_dir_starts(
    tmp_path: Path
) -> None:
    home, data = _home(tmp_path)
    async with _serving(_serve("--project-root", "src"), home, _env(home), data) as srv, \
            ws_client(srv) as ws:
        listed = await ws.call("project.list")
        assert listed["roots"] == [str(home / "src")]
        task = await ws.call("task.create", {"title": "t", "project_dir": "app"})
        assert task["project_dir"] == str(home / "src" / "app")
        # The attack of the issue, from the page's side: the shadow repos by name.
        frame = await ws.request("task.create", {"title": "t",
                                                 "project_dir": str(data / "checkpoints")})
        assert frame["payload"]["code"] == "VALIDATION_ERROR", frame
        assert "inside Turnvisor's data dir" in frame["payload"]["message"], frame


@pytest.mark.parametrize("root", ["home", "data dir", "checkpoints", "link to data dir",
                                  "dotdot", "slash"])
async def test_a_project_root_meeting_the_data_dir_is_refused_at_start(
    tmp_path: Path, root: str
) -> None:
    home, data = _home(tmp_path)
    (tmp_path / "link").symlink_to(data)
    given = {"home": str(home), "data dir": str(data), "checkpoints": str(data / "checkpoints"),
             "link to data dir": str(tmp_path / "link"),
             "dotdot": str(home / "src" / ".." / ".local" / "share" / "turnvisor"),
             "slash": "/"}[root]
    line = await _refused(_serve("--project-root", str(home / "src"), "--project-root", given),
                          REPO_ROOT, _env(home))
    assert f"--project-root {given!r} (" in line and "Turnvisor's data dir" in line, line


@pytest.mark.parametrize("roots", [
    ["~"], ["~/"], ["{home}"], ["{data}"], ["{data}/checkpoints"], ["checkpoints"], ["."],
    ["../.."], ["{link}"], ["{link}/checkpoints"], ["{home}/src", "{home}/src/../.."],
])
def test_configured_roots_meeting_the_data_dir_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, roots: list[str]
) -> None:
    home, data = _home(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "link").symlink_to(data)
    named = [r.format(home=home, data=data, link=tmp_path / "link") for r in roots]
    (data / "turnvisor.toml").write_text(f"[projects]\nroots = {named!r}\n".replace("'", '"'))
    with pytest.raises(ConfigError) as err:
        Config.load(data)
    message = str(err.value)
    assert "\n" not in message and HINT in message, message
    assert message.startswith(f"[projects] root {named[-1]!r} ("), message
    assert "Turnvisor's data dir" in message, message


def test_a_sibling_of_the_data_dir_is_a_root(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    home, data = _home(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    (data / "turnvisor.toml").write_text('[projects]\nroots = ["~/src", "../../../src"]\n')
    assert Config.load(data).projects.roots == (home / "src", home / "src")
    # A directory whose name merely begins like the data dir's is not inside it.
    (data.parent / "turnvisor-other").mkdir()
    cfg = Config.load(data, project_roots=[str(data.parent / "turnvisor-other")])
    assert cfg.projects.roots == (data.parent / "turnvisor-other",)


def test_every_config_keeps_its_roots_clear_of_the_data_dir(tmp_path: Path) -> None:
    """However a Config is built (overrides, a replace), not only from the file."""
    home, data = _home(tmp_path)
    with pytest.raises(ConfigError, match="contains Turnvisor's data dir"):
        Config.from_mapping(data, {}, projects=Projects(roots=(home,)))
    cfg = Config.from_mapping(data, {}, projects=Projects(roots=(home / "src",)))
    with pytest.raises(ConfigError, match="is inside Turnvisor's data dir"):
        Config(data_dir=cfg.data_dir, projects=Projects(roots=(data / "checkpoints",)))


async def test_a_config_read_from_home_serves_no_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commands that serve no projects (backup, agentctl --profile) still read
    the config from the home; a server built from it anyway (not `serve`, which
    refuses to start) refuses every project, its sibling directories included."""
    home, data = _home(tmp_path)
    monkeypatch.chdir(home)
    cfg = Config.load(data)
    assert cfg.projects.roots == (home,) and cfg.projects.start_dir
    assert Config(data_dir=data).db_path == data / "turnvisor.db"
    with pytest.raises(ConfigError, match=re.escape(
            f"the start directory {home}, the default project root (no roots configured), "
            f"contains Turnvisor's data dir {data}; {HINT}")):
        cfg.check_start_dir()
    async with running_server(data) as srv, ws_client(srv) as ws:
        for raw in ("src/app", str(data / "checkpoints"), ".local"):
            frame = await ws.request("task.create", {"title": "t", "project_dir": raw})
            assert frame["payload"]["code"] == "VALIDATION_ERROR", frame
            assert HINT in frame["payload"]["message"], frame
        frame = await ws.request("project.browse", {})
        assert frame["payload"]["code"] == "VALIDATION_ERROR", frame


# -- task.create, project.browse, and a project swapped afterwards ---------------------


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A root of projects and, beside it, the data dir (with its checkpoints)."""
    root = (tmp_path / "projects").resolve()
    (root / "app").mkdir(parents=True)
    data = tmp_path.resolve() / "data"
    (data / "checkpoints").mkdir(parents=True)
    (root / "ckpt").symlink_to(data / "checkpoints")
    (root / "up").symlink_to(tmp_path)
    return root, data


async def test_task_create_refuses_a_project_meeting_the_data_dir(
    layout: tuple[Path, Path]
) -> None:
    root, data = layout
    hostile = {
        str(data / "checkpoints"): "is inside",
        str(data): "is Turnvisor's data dir",
        str(data.parent): "contains",
        "ckpt": "is inside",
        "ckpt/..": "is Turnvisor's data dir",
        "../data/checkpoints": "is inside",
        str(root / "app" / ".." / ".." / "data" / "checkpoints"): "is inside",
        "up": "contains",
        "up/data": "is Turnvisor's data dir",
    }
    async with running_server(data, projects=Projects(roots=(root,))) as srv, \
            ws_client(srv) as ws:
        for raw, says in hostile.items():
            frame = await ws.request("task.create", {"title": "t", "project_dir": raw})
            assert frame["type"] == "error" and frame["payload"]["code"] == "VALIDATION_ERROR", \
                (raw, frame)
            message = frame["payload"]["message"]
            assert says in message and "\n" not in message, (raw, message)
            frame = await ws.request("project.browse", {"path": raw})
            assert frame["payload"]["code"] == "VALIDATION_ERROR", (raw, frame)
        task = await ws.call("task.create", {"title": "t", "project_dir": "app"})
        assert task["project_dir"] == str(root / "app")
        listed = await ws.call("project.browse", {})
        assert [d["name"] for d in listed["dirs"]] == ["app"]


async def test_a_project_swapped_for_a_link_into_the_data_dir_is_refused_at_launch(
    layout: tuple[Path, Path]
) -> None:
    """The task was made on a plain directory; then the agent (it can write the
    project's parent here) swapped it for a link to the shadow repos."""
    root, data = layout
    async with running_server(data, projects=Projects(roots=(root,))) as srv, \
            ws_client(srv) as ws:
        task = await ws.call("task.create", {"title": "t", "project_dir": "app"})
        (root / "app").rename(root / "app.old")
        (root / "app").symlink_to(data / "checkpoints")
        frame = await ws.request("session.launch", {"task_id": task["id"], "agent": "mock"})
        assert frame["payload"]["code"] == "VALIDATION_ERROR", frame
        assert "is inside Turnvisor's data dir" in frame["payload"]["message"], frame
        assert not list((data / "checkpoints").iterdir())


# -- by identity: the same directories under another name (bind mounts) ---------------


def _can_bind() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return False
    done = subprocess.run([unshare, "-m", "true"], capture_output=True, check=False)
    return done.returncode == 0


needs_bind = pytest.mark.skipif(not _can_bind(),
                                reason="bind mounts need root and unshare -m")


def _bound(source: Path, target: Path, cmd: Sequence[str]) -> list[str]:
    """``cmd`` in a mount namespace of its own where ``target`` shows ``source``."""
    return ["unshare", "-m", "sh", "-c", 'mount --bind "$1" "$2" && shift 2 && exec "$@"',
            "sh", str(source), str(target), *cmd]


@needs_bind
async def test_a_bind_mount_of_the_home_as_root_is_refused(tmp_path: Path) -> None:
    home, data = _home(tmp_path)
    alias = tmp_path / "alias"
    alias.mkdir()
    line = await _refused(_bound(home, alias, _serve("--project-root", str(alias))),
                          REPO_ROOT, _env(home))
    assert f"--project-root {str(alias)!r} ({alias}) contains Turnvisor's data dir {data}" \
        in line, line


@needs_bind
async def test_a_bind_mount_of_the_checkpoints_inside_a_root_is_no_project(
    tmp_path: Path
) -> None:
    home, data = _home(tmp_path)
    alias = home / "src" / "shadow"
    alias.mkdir()
    cmd = _bound(data / "checkpoints", alias, _serve("--project-root", str(home / "src")))
    async with _serving(cmd, REPO_ROOT, _env(home), data) as srv, ws_client(srv) as ws:
        for raw in ("shadow", str(alias)):
            frame = await ws.request("task.create", {"title": "t", "project_dir": raw})
            assert frame["payload"]["code"] == "VALIDATION_ERROR", frame
            assert f"({alias}) is inside Turnvisor's data dir {data}" in \
                frame["payload"]["message"], frame
        listed = await ws.call("project.browse", {})
        assert [d["name"] for d in listed["dirs"]] == ["app"]
        task = await ws.call("task.create", {"title": "t", "project_dir": "app"})
        assert task["project_dir"] == str(home / "src" / "app")
