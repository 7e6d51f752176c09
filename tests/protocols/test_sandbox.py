"""The bubblewrap sandbox: the argv it builds, and real bwrap keeping the
process-group teardown intact (issue 17, item 1)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from protocols.process import start_agent_process, terminate_group
from protocols.sandbox import (
    SandboxError,
    bwrap_works,
    resolve_mode,
    sandbox_argv,
    wrap,
    writable_paths,
)
from supervisor.profiles import ProfileError, parse_profiles
from tests.support.leaks import processes_running


def _mounts(argv: list[str]) -> list[tuple[str, str]]:
    """(option, path) of each mount option, in order."""
    out = []
    for i, a in enumerate(argv):
        if a in ("--bind-try", "--ro-bind", "--ro-bind-try", "--dev-bind"):
            out.append((a, argv[i + 2]))
        elif a in ("--tmpfs", "--proc", "--dev"):
            out.append((a, argv[i + 1]))
        elif a == "--":
            break
    return out


def test_the_data_dir_is_hidden_after_the_binds_that_cover_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "work").mkdir(parents=True)
    home = tmp_path / "home"
    install = tmp_path / "home" / "checkout"
    argv = sandbox_argv(["agent", "--acp"], cwd=str(data / "work"), hide=[str(data)],
                        writable=[str(home), "/srv"], readonly=[str(install)], uid=0)
    mounts = _mounts(argv)
    assert mounts[:3] == [("--ro-bind", "/"), ("--dev", "/dev"), ("--proc", "/proc")]
    # The kernel's knobs read-only over the new /proc; /tmp and /var/tmp private.
    assert ("--ro-bind-try", "/proc/sys") in mounts
    private = mounts.index(("--tmpfs", "/tmp"))
    assert ("--tmpfs", "/var/tmp") in mounts
    tmpfs = mounts.index(("--tmpfs", str(data)))
    # $HOME (under /tmp here) bound back over the private /tmp, then the
    # install read-only over it, then the data dir covered, then work/ back.
    assert private < mounts.index(("--bind-try", str(home))) < \
        mounts.index(("--ro-bind-try", str(install))) < tmpfs
    assert mounts.index(("--bind-try", str(data / "work"))) > tmpfs
    assert mounts.index(("--bind-try", "/srv")) < tmpfs
    assert argv[argv.index("--chdir") + 1] == str(data / "work")
    for flag in ["--unshare-pid", "--unshare-user", "--unshare-ipc", "--unshare-uts",
                 "--die-with-parent"]:
        assert flag in argv
    # A root backend's agent is nobody in its namespace; another keeps its uid.
    assert argv[argv.index("--uid") + 1] == "65534"
    assert "--uid" not in sandbox_argv(["a"], cwd="/srv", hide=[], writable=[], uid=1000)
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert "--new-session" not in argv  # the agent stays in the group the backend signals
    # bwrap first (the leader is added at launch: Launch.sandboxed); /run hidden;
    # SIGTERM restored for the agent; the command last, untouched.
    assert argv[0] == "/usr/bin/bwrap" and ("--tmpfs", "/run") in mounts
    assert argv[-3:] == ["--default-signal=TERM", "agent", "--acp"]


def test_a_writable_path_in_the_install_is_refused(tmp_path: Path) -> None:
    install = tmp_path / "checkout"
    with pytest.raises(SandboxError, match="install"):
        sandbox_argv(["a"], cwd=str(install / "web"), hide=[], writable=[],
                     readonly=[str(install)])
    with pytest.raises(SandboxError, match="install"):
        sandbox_argv(["a"], cwd="/srv", hide=[], writable=[str(install)],
                     readonly=[str(install)])
    # A data dir kept in the checkout: its session dirs are the data dir's, not the install's.
    argv = sandbox_argv(["a"], cwd=str(install / "data" / "work"), hide=[str(install / "data")],
                        writable=[], readonly=[str(install)])
    assert ("--bind-try", str(install / "data" / "work")) in _mounts(argv)


def test_a_cwd_that_is_the_data_dir_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="hides"):
        sandbox_argv(["a"], cwd=str(tmp_path), hide=[str(tmp_path)], writable=[])
    with pytest.raises(SandboxError):
        sandbox_argv(["a"], cwd="/srv", hide=[str(tmp_path)], writable=[str(tmp_path) + "/"])
    with pytest.raises(SandboxError):
        sandbox_argv([], cwd="/srv", hide=[], writable=[])


def test_writable_paths_come_from_the_environment() -> None:
    env = {"HOME": "/h", "CODEX_HOME": "/c", "XDG_CACHE_HOME": "/h/.cache", "PATH": "/bin",
           "TMPDIR": "relative/ignored", "XDG_RUNTIME_DIR": "/tmp"}
    paths = writable_paths(env, "/w", ["/extra", "~/x"])
    assert paths[0] == "/w"
    for p in ["/h", "/c", "/h/.cache", "/extra"]:
        assert p in paths
    # /tmp is the sandbox's own (a tmpfs), never the host's bound in.
    assert "/bin" not in paths and "relative/ignored" not in paths and "/tmp" not in paths
    assert len(paths) == len(set(paths))


def test_profiles_take_a_sandbox() -> None:
    profiles = parse_profiles({"a": {"protocol": "acp", "command": ["x"], "sandbox": "none",
                                     "sandbox_writable": ["/srv/cache"]},
                               "b": {"protocol": "acp", "command": ["x"]}})
    assert profiles["a"].sandbox == "none"
    assert profiles["a"].sandbox_writable == ("/srv/cache",)
    assert profiles["b"].sandbox is None
    bads: list[dict[str, Any]] = [{"sandbox": "docker"}, {"sandbox": True},
                                  {"sandbox_writable": "/x"}, {"sandbox_writable": ["relative"]}]
    for bad in bads:
        with pytest.raises(ProfileError):
            parse_profiles({"c": {"protocol": "acp", "command": ["x"], **bad}})
    assert resolve_mode("none") == "none" and resolve_mode("bwrap") == "bwrap"
    with wrap(["x"], "none", cwd="/", env={}, hide=[]) as launch:
        assert launch.argv == ["x"] and launch.pass_fds == ()


needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot run here")

#: Records SIGTERM in its cwd, starts a child in its group and a daemon that
#: leaves it (setsid), then waits; it does not exit on stdin EOF.
TREE = """
import os, signal, subprocess, sys, time
def term(*_):
    open("got-term", "w").close()
    sys.exit(7)
