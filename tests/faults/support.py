"""The fault rig: a real server with short cancel bounds, real mock-agent
processes, and the bookkeeping every fault case ends with.

``fault_server`` takes a baseline (fds, child processes, Trio tasks), runs
``tests.support.server.running_server``, records every agent process group the server ever
starts, and on exit asserts:

- no agent process is left: none of the recorded groups has a live member and
  no process runs in the server's ``DATA_DIR/work``;
- file descriptors, child processes and Trio tasks are back to the baseline.

``quiescent`` is the per-case check while the server still runs: no session
RUNNING or STARTING, no cancel operation registered, ``cancellation_pending``
false everywhere (projection, DTO), and no client frame with a traceback or an
INTERNAL_ERROR.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Request, TextMessage

from supervisor.models import SessionState
from tests.support.leaks import Snapshot, group_members, processes_in
from tests.support.server import Server, running_server
from tests.support.ws import WsClient

#: Short bounds so the join window, escalation and teardown happen within a test.
FAST = {
    "cancel_join_s": 0.4,
    "cancel_escalate_s": 2.0,
    "cancel_cleanup_s": 1.0,
    "term_grace_s": 0.5,
    "agent_start_s": 20.0,
    "shutdown_s": 8.0,
}
AGENTS = ["mock", "mock-codex"]


@dataclass
class Rig:
    srv: Server
    data_dir: Path
    pgids: set[int] = field(default_factory=set)
    clients: list[WsClient] = field(default_factory=list)

    def record(self) -> None:
        for ex in list(self.srv.sup.lifecycle.executions.values()):
            if ex.agent.pgid is not None:
                self.pgids.add(ex.agent.pgid)

    def pgid(self, session_id: str) -> int:
        ex = self.srv.sup.lifecycle.executions[session_id]
        assert ex.agent.pgid is not None
        self.pgids.add(ex.agent.pgid)
        return ex.agent.pgid

    def watch(self, ws: WsClient) -> WsClient:
        self.clients.append(ws)
        return ws


async def _recorder(rig: Rig) -> None:
    while True:
        rig.record()
        try:
            groups = await rig.srv.sup.store.call(rig.srv.sup.store.db.agent_groups)
        except sqlite3.Error:
            groups = []  # a test holding the database locked
        for pgid, *_ in groups:
            rig.pgids.add(pgid)
        await trio.sleep(0.05)


@asynccontextmanager
async def fault_server(tmp_path: Path, *, timeouts: dict[str, float] | None = None,
                       **config: Any) -> AsyncIterator[Rig]:
    data_dir = tmp_path / "data"
    baseline = Snapshot.take()
    async with running_server(data_dir, timeouts={**FAST, **(timeouts or {})},
                              **config) as srv:
        rig = Rig(srv, data_dir)
        async with trio.open_nursery() as watchers:
            watchers.start_soon(_recorder, rig)
            try:
                yield rig
            finally:
                rig.record()
                watchers.cancel_scope.cancel()
    # The server has stopped: every agent must be gone with it.
    left = await _agents_left(rig)
    assert not left, f"agent processes outlived the server: {left}"
    leaks = await baseline.settled()
    assert not leaks, f"leaked: {leaks}"
    for ws in rig.clients:
        assert_clean_frames(ws)


async def _agents_left(rig: Rig, timeout: float = 5.0) -> dict[str, object]:
    with trio.move_on_after(timeout):
        while True:
            left: dict[str, object] = {}
            groups = group_members(rig.pgids)
            if groups:
                left["groups"] = groups
            procs = processes_in(rig.data_dir / "work")
            if procs:
                left["in_work_dir"] = procs
            if not left:
                return left
            await trio.sleep(0.05)
    return left


def assert_clean_frames(ws: WsClient) -> None:
    """No frame a client got carries a traceback or an INTERNAL_ERROR."""
    for frame in ws.notifications:
        text = json.dumps(frame)
        assert "Traceback" not in text and 'File "' not in text, text[:2000]
        if frame.get("type") == "error":
            assert frame["payload"]["code"] != "INTERNAL_ERROR", frame


async def quiescent(rig: Rig, *, timeout: float = 15.0) -> None:
    """Wait until nothing runs and nothing is pending; fail with the state if not."""
    problems: list[str] = []
    with trio.move_on_after(timeout):
        while True:
            problems = await _problems(rig)
            if not problems:
                break
            await trio.sleep(0.05)
    assert not problems, problems
    for ws in rig.clients:
        assert_clean_frames(ws)


async def _problems(rig: Rig) -> list[str]:
    sup = rig.srv.sup
    db = sup.store.db
    out = []
    stuck = await sup.store.call(db.sessions_in_states,
                                 (SessionState.RUNNING, SessionState.STARTING))
    if stuck:
        out.append(f"sessions still {[(s.id[:8], s.state.value) for s in stuck]}")
    if sup.orchestrator.operations:
        out.append(f"cancel operations registered: {list(sup.orchestrator.operations)}")
    for sid in list(sup.notify.projection._entries):
        if sup.notify.projection.get(sid).pending:
            out.append(f"cancellation_pending true for {sid[:8]}")
    for ex in sup.lifecycle.executions.values():
        if ex.turn is not None:
            out.append(f"execution {ex.session_id[:8]} still has a turn or its gate")
    # Every live execution's agent is alive; nothing else runs in work/.
    live = {ex.agent.pgid for ex in sup.lifecycle.executions.values()
            if ex.agent.pgid is not None}
    members = group_members(live)
    if set(members) != live:
        out.append(f"executions whose agent is dead: {live - set(members)}")
    owned = {pid for pids in members.values() for pid in pids}
    strays = set(processes_in(rig.data_dir / "work")) - owned
    if strays:
        out.append(f"agent processes outside any live execution: {strays}")
    return out


async def session_dto(rig: Rig, ws: WsClient, task_id: str, sid: str) -> dict[str, Any]:
    sessions = (await ws.call("session.list", {"task_id": task_id}))["sessions"]
    (dto,) = [s for s in sessions if s["id"] == sid]
    return dto


async def wait_turn_end(ws: WsClient, sid: str, *, after: int = 0,
                        timeout: float = 20) -> dict[str, Any]:
    """The first ``session.turn.completed`` of ``sid`` among notifications[after:]."""
    return await wait_frame(ws, lambda f: f["action"] == "session.turn.completed"
                            and f["payload"]["session_id"] == sid, after=after,
                            timeout=timeout)


async def wait_frame(ws: WsClient, pred: Any, *, after: int = 0,
                     timeout: float = 20) -> dict[str, Any]:
    """The payload of the first frame among notifications[after:] matching ``pred``."""
    return (await ws.wait_for(pred, after=after, timeout=timeout))["payload"]


class RawWs:
    """A WebSocket client on a bare socket (wsproto): it reads only when told
    to, can shrink its receive buffer, and can drop the TCP connection without
    a closing handshake — the clients trio-websocket is too polite to be."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.conn = WSConnection(ConnectionType.CLIENT)
        self.frames: list[dict[str, Any]] = []
        self.closed_by_server: int | None = None

    async def handshake(self, host: str, token: str) -> None:
        await self.stream.send_all(self.conn.send(Request(
            host=host, target="/ws",
            extra_headers=[(b"authorization", f"Bearer {token}".encode())])))
        with trio.fail_after(10):
            while True:
                data = await self.stream.receive_some(65536)
                assert data, "server closed during the handshake"
                self.conn.receive_data(data)
                for event in self.conn.events():
                    if isinstance(event, AcceptConnection):
                        return
                    raise AssertionError(f"upgrade refused: {event!r}")

    async def send(self, action: str, payload: dict[str, Any], rid: str = "raw") -> None:
        text = json.dumps({"id": rid, "type": "request", "action": action, "payload": payload})
        await self.stream.send_all(self.conn.send(TextMessage(data=text)))

    async def read_some(self) -> None:
        data = await self.stream.receive_some(65536)
        if not data:
            self.closed_by_server = -1
            return
        self.conn.receive_data(data)
        for event in self.conn.events():
            if isinstance(event, TextMessage):
                self.frames.append(json.loads(event.data))
            elif isinstance(event, CloseConnection):
                self.closed_by_server = event.code

    async def abort(self) -> None:
        """Drop the TCP connection at once (RST): no closing handshake."""
        sock = self.stream.socket
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await self.stream.aclose()


@asynccontextmanager
async def raw_ws(srv: Server, *, rcvbuf: int | None = None,
                 token: str | None = None) -> AsyncIterator[RawWs]:
    host, port = srv.url.removeprefix("http://").rsplit(":", 1)
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    await sock.connect((host, int(port)))
    ws = RawWs(trio.SocketStream(sock))
    try:
        await ws.handshake(f"{host}:{port}", token or srv.token)
        yield ws
    finally:
        await ws.stream.aclose()
