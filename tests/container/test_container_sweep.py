"""The startup sweep: a ``turnvisor serve`` killed with SIGKILL leaves its
session's container running (agentctl is its PID 1, the engine keeps it); the
next ``turnvisor serve`` on the same data dir removes the containers labelled
with its instance before it listens, and leaves other backends' alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import trio

from supervisor.config import Config
from supervisor.executors.container import LABEL_BACKEND, LABEL_SESSION, backend_instance
from tests.container.container_support import (
    REPO,
    Engine,
    container_profiles,
    containers,
    session_containers,
)
from tests.support.server import TOKEN, Server
from tests.support.serverproc import parse_listening
from tests.support.ws import is_agent_output, ws_client
from tests.web.support import new_task, running_session


def _toml(profiles: dict[str, dict[str, object]]) -> str:
    lines: list[str] = []
    for name, fields in profiles.items():
        lines.append(f"[agents.{name}]")
        for key, value in fields.items():
            lines.append(f"{key} = {_value(value)}")
    return "\n".join(lines) + "\n"


def _value(v: object) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return str(v)


async def _serve(data: Path, log: Path) -> tuple[trio.Process, str]:
    env = {**os.environ, "TURNVISOR_TOKEN": TOKEN, "TURNVISOR_LOG": "INFO"}
    env.pop("TURNVISOR_DATA_DIR", None)
    with log.open("ab") as stderr:
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "web", "serve", "--port", "0", "--data-dir", str(data)],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=stderr)
    assert proc.stdout is not None
    buf = b""
    with trio.fail_after(60):
        while b"\n" not in buf:
            chunk = await proc.stdout.receive_some(4096)
            assert chunk, f"turnvisor serve exited: {_tail(log)}"
            buf += chunk
    found = parse_listening(buf.split(b"\n", 1)[0].decode(), data)
    assert found is not None and found[1] == TOKEN, buf
    return proc, found[0]


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


async def _kill(proc: trio.Process) -> None:
    if proc.returncode is None:
        proc.kill()
        with trio.move_on_after(10):
            await proc.wait()


async def test_sigkilled_backend_restart_sweeps_its_containers(
        tmp_path: Path, engine: Engine) -> None:
    data = tmp_path / "data"
    data.mkdir()
    toml = _toml(container_profiles(engine.image))
    (data / "turnvisor.toml").write_text(toml)
    instance = backend_instance(Config.from_mapping(data, tomllib.loads(toml)))
    log = tmp_path / "serve.log"
    # Another backend's container on the same engine: the sweep must keep it.
    other = (await trio.run_process(
        [engine.podman, "create", "--label", f"{LABEL_BACKEND}=someone-else",
         "--label", f"{LABEL_SESSION}=theirs", engine.image, "--help"],
        capture_stdout=True)).stdout.decode().strip()
    try:
        with trio.fail_after(150):
            proc, url = await _serve(data, log)
            try:
                srv = Server(url, TOKEN, None, trio.Event(), data)  # type: ignore[arg-type]
                async with ws_client(srv) as ws:
                    task = await new_task(ws, "sweep")
                    sid = await running_session(ws, task, "/delay 60000", "mock")
                    await ws.wait_for(is_agent_output(sid), timeout=60)
                    [ours] = session_containers(engine.podman, sid)
                    proc.send_signal(signal.SIGKILL)
                    await proc.wait()
            finally:
                await _kill(proc)
            # The backend is gone; its container is not.
            assert [c["Id"] for c in session_containers(engine.podman, sid)] == [ours["Id"]]
            assert [c["Id"] for c in containers(engine.podman, **{LABEL_BACKEND: instance})] \
                == [ours["Id"]]

            proc, _ = await _serve(data, log)
            try:
                # Listening means the supervisor has started, sweep included.
                assert containers(engine.podman, **{LABEL_BACKEND: instance}) == []
                assert [c["Id"] for c in containers(engine.podman,
                                                    **{LABEL_BACKEND: "someone-else"})] == [other]
                assert "startup sweep: removed container" in _tail(log)
            finally:
                proc.send_signal(signal.SIGTERM)
                with trio.move_on_after(10):
                    await proc.wait()
                await _kill(proc)
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(60):
            await trio.run_process([engine.podman, "rm", "-f", other], capture_stdout=True,
                                   check=False)
