from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ssh.sshd import Sshd, running_sshd
from tests.ssh.throwaway_user import throwaway_user


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    with running_sshd(tmp_path / "sshd") as server:
        yield server


@pytest.fixture(params=["this user", "a throwaway user"])
def login_sshd(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sshd]:
    """The server, logging in as the current user, then as one made for the run."""
    if request.param == "this user":
        with running_sshd(tmp_path / "sshd") as server:
            yield server
        return
    with throwaway_user() as user, running_sshd(tmp_path / "sshd", user=user) as server:
        yield server
