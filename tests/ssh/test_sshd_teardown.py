"""The test sshd: up once sshd says it listens (a port another process took is
told as such), and its teardown removes the ssh socket directories its own test
made under the temporary directory, and leaves another run's alone (two runs
of the suite at the same moment share /tmp)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.executors.ssh_host import control_dir
from tests.ssh.sshd import PortTaken, running_sshd
from tests.support.shared_tmp import deep_data_dir, tempdir_of_this_process


@pytest.fixture
def shared_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory standing in for /tmp, this process's temporary directory."""
    with tempdir_of_this_process(monkeypatch) as shared:
        yield shared


def test_teardown_removes_only_its_own_socket_dirs(tmp_path: Path, shared_tmp: Path) -> None:
    own_tree, other_tree = tmp_path / "own", tmp_path / "another-run"
    own_data, other_data = deep_data_dir(own_tree), deep_data_dir(other_tree)
    for data in (own_data, other_data):
        data.mkdir(parents=True)
    with running_sshd(own_tree / "sshd"):
        own = control_dir(own_data)
        # Another run's, made while this one's server is up.
        other = control_dir(other_data)
        assert own.parent == other.parent == shared_tmp
        assert own != other
    assert not own.exists()
    assert other.is_dir()
    assert os.listdir(shared_tmp) == [other.name]


def test_a_port_taken_by_another_server_is_not_taken_for_sshd(tmp_path: Path) -> None:
    """Up is sshd's own word that it listens: a port another process holds
    (which would accept a connection) is told as taken."""
    with running_sshd(tmp_path / "sshd") as sshd:
        sshd.stop()
        with socket.create_server(("127.0.0.1", sshd.port)), pytest.raises(PortTaken):
            sshd.start()
        sshd.start()  # free again: up on the same port
        assert sshd.process is not None and sshd.process.poll() is None
