from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ssh.sshd import Sshd, running_sshd


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    with running_sshd(tmp_path / "sshd") as server:
        yield server