signal.signal(signal.SIGTERM, term)
child = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)
daemon = subprocess.Popen(["sleep", "601"], start_new_session=True, stdin=subprocess.DEVNULL)
open("pids", "w").write(f"{os.getpid()} {child.pid} {daemon.pid}")
while True:
    time.sleep(1)
"""


def _sleepers() -> set[int]:
    """Live ``sleep 600``/``sleep 601`` processes (host pids)."""
    return (processes_running(b"sleep\x00600\x00", exact=True)
            | processes_running(b"sleep\x00601\x00", exact=True))


@needs_bwrap
@pytest.mark.parametrize("how", ["terminate", "sigkill"])
async def test_group_teardown_reaches_the_sandboxed_agent(tmp_path: Path, how: str) -> None:
    data = tmp_path / "data"
    work = data / "work"
    work.mkdir(parents=True)
    before = _sleepers()
    with trio.fail_after(30):
        with wrap([sys.executable, "-c", TREE], "bwrap", cwd=str(work), env=dict(os.environ),
                  hide=[str(data)]) as launch:
            proc = await start_agent_process(launch.argv, env=dict(os.environ), cwd=str(work),
                                             pass_fds=launch.pass_fds)
            lifeline = launch.take_lifeline()
        assert lifeline is not None
        while not (work / "pids").exists():
            await trio.sleep(0.05)
        started = _sleepers() - before
        assert len(started) == 2  # the child and the daemon
        if how == "terminate":
            # stdin EOF (ignored), SIGTERM to the group: the agent gets it and exits.
            await terminate_group(proc, grace_s=5)
            assert (work / "got-term").exists()
            assert proc.returncode == 7
        else:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            await terminate_group(proc, grace_s=1)
        # The group's child and the daemon that left the group: gone with the sandbox.
        deadline = time.monotonic() + 5
        while started & _sleepers() and time.monotonic() < deadline:
            await trio.sleep(0.05)
        assert not started & _sleepers()
        os.close(lifeline)
