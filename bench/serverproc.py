"""``turnvisor serve`` as a subprocess on loopback, for the benchmark.

The server is a separate process (as in production), so the benchmark's
client work does not run on the server's thread.  Its agents are its
children; on exit the server is asked to stop (SIGTERM), then whatever is left
of it and of its agents' process groups is killed.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psutil
import trio

__all__ = ["ServerProcess", "running_server"]

_READY = re.compile(rb"Turnvisor listening on (http://\S+?)/\?token=(\S+)")


@dataclass
class ServerProcess:
    url: str
    token: str
    proc: trio.Process
    data_dir: Path

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/ws"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def ps(self) -> psutil.Process:
        return psutil.Process(self.proc.pid)

    def agents(self) -> list[psutil.Process]:
        """The server's agent processes (its children)."""
        try:
            return self.ps().children(recursive=True)
        except psutil.NoSuchProcess:
            return []


@asynccontextmanager
async def running_server(*, agent: str = "mock", start_timeout: float = 60,
                         keep_data: bool = False, config_toml: str | None = None,
                         base_env: Mapping[str, str] | None = None,
                         ) -> AsyncIterator[ServerProcess]:
    """``config_toml``: the data dir's ``turnvisor.toml``; ``base_env``: the server's
    environment instead of this process's (agents inherit it under their profile's)."""
    data_dir = Path(tempfile.mkdtemp(prefix="turnvisor-bench-"))
    if config_toml is not None:
        (data_dir / "turnvisor.toml").write_text(config_toml)
    token = secrets.token_urlsafe(24)
    env = {**(os.environ if base_env is None else base_env), "TURNVISOR_TOKEN": token,
           "PYTHONUNBUFFERED": "1"}
    log = (data_dir / "server.log").open("wb")
    cmd = [sys.executable, "-m", "web", "--log-level", "WARNING", "serve",
           "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir), "--agent", agent]
    proc = await trio.lowlevel.open_process(cmd, stdout=subprocess.PIPE, stderr=log, env=env)
    assert proc.stdout is not None
    agent_pids: set[int] = set()
    try:
        buf = b""
        with trio.fail_after(start_timeout):
            while not (m := _READY.search(buf)):
                chunk = await proc.stdout.receive_some(4096)
                if not chunk:
                    raise RuntimeError(f"the server exited: {_tail(data_dir)}")
                buf += chunk
        server = ServerProcess(m.group(1).decode(), m.group(2).decode(), proc, data_dir)
        try:
            yield server
        finally:
            agent_pids = {p.pid for p in server.agents()}
    finally:
        with trio.CancelScope(shield=True):
            await _stop(proc, agent_pids)
            log.close()
            if not keep_data:
                shutil.rmtree(data_dir, ignore_errors=True)


async def _stop(proc: trio.Process, agent_pids: set[int]) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        with trio.move_on_after(20):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    # Agents lead their own process groups; the server stops them, this is the backstop.
    for pid in agent_pids:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    if proc.stdout is not None:
        await proc.stdout.aclose()


def _tail(data_dir: Path) -> str:
    try:
        return (data_dir / "server.log").read_text(errors="replace")[-2000:]
    except OSError:
        return "(no log)"
