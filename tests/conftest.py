from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support import frames_check
from tests.support.browser_session import (  # noqa: F401 (session fixtures, shared)
    browser,
    chromium_path,
    playwright_instance,
)
from tests.support.server import Server, running_server

os.environ.setdefault("TURNVISOR_LOG", "WARNING")
# Every frame a WebSocket test exchanges is checked against the published schema.
frames_check.enabled = True


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    async with running_server(tmp_path / "data") as srv:
        yield srv
