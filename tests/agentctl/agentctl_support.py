"""Helpers for the agentctl tests (a module of its own: conftest is not importable)."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import trio
from trio_websocket import WebSocketConnection, open_websocket_url

from protocols.events import AgentEvent
from supervisor.config import Timeouts
from supervisor.executors.agentctl_adapter import AgentctlAdapter
from supervisor.profiles import AgentProfile
from tests.support.ws import WsClient

TOKEN = "agentctl-test-token-0123456789"


@dataclass
class Agentctl:
    url: str
    token: str
    process: trio.Process
    http: httpx.AsyncClient

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def post(self, path: str, body: dict[str, Any] | None = None,
                   *, timeout: float = 15) -> httpx.Response:
        with trio.fail_after(timeout):
            return await self.http.post(path, json=body or {}, headers=self.auth)

    async def get(self, path: str, *, timeout: float = 15) -> httpx.Response:
        with trio.fail_after(timeout):
            return await self.http.get(path, headers=self.auth)

    async def status(self) -> dict[str, Any]:
        resp = await self.get("/api/v1/status")
        assert resp.status_code == 200, resp.text
        data: dict[str, Any] = resp.json()
        return data

    @asynccontextmanager
    async def events(self, after: int | None = None,
                     owner: str | None = None) -> AsyncIterator[WebSocketConnection]:
        url = self.url.replace("http://", "ws://") + "/api/v1/events"
        query = [f"after={after}"] if after is not None else []
        query += [f"owner={owner}"] if owner is not None else []
        if query:
            url += "?" + "&".join(query)
        async with open_websocket_url(
                url, extra_headers=[(b"Authorization", f"Bearer {self.token}".encode())]) as ws:
            yield ws

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)


async def next_frame(ws: WebSocketConnection, pred: Callable[[dict[str, Any]], bool],
                     *, timeout: float = 10, seen: list[dict[str, Any]] | None = None,
                     ) -> dict[str, Any]:
    """The next frame matching ``pred`` (skipping heartbeats); others go to ``seen``."""
    with trio.fail_after(timeout):
        while True:
            frame: dict[str, Any] = json.loads(await ws.get_message())
            if seen is not None:
                seen.append(frame)
            if pred(frame):
                return frame


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is in group ``pgid``."""
    return bool(group_pids(pgid))


def environ(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def group_pids(pgid: int) -> list[int]:
    """The live (non-zombie) processes of group ``pgid``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            pids.append(int(entry.name))
    return pids


async def wait_group_gone(pgid: int, *, timeout: float = 10) -> None:
    with trio.fail_after(timeout):
        while group_alive(pgid):
            await trio.sleep(0.05)


def mock_profile(protocol: str) -> AgentProfile:
    assert protocol in ("acp", "codex")
    return AgentProfile(
        name=f"mock-{protocol}", protocol="acp" if protocol == "acp" else "codex",
        command=(sys.executable, "-m", "protocols.mock_agent", "--protocol", protocol))


AgentctlFactory = Callable[..., AbstractAsyncContextManager[Agentctl]]


def frame_is(kind: str, turn: str | None = None) -> Callable[[dict[str, Any]], bool]:
    """A ``next_frame`` predicate: a frame of type ``kind`` (of turn ``turn``)."""
    return lambda f: f.get("type") == kind and (turn is None or f.get("turn") == turn
                                                or f.get("turn_id") == turn)


async def raw_turn(ctl: Agentctl, text: str, owner: str = "raw-client") -> tuple[str, str]:
    """A session and a running turn started over agentctl's HTTP API:
    (session id, turn id)."""
    resp = await ctl.post("/api/v1/session", {"owner": owner})
    assert resp.status_code == 200, resp.text
    session_id = resp.json()["session_id"]
    resp = await ctl.post("/api/v1/prompt", {"text": text, "session_id": session_id})
    assert resp.status_code == 202, resp.text
    return session_id, resp.json()["turn_id"]


@asynccontextmanager
async def adapter_session(url: str, token: str, timeouts: Timeouts, *,
                          reconnect: bool = False,
                          ) -> AsyncIterator[tuple[AgentctlAdapter, list[AgentEvent]]]:
    """An ``AgentctlAdapter`` run as the lifecycle runs it (its link's reader
    and a pump of its events, recorded), initialized, with a session."""
    adapter = AgentctlAdapter(url, token, owner="backend-session-1", timeouts=timeouts,
                              reconnect=reconnect)
    seen: list[AgentEvent] = []

    async def pump() -> None:
        async for ev in adapter.events:
            seen.append(ev)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(adapter.connection.run)
            nursery.start_soon(pump)
            await adapter.initialize()
            await adapter.new_session("/ignored")
            yield adapter, seen
            nursery.cancel_scope.cancel()
    finally:
        await adapter.aclose()


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it (a sandbox's agent runs under bwrap,
    in a session of its own)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """The agent's processes stopped (none reads its stdin), continued after."""
    pids = process_tree(pid)
    for each in pids:
        os.kill(each, signal.SIGSTOP)
    try:
        yield
    finally:
        for each in pids:
            os.kill(each, signal.SIGCONT)


def fill_stdin(pid: int) -> int:
    """Fill the pipe agentctl writes the agent's input to (the stdin of a
    process under ``pid``: agentctl's launcher, the sandbox, the agent) with
    blank lines until it takes no more; the bytes written."""
    pipes = [p for p in process_tree(pid) if os.readlink(f"/proc/{p}/fd/0").startswith("pipe:")]
    assert pipes, "no process under the agent's launcher reads a pipe"
    fd = os.open(f"/proc/{pipes[0]}/fd/0", os.O_WRONLY | os.O_NONBLOCK)
    written = 0
    try:
        while written < 16 * 1024 * 1024:  # (a pipe holds 64 KiB to 1 MiB)
            try:
                written += os.write(fd, b"\n" * 4096)
            except BlockingIOError:
                return written
        raise AssertionError("the agent's stdin took 16 MiB: something still reads it")
    finally:
        os.close(fd)





def remote_toml(url: str, protocol: str = "acp", *, timeouts: str = "") -> str:
    """A serve config whose ``remote`` profile is the mock agent behind the
    agentctl at ``url`` (``timeouts``: lines for its ``[timeouts]`` table)."""
    head = f"[timeouts]\n{timeouts}" if timeouts else ""
    return (f'{head}[agents.remote]\nprotocol = "{protocol}"\nexecutor = "agentctl"\n'
            f'agentctl_url = "{url}"\nagentctl_token = "{TOKEN}"\n'
            f'command = ["{sys.executable}", "-m", "protocols.mock_agent"]\n')


async def agent_streaming(ws: WsClient, sid: str, turn_id: str) -> None:
    """Return once the turn's agent message is in the session's transcript."""
    with trio.fail_after(20):
        while True:
            listed = await ws.call("message.list", {"session_id": sid})
            if any(m["turn_id"] == turn_id and m["role"] == "agent" for m in listed["messages"]):
                return
            await trio.sleep(0.05)
