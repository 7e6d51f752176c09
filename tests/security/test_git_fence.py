"""Issue 40 item 4 (first half): git on a repository an agent can write runs in
a fence of its own (DESIGN.md §12, §17), each tried as the attack.

The attack seen: the agent writes its project's ``.git/config``.  A
``[includeIf "onbranch:turnvisor/**"]`` (or a ``gitdir:`` pattern matching only
a linked worktree's git dir) pulls in a file that defines a smudge filter, and
``.gitattributes`` names it for every file.  Turnvisor's driver listing runs
before ``git worktree add`` and cannot see it (HEAD is not the new branch yet),
so the filter ran, as the backend's user, outside every sandbox.  Here the
program still runs (the tests check it did: the fence, not the overrides, is
what holds), inside git's fence, and

- writes nothing outside the repository's git dir and the new worktree (a
  marker in the work tree and one in the test's tmp dir never appear);
- reads nothing of the data dir (the token it cats is not there);
- reaches no network (a listener on 127.0.0.1 gets no connection; an abstract
  unix socket of the host is unreachable);
- and the worktree is still made as committed, and removed with its session.

Also: hooks and ``core.fsmonitor`` named in an included file never run (the
overrides, defence in depth); a ref directory planted in ``.git`` as a symlink
to a directory outside makes the add fail, writing nothing there; a ``.git``
that is a link is refused with one line; a data dir moved away refuses git.
Each attack has its control: plain git on the same plant does run it or write
outside, so every assertion here can fail.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from protocols.git_fence import fence_for
from protocols.sandbox import HiddenDir, bwrap_works
from supervisor.config import Projects
from supervisor.workspace.checkpoints import GitError, GitRunner
from tests.support.git import git
from tests.support.server import TOKEN, Server, running_server
from tests.support.sessions import launch_subscribed
from tests.support.ws import WsClient, ws_client

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot run here")

#: The forms of conditional include that apply only after the listing.
INCLUDES = {
    "onbranch": '[includeIf "onbranch:turnvisor/**"]',
    "gitdir": '[includeIf "gitdir:**/worktrees/**"]',
}


@pytest.fixture
def projects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "projects"
    root.mkdir()
    monkeypatch.setenv("MOCK_AGENT_STATE_DIR", str(tmp_path / "mock-state"))
    return root.resolve()


@pytest.fixture
async def server(tmp_path: Path, projects: Path) -> AsyncIterator[Server]:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    # The secret a planted program goes for.
    (data / "token").write_text(TOKEN + "\n")
    async with running_server(data, projects=Projects(roots=(projects,))) as srv:
        yield srv


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A TCP listener on the host's loopback and one on an abstract unix socket:
    what a program in the fence must not reach.  Non-blocking: ``accept`` after
    the attack says whether anything connected (the kernel completes a
    connection to a listening socket whether or not it is accepted)."""
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    tcp.setblocking(False)
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(f"\0turnvisor-git-fence-{os.getpid()}")
    unix.listen(8)
    unix.setblocking(False)
    with tcp, unix:
        yield tcp, unix


