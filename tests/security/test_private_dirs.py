"""The backend's own private directories, made the fence's one way
(``open_by_identity(..., private_below=...)``, DESIGN.md §17): the ssh
executor's socket directory (``control_dir``) and a detached agentctl's run
and socket directories (``turnvisor agentctl --detach``).  Each may lie in a
tree another user can write first (the shared temporary directory): a
symlink planted at its name, another user's directory there, or one open to
others is refused, saying which and why; nothing is made through it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocols.fence_paths import PathRefused
from supervisor.executors.ssh_host import control_dir
from tests.support.shared_tmp import deep_data_dir, tempdir_of_this_process

NOBODY = 65534
needs_root = pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")


@pytest.fixture
def shared_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A sticky, world-writable directory standing in for /tmp, made this
    process's temporary directory."""
    with tempdir_of_this_process(monkeypatch) as shared:
        yield shared


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    return victim


# --- the ssh executor's socket directory -------------------------------------------------


def test_control_dir_is_made_private_and_leaves_the_shared_dir_alone(
        tmp_path: Path, shared_tmp: Path) -> None:
    near = control_dir(shared_tmp / "data")
    assert near == shared_tmp / "data" / "ssh"
    far = control_dir(deep_data_dir(tmp_path))
    assert far.parent == shared_tmp
    for made in (near, far):
        st = os.lstat(made)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
        assert st.st_uid == os.geteuid()
    assert stat.S_IMODE(os.stat(shared_tmp).st_mode) == 0o1777
    assert control_dir(deep_data_dir(tmp_path)) == far  # found again, as a later backend does


def test_control_dir_planted_as_a_symlink_is_refused(tmp_path: Path, shared_tmp: Path) -> None:
    victim = _victim(tmp_path)
    data = shared_tmp / "data"
    data.mkdir()
    (data / "ssh").symlink_to(victim)
    with pytest.raises(PathRefused, match=r"ssh sockets: .*/data/ssh is a symbolic link"):
        control_dir(data)
    # The same under the shared temporary directory, where anyone can plant it first.
    far = shared_tmp / control_dir(deep_data_dir(tmp_path)).name
    far.rmdir()
    far.symlink_to(victim)
    with pytest.raises(PathRefused, match="symbolic link"):
        control_dir(deep_data_dir(tmp_path))
    assert list(victim.iterdir()) == []


def test_control_dir_open_to_others_is_refused(shared_tmp: Path) -> None:
    data = shared_tmp / "data"
    (data / "ssh").mkdir(parents=True)
    os.chmod(data / "ssh", 0o777)
    with pytest.raises(PathRefused, match=r"ssh sockets: .* is open to other users \(mode 0777"):
        control_dir(data)
    assert stat.S_IMODE(os.stat(data / "ssh").st_mode) == 0o777  # refused, not taken over


@needs_root
def test_control_dir_of_another_user_is_refused(tmp_path: Path, shared_tmp: Path) -> None:
    far = shared_tmp / control_dir(deep_data_dir(tmp_path)).name
    far.rmdir()
    far.mkdir(0o700)
    os.chown(far, NOBODY, NOBODY)
    with pytest.raises(PathRefused, match=f"belongs to uid {NOBODY}, not to this user"):
        control_dir(deep_data_dir(tmp_path))


# --- a detached agentctl's run directory and socket directory ----------------------------


def _detach(data: Path, shared: Path, work: Path) -> subprocess.CompletedProcess[str]:
    """``turnvisor agentctl --detach`` as the backend runs it on a host; stopped
    again at once should it have started (a refusal starts nothing)."""
    env = {**os.environ, "TURNVISOR_DATA_DIR": str(data), "TMPDIR": str(shared)}
    name = "instance/session"
    try:
        return subprocess.run(
            [sys.executable, "-m", "web", "agentctl", "--detach", name, "--protocol", "acp",
             "--cwd", str(work), "--sandbox", "none", "--",
             sys.executable, "-m", "protocols.mock_agent"],
            input='{"token": "' + "t" * 40 + '", "env": {}}\n', env=env,
            capture_output=True, text=True, timeout=60, check=False)
    finally:
        subprocess.run([sys.executable, "-m", "web", "hosts", "stop", name], env=env,
                       capture_output=True, timeout=60, check=False)


def test_detached_run_dir_planted_as_a_symlink_is_refused(
        tmp_path: Path, shared_tmp: Path) -> None:
    victim = _victim(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / "agentctl").symlink_to(victim)
    done = _detach(data, shared_tmp, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "data/agentctl is a symbolic link" in done.stderr, done.stderr
    assert list(victim.iterdir()) == []


def test_detached_run_dir_open_to_others_is_refused(tmp_path: Path, shared_tmp: Path) -> None:
    data = tmp_path / "data"
    (data / "agentctl").mkdir(parents=True, mode=0o700)
    (data / "agentctl" / "instance").mkdir()
    os.chmod(data / "agentctl", 0o700)
    os.chmod(data / "agentctl" / "instance", 0o755)
    done = _detach(data, shared_tmp, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "agentctl/instance is open to other users (mode 0755" in done.stderr, done.stderr
    assert not (data / "agentctl" / "instance" / "session").exists()


@needs_root
def test_detached_socket_dir_of_another_user_is_refused(
        tmp_path: Path, shared_tmp: Path) -> None:
    """A deep data dir puts the socket under the temporary directory: a
    directory another user made there first under its name is not used."""
    theirs = shared_tmp / f"turnvisor-agentctl-{os.getuid()}"
    theirs.mkdir(0o777)
    os.chmod(theirs, 0o777)
    os.chown(theirs, NOBODY, NOBODY)
    done = _detach(deep_data_dir(tmp_path), shared_tmp, tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"{theirs} belongs to uid {NOBODY}, not to this user" in done.stderr, done.stderr
    assert list(theirs.iterdir()) == []
