"""Shared test helpers: a real server in the test's nursery and a WebSocket client."""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from trio_websocket import WebSocketConnection, open_websocket_url

from supervisor.config import Config
from supervisor.root import Supervisor
from web.server import serve

TOKEN = "test-token-0123456789abcdef"
OTHER_TOKEN = "other-token-0123456789abcdef"


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
                         **config: Any) -> AsyncIterator[Server]:
    raw: dict[str, Any] = {"timeouts": timeouts or {}}
    if workspaces:
        raw["workspaces"] = {name: {"token": tok} for name, tok in workspaces.items()}
    cfg = Config.from_mapping(data_dir, raw, **config)
    stop = trio.Event()
    ready: list[Server] = []

    def on_ready(url: str, sup: Any) -> None:
        ready.append(Server(url, TOKEN, sup, stop, data_dir))

    async with trio.open_nursery() as nursery:
        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            await serve(cfg, host="127.0.0.1", port=0, token=TOKEN,
                        on_ready=lambda u, s: (on_ready(u, s), task_status.started()), stop=stop)

        with trio.fail_after(30):
            await nursery.start(run)
        try:
            yield ready[0]
        finally:
            stop.set()


@dataclass
class WsClient:
    conn: WebSocketConnection
    notifications: list[dict[str, Any]] = field(default_factory=list)
    _waiters: dict[str, trio.MemorySendChannel[dict[str, Any]]] = field(default_factory=dict)
    _changed: trio.Event = field(default_factory=trio.Event)
    closed: bool = False

    async def reader(self) -> None:
        try:
            while True:
                frame = json.loads(await self.conn.get_message())
                if frame["type"] in ("response", "error") and frame["id"] in self._waiters:
                    self._waiters.pop(frame["id"]).send_nowait(frame)
                else:
                    self.notifications.append(frame)
                self._changed.set()
                self._changed = trio.Event()
        except Exception:
            self.closed = True
            self._changed.set()

    async def send_raw(self, data: str | bytes) -> None:
        await self.conn.send_message(data)

    async def request(self, action: str, payload: dict[str, Any] | None = None,
                      *, timeout: float = 15) -> dict[str, Any]:
        rid = str(uuid.uuid4())
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self._waiters[rid] = send
        await self.conn.send_message(json.dumps({
            "id": rid, "type": "request", "action": action, "payload": payload or {},
            "timestamp": "2026-01-01T00:00:00Z"}))
        with trio.fail_after(timeout):
            return await receive.receive()

    async def call(self, action: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        frame = await self.request(action, payload)
        assert frame["type"] == "response", frame
        return frame["payload"]  # type: ignore[no-any-return]

    async def wait_for(self, pred: Any, *, timeout: float = 10) -> dict[str, Any]:
        with trio.fail_after(timeout):
            seen = 0
            while True:
                for frame in self.notifications[seen:]:
                    if pred(frame):
                        return frame
                seen = len(self.notifications)
                await self._changed.wait()

    def of(self, action: str, session_id: str | None = None) -> list[dict[str, Any]]:
        return [n["payload"] for n in self.notifications if n["action"] == action
                and (session_id is None or n["payload"].get("session_id") == session_id)]


@asynccontextmanager
async def ws_client(server: Server, *, token: str | None = None,
                    headers: list[tuple[str, str]] | None = None) -> AsyncIterator[WsClient]:
    hdrs = [("Authorization", f"Bearer {token or server.token}"), *(headers or [])]
    opened: list[WebSocketConnection] = []
    try:
        async with trio.open_nursery() as nursery, open_websocket_url(
            server.ws_url, extra_headers=hdrs, max_message_size=64 * 1024 * 1024
        ) as conn:
            opened.append(conn)
            client = WsClient(conn)
            nursery.start_soon(client.reader)
            try:
                yield client
            finally:
                nursery.cancel_scope.cancel()
    finally:
        # trio-websocket 0.12 leaves the TCP stream open when the server closed
        # the WebSocket first (a ResourceWarning later); close it here.
        for conn in opened:
            with trio.CancelScope(shield=True):
                await conn._stream.aclose()


def pgid_alive(pgid: int) -> bool:
    """Whether group ``pgid`` has a live (non-zombie) process.  Zombies do not
    count: a sandboxed agent's namespace init can outlive bwrap by an instant
    and is then reaped by the system's init, not by the backend."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def kill_quietly(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