def _nothing_connected(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


def _read(path: Path) -> str:
    return path.read_text()


def _exists(path: Path) -> bool:
    return path.exists()


def _repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("one\n")
    (path / "b.txt").write_text("two\n")
    (path / ".gitattributes").write_text("* filter=evil\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "first")
    return path


def _program(repo: Path, name: str, body: str) -> Path:
    """An executable in the repository's ``.git`` (the agent writes there)."""
    script = repo / ".git" / name
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return script


def _evil_filter(repo: Path, tmp_path: Path, data: Path,
                 listener: tuple[socket.socket, socket.socket]) -> Path:
    """A smudge filter that logs that it ran (in ``.git``, writable in the
    fence), writes markers outside, steals the token, calls home, and passes
    the file through (so a checkout still succeeds)."""
    port = listener[0].getsockname()[1]
    abstract = listener[1].getsockname()
    net = (f"import socket\n"
           f"for fam, addr in ((socket.AF_INET, ('127.0.0.1', {port})),"
           f" (socket.AF_UNIX, {abstract!r})):\n"
           f"    s = socket.socket(fam, socket.SOCK_STREAM)\n"
           f"    s.settimeout(2)\n"
           f"    try:\n"
           f"        s.connect(addr); print(fam, 'CONNECTED')\n"
           f"    except OSError as e:\n"
           f"        print(fam, 'failed', e)\n")
    (repo / ".git" / "net.py").write_text(net)
    g = repo / ".git"
    return _program(repo, "evil.sh", f"""echo "ran $*" >> {g}/evil-ran
echo owned > {repo}/PWNED
echo owned > {tmp_path}/PWNED
cat {data}/token {data}/turnvisor.db >> {g}/stolen 2>&1
{sys.executable} {g}/net.py >> {g}/net 2>&1
cat
""")


def _include(repo: Path, form: str, config: str) -> None:
    (repo / ".git" / "evil.cfg").write_text(config)
    with (repo / ".git" / "config").open("a") as f:
        f.write(f"{INCLUDES[form]}\n\tpath = evil.cfg\n")


async def _task(ws: WsClient, project: str) -> dict[str, Any]:
    task: dict[str, Any] = await ws.call("task.create", {"title": "t", "project_dir": project})
    return task


def _plain_worktree_add(repo: Path, where: Path) -> subprocess.CompletedProcess[str]:
    """What git does with the plant when nothing fences it (the control)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "worktree", "add", "-q", "-b", "turnvisor/control",
                           str(where), "HEAD"], cwd=repo, env=env, capture_output=True,
                          text=True, check=False)


@pytest.mark.parametrize("form", sorted(INCLUDES))
async def test_a_filter_included_for_the_new_branch_runs_fenced(
        server: Server, projects: Path, tmp_path: Path, form: str,
        listener: tuple[socket.socket, socket.socket]) -> None:
    repo = _repo(projects / "app")
    evil = _evil_filter(repo, tmp_path, server.data_dir, listener)
    _include(repo, form, f'[filter "evil"]\n\tsmudge = {evil} smudge\n\trequired = true\n')
    with trio.fail_after(60):
        async with ws_client(server) as ws:
            task = await _task(ws, "app")
            session = await launch_subscribed(ws, task["id"], worktree=True)
            wt = Path(session["worktree"]["path"])
            # Made as committed (the filter passes its input through).
            assert (wt / "a.txt").read_text() == "one\n"
            assert (wt / "b.txt").read_text() == "two\n"
            assert git(wt, "rev-parse", "--abbrev-ref", "HEAD") == session["worktree"]["branch"]
            # The planted program did run: what held it is the fence.
            assert "ran smudge" in (repo / ".git" / "evil-ran").read_text()
            assert not (repo / "PWNED").exists()
            assert not (tmp_path / "PWNED").exists()
            stolen = (repo / ".git" / "stolen").read_text()
            assert TOKEN not in stolen and "SQLite format" not in stolen, stolen
            net = (repo / ".git" / "net").read_text()
            assert "CONNECTED" not in net and net.count("failed") >= 2, net
            assert _nothing_connected(listener[0]) and _nothing_connected(listener[1])
            await ws.call("session.delete", {"session_id": session["id"]})
            assert not _exists(wt)
            assert session["worktree"]["branch"] not in git(repo, "branch", "--list")
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    # Control: unfenced, the same plant writes outside the repository.
    assert _plain_worktree_add(repo, tmp_path / "control").returncode == 0
    assert (repo / "PWNED").exists() and (tmp_path / "PWNED").exists()


async def test_hooks_and_fsmonitor_from_an_included_file_never_run(
        server: Server, projects: Path, tmp_path: Path) -> None:
    repo = _repo(projects / "app")
    (repo / ".gitattributes").unlink()  # no filter here: hooks and fsmonitor only
    git(repo, "commit", "-qam", "no attributes")
    ran = repo / ".git" / "ran"
    hooks = repo / ".git" / "evil-hooks"
    hooks.mkdir()
    for hook in ("post-checkout", "reference-transaction", "post-index-change"):
        for where in (hooks, repo / ".git" / "hooks"):
            script = where / hook
            script.write_text(f"#!/bin/sh\necho {where.name}/{hook} >> {ran}\n"
                              f"echo owned > {tmp_path}/PWNED\n")
            script.chmod(0o755)
    monitor = _program(repo, "monitor.sh", f"echo fsmonitor >> {ran}\n")
    _include(repo, "onbranch", f"[core]\n\thooksPath = {hooks}\n\tfsmonitor = {monitor}\n")
    with trio.fail_after(60):
        async with ws_client(server) as ws:
            task = await _task(ws, "app")
            session = await launch_subscribed(ws, task["id"], worktree=True)
            assert _read(Path(session["worktree"]["path"], "a.txt")) == "one\n"
            await ws.call("session.delete", {"session_id": session["id"]})
    assert not ran.exists(), ran.read_text()
    assert not (tmp_path / "PWNED").exists()
    # Control: plain git runs the included hooks and fsmonitor.
    assert _plain_worktree_add(repo, tmp_path / "control").returncode == 0
    text = ran.read_text()
    assert "evil-hooks/" in text and "fsmonitor" in text, text


async def test_a_ref_directory_linked_outside_is_written_by_nobody(
        server: Server, projects: Path, tmp_path: Path) -> None:
    repo = _repo(projects / "app")
    victim = tmp_path / "victim"
    victim.mkdir()
    (repo / ".git" / "refs" / "heads" / "turnvisor").symlink_to(victim)
    with trio.fail_after(60):
        async with ws_client(server) as ws:
            task = await _task(ws, "app")
            frame = await ws.request("session.launch", {"task_id": task["id"],
                                                        "agent": "mock", "worktree": True})
            assert frame["payload"]["code"] == "VALIDATION_ERROR"
            assert "git worktree add failed" in frame["payload"]["message"]
            assert (await ws.call("session.list", {"task_id": task["id"]}))["sessions"] == []
    assert os.listdir(victim) == []
    assert os.listdir(server.data_dir / "worktrees") == [".git-home"]
    # Control: plain git writes the new branch's ref into the linked directory.
    _plain_worktree_add(repo, tmp_path / "control")
    assert os.listdir(victim) == ["control"]


async def test_a_git_dir_that_is_a_link_is_refused(server: Server, projects: Path,
                                                    tmp_path: Path) -> None:
    real = _repo(tmp_path / "elsewhere")
    link = projects / "app"
    link.mkdir()
    (link / ".git").symlink_to(real / ".git")
    with trio.fail_after(60):
        async with ws_client(server) as ws:
            task = await _task(ws, "app")
            frame = await ws.request("session.launch", {"task_id": task["id"],
                                                        "agent": "mock", "worktree": True})
            assert frame["payload"]["code"] == "VALIDATION_ERROR"
            assert ".git is not a directory" in frame["payload"]["message"]
    assert git(real, "branch", "--list") == "* main"


async def test_a_program_git_runs_in_the_fence_sees_no_hidden_dir_and_writes_nothing(
        tmp_path: Path) -> None:
    """The fence itself, through ``GitRunner``: a hidden directory inside a
    visible one is empty, the visible one read-only, only ``writable`` writable."""
    repo = _repo(tmp_path / "repo")
    secret = repo / "secret"
    secret.mkdir()
    (secret / "token").write_text(TOKEN)
    out = tmp_path / "out"
    out.mkdir()
    fence = await trio.to_thread.run_sync(fence_for, [HiddenDir.record(secret)])
    assert fence is not None
    runner = GitRunner(tmp_path / "home", fence=fence)
    probe = (f"!cat {secret}/token; echo owned > {repo}/PWNED; echo owned > {out}/written; "
             f"ls {secret}")
    done = await runner.run(["-c", f"alias.probe={probe}", "probe"], cwd=repo, check=False,
                            visible=[repo], writable=[out])
    assert TOKEN.encode() not in done
    assert not (repo / "PWNED").exists()
    assert (out / "written").read_text() == "owned\n"
    # Control: the same alias unfenced reads the token.
    plain = await GitRunner(tmp_path / "home").run(["-c", f"alias.probe={probe}", "probe"],
                                                   cwd=repo, check=False)
    assert TOKEN.encode() in plain


async def test_a_moved_data_dir_refuses_git_and_a_linked_path_is_not_bound(
        tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    data = tmp_path / "data"
    data.mkdir()
    fence = await trio.to_thread.run_sync(fence_for, [HiddenDir.record(data)])
    assert fence is not None
    runner = GitRunner(tmp_path / "home", fence=fence)
    assert await runner.run(["rev-parse", "HEAD"], cwd=repo, visible=[repo])
    # A link on the way to a writable path: refused, never followed.
    (tmp_path / "link").symlink_to(repo)
    with pytest.raises(GitError, match="is a symbolic link"):
        await runner.run(["rev-parse", "HEAD"], cwd=repo, visible=[repo],
                         writable=[tmp_path / "link" / ".git"])
    # The data dir renamed away and a decoy left at its path.
    data.rename(tmp_path / "moved")
    data.mkdir()
    with pytest.raises(GitError, match="refusing to run git rev-parse"):
        await runner.run(["rev-parse", "HEAD"], cwd=repo, visible=[repo])


def _running(needle: str) -> list[int]:
    """The pids whose command line holds ``needle``."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path("/proc", pid, "cmdline").read_bytes()
            except OSError:
                continue
            if needle.encode() in cmdline:
                found.append(int(pid))
    return found


async def test_a_fenced_git_that_hangs_is_stopped_with_everything_it_started(
        tmp_path: Path) -> None:
    """A planted program that never returns (here an alias; in the attack, a
    filter) holds the command no longer than its bound, and nothing it started
    outlives it."""
    repo = _repo(tmp_path / "repo")
    fence = await trio.to_thread.run_sync(fence_for, [])
    assert fence is not None
    runner = GitRunner(tmp_path / "home", fence=fence)
    needle = f"{os.getpid() % 1000}.31415"
    started = trio.current_time()
    with pytest.raises(GitError, match="took longer than 1 s"):
        await runner.run(["-c", f"alias.hang=!sleep {needle} & sleep {needle}", "hang"],
                         cwd=repo, visible=[repo], timeout_s=1)
    assert trio.current_time() - started < 1 + 2 + 2  # the bound, SIGTERM's grace, slack
    await trio.sleep(0.2)
    assert _running(f"sleep {needle}") == []
