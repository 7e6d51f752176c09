"""Regression tests for the bugs the fault suite found in supervisor/ and web/.

1. A store error inside a running execution (SQLite locked for longer than
   the busy timeout) propagated out of the execution's nursery into the
   executions nursery and took the whole supervisor — every session, the web
   server — down with it.  Now it ends that one agent; the turn is reconciled
   by the next cancel.  (supervisor/session/lifecycle.py ``_run_execution``; the busy
   timeout went from 5 s to 30 s in supervisor/storage/store.py.)
2. A subscriber dropped for falling behind was counted, and logged as a
   warning, again on every later publish to its session until its connection
   closed (hundreds of log lines per slow client).  (supervisor/bus.py)
3. After an escalated cancel (an agent that ignores cancel and never ends its
   turn), the same stuck agent was kept: every later prompt in that session
   was refused by it ("a turn is already running") and failed, forever.  Now
   the next prompt replaces the agent.  (supervisor/session/lifecycle.py)
4. An empty binary WebSocket frame closed the connection (see its test).
5. Agent text with lone surrogates killed the execution (see its test).
6. Client strings with lone surrogates were INTERNAL_ERRORs (see its test).
7. Three REST inputs were 500s (see its test).
8. A crash was sometimes reported as "agent closed its output" (see its test).
9. At shutdown the gateway could send on a socket it had closed (see its test).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from supervisor.bus import EventBus
from supervisor.models import Message
from supervisor.storage.db import Db
from tests.support.ws import ws_client
from web.gateway import Gateway

from .support import AGENTS, fault_server, quiescent, wait_frame, wait_turn_end


async def test_store_failure_in_a_running_execution_does_not_stop_the_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(60):
        async with fault_server(tmp_path) as rig, ws_client(rig.srv) as ws, \
                ws_client(rig.srv) as bystander:
            rig.watch(ws)
            sup = rig.srv.sup
            task = await ws.call("task.create", {"title": "store failure"})
            sid = (await ws.call("session.launch", {"task_id": task["id"]}))["id"]
            other = (await ws.call("session.launch", {"task_id": task["id"]}))["id"]
            await ws.call("session.subscribe", {"session_id": sid})
            pgid = rig.pgid(sid)
            mark = len(ws.notifications)
            await ws.call("message.add", {"session_id": sid, "content": "/delay 20000"})
            await wait_frame(ws, lambda f: f["action"] == "session.message.added"
                             and f["payload"]["message"]["role"] == "agent", after=mark)

            db: Any = sup.store.db

            def locked(*args: Any, **kwargs: Any) -> None:
                raise sqlite3.OperationalError("database is locked")

            db.update_message = db.update_messages = locked
            db.add_message = locked
            try:
                with trio.fail_after(10):
                    while sid in sup.lifecycle.executions:
                        await trio.sleep(0.05)
            finally:
                del db.update_message, db.update_messages
                del db.add_message
            assert "stopping its agent" in caplog.text
            # The server and the other sessions are fine.
            assert (await bystander.call("task.list"))["tasks"]
            assert other in sup.lifecycle.executions
            assert rig.pgid(other) != pgid
            # The turn the store could not close is reconciled by a cancel ...
            assert (await ws.call("agent.cancel", {"session_id": sid}))["success"] is True
            await quiescent(rig)
            # ... and the session answers again, with a fresh agent.
            mark = len(ws.notifications)
            await ws.call("message.add", {"session_id": sid, "content": "back"})
            assert (await wait_turn_end(ws, sid, after=mark))["stop_reason"] == "end_turn"
            assert rig.pgid(sid) != pgid
            await quiescent(rig)


def test_a_dropped_subscriber_is_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture
) -> None:
    bus = EventBus(queue_size=2)
    sub = bus.subscriber()
    sub.subscribe("s")
    with caplog.at_level(logging.WARNING, logger="supervisor.bus"):
        for i in range(50):
            bus.publish("s", "session.message.updated", {"i": i})
    assert sub.overflowed
    assert bus.dropped_subscribers == 1
    assert caplog.text.count("dropped a subscriber") == 1


@pytest.mark.parametrize("agent", AGENTS)
async def test_after_an_escalated_cancel_the_next_prompt_gets_a_working_agent(
    tmp_path: Path, agent: str
) -> None:
    with trio.fail_after(60):
        async with fault_server(tmp_path) as rig, ws_client(rig.srv) as ws:
            rig.watch(ws)
            task = await ws.call("task.create", {"title": "hung agent"})
            sid = (await ws.call("session.launch", {"task_id": task["id"], "agent": agent}))["id"]
            await ws.call("session.subscribe", {"session_id": sid})
            hung = rig.pgid(sid)
            await ws.call("message.add", {"session_id": sid, "content": "/hang"})
            await trio.sleep(0.2)
            assert (await ws.call("agent.cancel", {"session_id": sid}))["success"] is True
            for text in ("first after the hang", "second"):
                mark = len(ws.notifications)
                await ws.call("message.add", {"session_id": sid, "content": text})
                end = await wait_turn_end(ws, sid, after=mark)
                assert end["stop_reason"] == "end_turn", end
                msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
                assert msgs[-1]["role"] == "agent" and msgs[-1]["content"] == text, msgs[-3:]
            assert rig.pgid(sid) != hung
            await quiescent(rig)


async def test_an_empty_binary_frame_gets_an_error_not_a_closed_connection(
    tmp_path: Path
) -> None:
    """4. Quart hands an empty binary frame to the app as ``None``; the gateway
    called ``len(None)``, the connection died with a traceback in the log.
    Found by tests/fuzz/test_ws_fuzz.py.  (web/gateway.py)"""
    with trio.fail_after(30):
        async with fault_server(tmp_path) as rig, ws_client(rig.srv) as ws:
            rig.watch(ws)
            for _ in range(3):
                mark = len(ws.notifications)
                await ws.send_raw(b"")
                err = await wait_frame(ws, lambda f: f["type"] == "error", after=mark)
                assert err["code"] == "BAD_REQUEST", err
                assert (await ws.call("ping")) == {}


def test_agent_text_with_lone_surrogates_is_stored(tmp_path: Path) -> None:
    """5. An agent's text with lone surrogates (JSON "\\ud83d": a JavaScript
    agent cutting an emoji in two) made SQLite raise UnicodeEncodeError in the
    event pump: the execution died (before fix 1, the whole server).  The store
    now rejoins split pairs and replaces lone halves.  (supervisor/storage/store.py)
    The end-to-end case is tests/faults/test_agent_faults.py (weird agent)."""
    db = Db(tmp_path / "t.db")
    try:
        ws = db.ensure_workspace("w")
        task = db.create_task(ws, "t")
        session = db.create_session(task.id, "mock")
        msg = db.add_message(session.id, None, "agent", "text", "a \ud83d")
        db.update_message(Message(**{**msg.to_dto(), "content": "a \ud83d\ude00 b \udfff",
                                     "metadata": {"t": "\ud800"}}))
        tool = db.add_message(session.id, None, "agent", "tool_call", "\udc00 tool")
        stored = {m.id: m.content for m in db.list_messages(session.id)}
        assert stored == {msg.id: "a \U0001F600 b \ufffd", tool.id: "\ufffd tool"}
    finally:
        db.close()


async def test_client_strings_with_lone_surrogates_are_refused(tmp_path: Path) -> None:
    """6. A lone surrogate in any string a client sends (WS payload fields, the
    REST task title) reached SQLite and came back as INTERNAL_ERROR.  Now it is
    a VALIDATION_ERROR at the edge.  (web/validate.py, web/app.py)"""
    with trio.fail_after(30):
        async with fault_server(tmp_path) as rig, ws_client(rig.srv) as ws:
            rig.watch(ws)
            for action, payload in [("task.create", {"title": "x\ud800"}),
                                    ("session.list", {"task_id": "\udfff"}),
                                    ("message.list", {"session_id": "\ud83d"}),
                                    ("agent.cancel", {"session_id": "\ud800"}),
                                    ("session.subscribe", {"session_id": "\ud800"})]:
                reply = await ws.request(action, payload)
                assert reply["type"] == "error", reply
                assert reply["payload"]["code"] == "VALIDATION_ERROR", reply
            async with httpx.AsyncClient(base_url=rig.srv.url, headers=rig.srv.auth) as h:
                r = await h.post("/api/v1/tasks", content=b'{"title": "x\\ud800"}',
                                 headers={"Content-Type": "application/json"})
                assert r.status_code == 422, r.text
                assert r.json()["error"]["code"] == "VALIDATION_ERROR"
                r = await h.post("/api/v1/task-sessions/x/cancel",
                                 content=b'{"task_id": "\\udfff"}')
                assert r.status_code == 422, r.text


async def test_rest_inputs_that_were_server_errors(tmp_path: Path) -> None:
    """7. Found by tests/fuzz/test_rest_fuzz.py, each a 500 with a traceback in
    the log: a static file name longer than the filesystem allows (OSError
    ENAMETOOLONG), a body that is not UTF-8 (UnicodeDecodeError), JSON nested
    deeper than the recursion limit (RecursionError).  (web/app.py)"""
    with trio.fail_after(30):
        async with fault_server(tmp_path) as rig, \
                httpx.AsyncClient(base_url=rig.srv.url, headers=rig.srv.auth) as h:
            r = await h.get("/static/" + "x" * 300)
            assert r.status_code == 404, r.text
            for body in (b"\x80", b'{"title": "\xff"}', b"[" * 5000 + b"]" * 5000):
                for path in ("/api/v1/tasks", "/api/v1/task-sessions/x/cancel"):
                    r = await h.post(path, content=body)
                    assert r.status_code == 400, (path, body[:10], r.text)
                    assert r.json()["error"]["code"] == "BAD_REQUEST"


@pytest.mark.parametrize("agent", AGENTS)
async def test_a_crash_is_reported_as_a_crash(tmp_path: Path, agent: str) -> None:
    """8. An agent that exits mid-turn closes its stdout a moment before its
    exit status can be seen; the turn's status then said "agent closed its
    output" about half the time instead of "agent exited (status 1)".  The pump
    now waits briefly for the exit.  (supervisor/session/lifecycle.py ``_pump``)"""
    with trio.fail_after(60):
        async with fault_server(tmp_path) as rig, ws_client(rig.srv) as ws:
            rig.watch(ws)
            task = await ws.call("task.create", {"title": "crashes"})
            sid = (await ws.call("session.launch", {"task_id": task["id"], "agent": agent}))["id"]
            await ws.call("session.subscribe", {"session_id": sid})
            for _ in range(4):
                mark = len(ws.notifications)
                await ws.call("message.add", {"session_id": sid, "content": "/crash"})
                assert (await wait_turn_end(ws, sid, after=mark))["stop_reason"] == "error"
            msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
            assert [m["content"] for m in msgs if m["kind"] == "status"] == [
                "Agent error: agent exited (status 1)"] * 4
            await quiescent(rig)


class _ClosingSocket:
    """A WebSocket whose ``close`` lets other tasks run before it returns, and
    which (like Hypercorn's) refuses to send once closed."""

    def __init__(self, frames: list[str]) -> None:
        self.frames = frames
        self.closed = False
        self.sent: list[str | bytes] = []

    async def receive(self) -> str | bytes:
        if self.frames:
            return self.frames.pop(0)
        await trio.sleep_forever()
        raise AssertionError

    def write_now(self, frames: Sequence[str | bytes]) -> bytes | None:
        return None  # never at once: every frame goes through send_many

    async def send_many(self, frames: Sequence[str | bytes]) -> None:
        if self.closed:
            raise RuntimeError("websocket.send given the state CLOSED")
        self.sent.extend(frames)
        await trio.lowlevel.checkpoint()

    async def close(self, code: int, reason: str = "") -> None:
        self.closed = True
        await trio.sleep(0.01)


async def test_no_send_after_the_shutdown_close(tmp_path: Path) -> None:
    """9. At server shutdown the gateway closes every socket (1001) while its
    writer may still be handed notifications; the writer then sent on the
    closed socket and the connection ended in an unhandled exception (an ERROR
    with a traceback in the log, seen once in the soak).  (web/gateway.py)"""
    async with fault_server(tmp_path) as rig:
        sup = rig.srv.sup
        caller = await sup.caller()
        task = await sup.orchestrator.create_task(caller, "shutdown")
        session = await sup.store.call(sup.store.db.create_session, task.id, "mock")
        sock = _ClosingSocket([json.dumps({
            "id": "1", "type": "request", "action": "session.subscribe",
            "payload": {"session_id": session.id}})])
        gateway = Gateway(sup)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(gateway.serve, sock, caller)
                while len(sock.sent) < 2:  # the answer and the snapshot
                    await trio.sleep(0.01)
                gateway.close_all()
                # Notifications keep coming while the close is under way.
                for i in range(30):
                    sup.bus.publish(session.id, "session.message.updated", {"i": i})
                    await trio.sleep(0.001)
        assert sock.closed
