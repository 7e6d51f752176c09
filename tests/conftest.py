from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.server import Server, running_server

os.environ.setdefault("TURNVISOR_LOG", "WARNING")


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    async with running_server(tmp_path / "data") as srv:
        yield srv
