"""The backend itself in trouble (issue 8, item 1): SIGTERM and SIGKILL of a
real ``python -m web serve`` while turns run and cancels are pending, then a
restart on the same data dir; and SQLite held locked by another connection
while a cancel goes through.

The agent profile ``mock-tree`` runs the mock agent with a child (``sleep``)
in its process group that ignores stdin: when a killed backend's pipes close,
the mock agent exits by itself but the child stays — exactly the orphan the
startup sweep (``agent_groups`` table) exists for.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from supervisor.turn.recovery import RESTART_STATUS
from tests.support.leaks import Snapshot, group_members, kill_group, processes_in
from tests.support.serverproc import ServerProcess, server_process
from tests.support.ws import WsClient, ws_client

from .support import assert_clean_frames, fault_server, quiescent, wait_frame, wait_turn_end

TOML = """
[timeouts]
cancel_join_s = 0.4
cancel_escalate_s = 60
cancel_cleanup_s = 1
term_grace_s = 0.5
shutdown_s = 8

[agents.mock-tree]
protocol = "acp"
command = ["sh", "-c", "{sleep} & exec {python} -m protocols.mock_agent --protocol acp"]
sandbox = "none"

# Unsandboxed: these tests count the members of each agent's process group and
# need orphans for the sweep to find (a sandbox's pid namespace leaves none:
# tests/security/test_hostile_agent.py covers a sandboxed backend's SIGKILL).
[agents.mock]
sandbox = "none"

