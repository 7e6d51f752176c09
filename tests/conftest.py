from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from helpers import Server, running_server  # noqa: E402

os.environ.setdefault("TURNVISOR_LOG", "WARNING")


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    async with running_server(tmp_path / "data") as srv:
        yield srv
