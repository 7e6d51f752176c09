"""A real ``turnvisor agentctl`` process on loopback, driving the mock agent.

``agentctl`` is a factory fixture: ``async with agentctl("acp", "--cancel-join",
"0.3") as ctl`` spawns ``python -m web agentctl --listen 127.0.0.1:0`` in its
own process group (the same path the spawn-a-local-agentctl executor uses) and
tears it down, agent included, at the end.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import trio

sys.path.insert(0, str(Path(__file__).parent))

from agentctl_support import TOKEN, Agentctl, AgentctlFactory, mock_profile

from supervisor.executors.agentctl import spawn_agentctl


@pytest.fixture
def agentctl(tmp_path: Path) -> AgentctlFactory:
    @asynccontextmanager
    async def start(protocol: str = "acp", *args: str,
                    token: str = TOKEN) -> AsyncIterator[Agentctl]:
        async with spawn_agentctl(mock_profile(protocol), str(tmp_path), token, start_s=30,
                                  term_grace_s=2, extra_args=args) as (proc, url), \
                trio.open_nursery() as nursery:
            assert proc.stderr is not None
            nursery.start_soon(_drain, proc.stderr)
            async with httpx.AsyncClient(base_url=url) as http:
                yield Agentctl(url=url, token=token, process=proc, http=http)
            nursery.cancel_scope.cancel()
    return start


async def _drain(stream: trio.abc.ReceiveStream) -> None:
    """agentctl's log (stderr), echoed so a failing test shows it."""
    while True:
        try:
            data = await stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        if not data:
            return
        sys.stderr.write(data.decode(errors="replace"))
