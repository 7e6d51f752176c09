"""Helpers for the container tests (a module of its own: conftest is not importable)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from supervisor.config import Config
from supervisor.executors.container import LABEL_BACKEND, LABEL_SESSION
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor, open_supervisor
from tests.support.leaks import stop_process

REPO = Path(__file__).resolve().parents[2]
PROFILES = {"mock": "acp", "mock-codex": "codex"}


@dataclass(frozen=True)
class Engine:
    image: str
    socket: Path
    podman: str
    build_s: float


def container_profiles(image: str, **extra: Any) -> dict[str, dict[str, Any]]:
    """The two mock profiles on ``executor = "container"``: the mock agent is the
    image's own (``python`` is the image's venv)."""
    return {name: {"protocol": proto, "executor": "container", "image": image,
                   "command": ["python", "-m", "protocols.mock_agent", "--protocol", proto],
                   "cpus": 1, "memory": "512m", "pids": 256, **extra}
            for name, proto in PROFILES.items()}


def config(tmp_path: Path, image: str, **timeouts: float) -> Config:
    return Config.from_mapping(tmp_path / "data", {
        "timeouts": timeouts, "agents": container_profiles(image)})


@asynccontextmanager
async def supervisor(tmp_path: Path, image: str, **timeouts: float,
                     ) -> AsyncIterator[Supervisor]:
    async with open_supervisor(config(tmp_path, image, **timeouts)) as sup:
        yield sup



async def wait_chunks(sup: Supervisor, caller: Caller, sid: str, timeout: float = 20) -> None:
    with trio.fail_after(timeout):
        while not any(m.role == "agent" for m in
                      await sup.orchestrator.list_messages(caller, sid)):
            await trio.sleep(0.02)


async def agent_texts(sup: Supervisor, caller: Caller, sid: str) -> list[Any]:
    return [m.content for m in await sup.orchestrator.list_messages(caller, sid)
            if m.role == "agent"]


def containers(podman: str, **labels: str) -> list[dict[str, Any]]:
    """``podman ps -a`` of the containers with these labels (any backend's if none)."""
    filters = [f"--filter=label={k}={v}" for k, v in labels.items()] or [
        f"--filter=label={LABEL_BACKEND}"]
    out = subprocess.run([podman, "ps", "-a", "--format", "json", *filters],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    found: list[dict[str, Any]] = json.loads(out or "[]")
    return found


def session_containers(podman: str, session_id: str) -> list[dict[str, Any]]:
    return containers(podman, **{LABEL_SESSION: session_id})


def remove_labelled(podman: str) -> None:
    """Remove every container the tests labelled (the fixture's teardown)."""
    ids = [c["Id"] for c in containers(podman)]
    if ids:
        subprocess.run([podman, "rm", "-f", *ids], capture_output=True, check=False,
                       timeout=120)


class ServiceDown(Exception):
    """A ``podman system service`` did not come up (its log in the message)."""


@contextmanager
def podman_service(podman: str, listen: str, ready: Callable[[], bool], log: Path, *,
                   storage: Sequence[str] = (), within: float = 30) -> Iterator[None]:
    """``podman [storage] system service --time=0 listen``, up once ``ready()``
    says so (polled for at most ``within`` seconds, generous: a loaded machine
    starts it slowly), its stderr in ``log``; stopped at the end (terminated,
    killed if it lingers).  ``ServiceDown`` if it exits or is not ready in time."""
    with log.open("wb") as out:
        service = subprocess.Popen([podman, *storage, "system", "service", "--time=0", listen],
                                   stdout=subprocess.DEVNULL, stderr=out)
    try:
        deadline = time.monotonic() + within
        while not ready():
            if service.poll() is not None or time.monotonic() > deadline:
                raise ServiceDown(f"podman system service on {listen} did not come up\n"
                                  + log.read_text(errors="replace")[-3000:])
            time.sleep(0.05)
        yield
    finally:
        stop_process(service)