[agents.mock-codex]
sandbox = "none"
"""
#: The agent's child: in its process group, deaf to the pipes' end.
SLEEP = "sleep 600 </dev/null >/dev/null 2>&1"


@asynccontextmanager
async def backend(data_dir: Path, log_path: Path) -> AsyncIterator[ServerProcess]:
    """``turnvisor serve --port 0 --data-dir D`` as a child process, logging at INFO."""
    async with server_process(data_dir, log_path=log_path, log_level="INFO",
                              toml=TOML.format(python=sys.executable, sleep=SLEEP)) as be:
        yield be


def db_path(be: ServerProcess) -> Path:
    return be.data_dir / "turnvisor.db"


def _query(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


async def query(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    return await trio.to_thread.run_sync(_query, db, sql, *args)


@dataclass
class Scene:
    """What was running when the backend was hit."""

    task_id: str
    running: list[str]   # turns running, nobody cancelling
    pending: list[str]   # turns running with a cancel pending
    idle: list[str]      # sessions with an agent and no turn
    pgids: list[int]


async def set_scene(ws: WsClient, be: ServerProcess, nursery: trio.Nursery,
                    replies: list[dict[str, Any]]) -> Scene:
    """Five sessions: two streaming, two with a cancel pending (an agent that
    hangs, one that ignores cancel), one idle; three of them have a child in
    their process group."""
    task_id = (await ws.call("task.create", {"title": "backend faults"}))["id"]

    async def session(agent: str, prompt: str | None) -> str:
        sid = (await ws.call("session.launch", {"task_id": task_id, "agent": agent}))["id"]
        await ws.call("session.subscribe", {"session_id": sid})
        if prompt is not None:
            mark = len(ws.notifications)
            await ws.call("message.add", {"session_id": sid, "content": prompt})
            await wait_frame(ws, lambda f: f["action"] == "session.state_changed"
                             and f["payload"]["session_id"] == sid
                             and f["payload"]["new_state"] == "RUNNING", after=mark)
        return str(sid)

    running = [await session("mock", "/delay 60000"), await session("mock-tree", "/delay 60000")]
    pending = [await session("mock-codex", "/hang"), await session("mock-tree", "/slow 60000")]
    idle = [await session("mock-tree", None)]
    # Let the streams produce something worth keeping.
    await wait_frame(ws, lambda f: f["action"] == "session.message.updated"
                     and f["payload"]["session_id"] == running[0])

    async def cancel(sid: str) -> None:
        with trio.move_on_after(30):
            replies.append(await ws.request("agent.cancel", {"session_id": sid}, timeout=30))

    for sid in pending:
        mark = len(ws.notifications)
        nursery.start_soon(cancel, sid)
        await wait_frame(ws, lambda f, s=sid: f["action"] == "session.cancellation_changed"
                         and f["payload"]["session_id"] == s
                         and f["payload"]["cancellation_pending"] is True, after=mark)
    await trio.sleep(0.6)  # past the join window: both really are unresponsive
    groups = await query(db_path(be), "SELECT pgid, session_id FROM agent_groups")
    assert sorted(s for _, s in groups) == sorted(running + pending + idle)
    pgids = [int(p) for p, _ in groups]
    members = group_members(pgids)
    assert set(members) == set(pgids)
    assert sum(len(m) for m in members.values()) == len(pgids) + 3  # + the three sleeps
    return Scene(task_id, running, pending, idle, pgids)


async def snapshot(h: httpx.AsyncClient, scene: Scene) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for sid in scene.running + scene.pending + scene.idle:
        r = await h.get(f"/api/v1/task-sessions/{sid}/messages")
        out[sid] = r.json()["messages"]
    return out


def http(srv: ServerProcess) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=srv.url, headers=srv.auth, timeout=20)


async def test_sigterm_with_running_turns_and_pending_cancels(tmp_path: Path) -> None:
    """Graceful and bounded: exit 0 within shutdown_s + Hypercorn's grace, the
    pending cancels' requests end without a traceback, every agent group (and
    its children) is gone, no session is left RUNNING, nothing is recorded as
    still running; a restart finds nothing to sweep and nothing pending."""
    data = tmp_path / "data"
    baseline = Snapshot.take()
    with trio.fail_after(90):
        async with backend(data, tmp_path / "serve.log") as be:
            replies: list[dict[str, Any]] = []
            async with trio.open_nursery() as nursery, ws_client(be) as ws:
                scene = await set_scene(ws, be, nursery, replies)
                started = trio.current_time()
                be.proc.send_signal(signal.SIGTERM)
                with trio.fail_after(15):
                    code = await be.proc.wait()
                took = trio.current_time() - started
                nursery.cancel_scope.cancel()
            assert_clean_frames(ws)
            for reply in replies:  # answered before the socket closed, if at all
                assert reply["type"] in ("response", "error"), reply
                assert "Traceback" not in json.dumps(reply)
            assert code == 0, (code, be.log()[-3000:])
            print("SIGTERM took", took)
            assert took < 12, took
            assert not group_members(scene.pgids), group_members(scene.pgids)
            assert not processes_in(data / "work")
            assert await query(db_path(be), "SELECT * FROM agent_groups") == []
            states = dict(await query(db_path(be), "SELECT id, state FROM task_sessions"))
            assert "RUNNING" not in states.values() and "STARTING" not in states.values(), states
            open_turns = await query(db_path(be), "SELECT id FROM turns WHERE state = 'running'")
            assert open_turns == []
            log = be.log()
            assert "Traceback" not in log, log[-3000:]
            assert be.token not in log
        async with backend(data, tmp_path / "serve2.log") as be2:
            async with http(be2) as h:
                for sid in scene.running + scene.pending + scene.idle:
                    dto = (await h.get(f"/api/v1/task-sessions/{sid}")).json()
                    assert dto["state"] == "WAITING_FOR_INPUT", dto
                    assert dto["cancellation_pending"] is False
            be2.proc.send_signal(signal.SIGTERM)
            with trio.fail_after(15):
                assert await be2.proc.wait() == 0
            assert "swept" not in be2.log()
    leaks = await baseline.settled()
    assert not leaks, leaks


async def test_sigkill_then_restart_on_the_same_data_dir(tmp_path: Path) -> None:
    """No goodbye at all.  The restart sweeps the recorded agent groups (their
    orphaned children die), exposes nothing pending, keeps every message stored
    before the kill, closes each interrupted turn once, and every session
    answers, cancels and settles again."""
    data = tmp_path / "data"
    baseline = Snapshot.take()
    pgids: list[int] = []
    try:
        with trio.fail_after(120):
            async with backend(data, tmp_path / "serve.log") as be:
                replies: list[dict[str, Any]] = []
                async with trio.open_nursery() as nursery, ws_client(be) as ws:
                    scene = await set_scene(ws, be, nursery, replies)
                    pgids = scene.pgids
                    async with http(be) as h:
                        before = await snapshot(h, scene)
                    be.proc.send_signal(signal.SIGKILL)
                    with trio.fail_after(10):
                        assert await be.proc.wait() == -signal.SIGKILL
                    nursery.cancel_scope.cancel()
            # The mock agents exit when their stdin closes; their children do not.
            orphans = group_members(pgids)
            with trio.move_on_after(15):
                while len(orphans) != 3 or any(len(m) != 1 for m in orphans.values()):
                    await trio.sleep(0.05)
                    orphans = group_members(pgids)
            assert len(orphans) == 3 and all(len(m) == 1 for m in orphans.values()), orphans

            async with backend(data, tmp_path / "serve2.log") as be2:
                # Swept at startup, before the server listened.
                assert not group_members(pgids), group_members(pgids)
                assert not processes_in(data / "work")
                assert "killed orphaned agent group" in be2.log()
                assert await query(db_path(be2), "SELECT * FROM agent_groups") == []
                async with http(be2) as h, ws_client(be2) as ws2:
                    after = await snapshot(h, scene)
                    for sid, old in before.items():
                        _same_messages(old, after[sid])
                        dto = (await h.get(f"/api/v1/task-sessions/{sid}")).json()
                        assert dto["state"] == "WAITING_FOR_INPUT", dto
                        assert dto["cancellation_pending"] is False, dto
                        assert dto["cancellation_revision"] == 0, dto
                        restarted = [m for m in after[sid] if m["content"] == RESTART_STATUS]
                        expected = 0 if sid in scene.idle else 1
                        assert len(restarted) == expected, (sid, after[sid])
                    # Each session is coherent and cancellable: idle cancel, a turn,
                    # a cancel of that turn with pending true → false.
                    for sid in scene.running + scene.pending + scene.idle:
                        await _usable_and_cancellable(ws2, sid)
                    assert_clean_frames(ws2)
                be2.proc.send_signal(signal.SIGTERM)
                with trio.fail_after(15):
                    assert await be2.proc.wait() == 0
                assert not processes_in(data / "work")
                log = be2.log()
                assert "Traceback" not in log, log[-3000:]
                assert be2.token not in log
    finally:
        for pgid in pgids:
            kill_group(pgid)
    leaks = await baseline.settled()
    assert not leaks, leaks


def _same_messages(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
    """Every message stored before the kill is still there, unchanged except for
    streamed agent text, which may only have grown."""
    by_id = {m["id"]: m for m in new}
    for m in old:
        assert m["id"] in by_id, ("lost", m)
        kept = by_id[m["id"]]
        if m["role"] == "agent" and m["kind"] == "text":
            assert kept["content"].startswith(m["content"]), (m, kept)
        else:
            assert kept == m, (m, kept)


async def _usable_and_cancellable(ws: WsClient, sid: str) -> None:
    await ws.call("session.subscribe", {"session_id": sid})
    assert (await ws.call("agent.cancel", {"session_id": sid}))["success"] is True
    mark = len(ws.notifications)
    await ws.call("message.add", {"session_id": sid, "content": "/delay 20000"})
    await wait_frame(ws, lambda f: f["action"] == "session.message.added"
                     and f["payload"]["session_id"] == sid
                     and f["payload"]["message"]["role"] == "agent", after=mark)
    assert (await ws.call("agent.cancel", {"session_id": sid}))["success"] is True
    end = await wait_turn_end(ws, sid, after=mark)
    assert end["stop_reason"] == "cancelled"
    changes = [(p["cancellation_pending"]) for p in ws.of("session.cancellation_changed", sid)]
    assert changes[-2:] == [True, False], changes


# -- SQLite busy / locked -------------------------------------------------------


def _hold_exclusive(db: Path, seconds: float, locked: trio.Event,
                    token: trio.lowlevel.TrioToken) -> None:
    conn = sqlite3.connect(db, timeout=10, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        trio.from_thread.run_sync(locked.set, trio_token=token)
        threading.Event().wait(seconds)
        conn.execute("ROLLBACK")
    finally:
        conn.close()


@pytest.mark.parametrize("hold_s", [3.0, 7.0])
async def test_sqlite_locked_during_a_cancel(tmp_path: Path, hold_s: float) -> None:
    """Another connection holds ``BEGIN EXCLUSIVE`` while a cancel goes through:
    for less than the store's busy timeout (5 s), and for longer.  The cancel
    settles, pending clears, the session leaves RUNNING, and it is usable."""
    with trio.fail_after(90):
        async with fault_server(tmp_path) as rig, ws_client(rig.srv) as ws:
            rig.watch(ws)
            db = rig.srv.sup.config.db_path
            task = await ws.call("task.create", {"title": "locked"})
            sid = (await ws.call("session.launch", {"task_id": task["id"]}))["id"]
            await ws.call("session.subscribe", {"session_id": sid})
            mark = len(ws.notifications)
            await ws.call("message.add", {"session_id": sid, "content": "/delay 30000"})
            await wait_frame(ws, lambda f: f["action"] == "session.message.added"
                             and f["payload"]["message"]["role"] == "agent", after=mark)
            locked = trio.Event()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.to_thread.run_sync, _hold_exclusive, db, hold_s,
                                   locked, trio.lowlevel.current_trio_token())
                await locked.wait()
                reply = await ws.request("agent.cancel", {"session_id": sid}, timeout=40)
            assert reply["type"] in ("response", "error"), reply
            if reply["type"] == "error":
                assert reply["payload"]["code"] == "CONFLICT", reply
            await wait_frame(ws, lambda f: f["action"] == "session.cancellation_changed"
                             and f["payload"]["cancellation_pending"] is False, after=mark)
            await quiescent(rig, timeout=20)
            msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
            assert [m["kind"] for m in msgs].count("status") == 1, msgs
            # Usable again.
            mark = len(ws.notifications)
            await ws.call("message.add", {"session_id": sid, "content": "after the lock"})
            assert (await wait_turn_end(ws, sid, after=mark))["stop_reason"] == "end_turn"
            await quiescent(rig)
