"""A real server in the test's nursery: ``web.server.serve`` on loopback, port 0."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from supervisor.config import Config
from supervisor.root import Supervisor
from web.server import serve

__all__ = ["OTHER_TOKEN", "TOKEN", "Server", "running_server"]

#: At least 32 characters: the server refuses shorter tokens.
TOKEN = "test-token-0123456789abcdef-0123456789"
OTHER_TOKEN = "other-token-0123456789abcdef-0123456789"


@dataclass
class Server:
    url: str
    token: str
    sup: Supervisor
    stop: trio.Event
    data_dir: Path

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/ws"

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@asynccontextmanager
async def running_server(data_dir: Path, *, timeouts: dict[str, float] | None = None,
                         workspaces: dict[str, str] | None = None,
                         start_timeout: float = 30, checkpoints: bool = False,
                         trace_cancels: bool = True, **config: Any) -> AsyncIterator[Server]:
    """``timeouts``: the config's ``[timeouts]``; ``workspaces``: name → token;
    ``config``: other ``Config`` fields.  Without ``projects`` there, turn checkpoints
    are off unless ``checkpoints`` (tests/support/serverproc.py ``NO_CHECKPOINTS`` says why).
    ``trace_cancels``: the cancel path's tracing hook, on for tests (they read its counters)."""
    raw: dict[str, Any] = {"timeouts": timeouts or {},
                           "server": {"trace_cancels": trace_cancels}}
    if "projects" not in config and not checkpoints:
        raw["projects"] = {"checkpoints": False}
    if workspaces:
        raw["workspaces"] = {name: {"token": tok} for name, tok in workspaces.items()}
    cfg = Config.from_mapping(data_dir, raw, **config)
    stop = trio.Event()
    ready: list[Server] = []

    async with trio.open_nursery() as nursery:
        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            def on_ready(url: str, sup: Supervisor) -> None:
                ready.append(Server(url, TOKEN, sup, stop, data_dir))
                task_status.started()

            await serve(cfg, host="127.0.0.1", port=0, token=TOKEN, on_ready=on_ready, stop=stop)

        with trio.fail_after(start_timeout):
            await nursery.start(run)
        try:
            yield ready[0]
        finally:
            stop.set()
