"""The data dir's disk fills up (issue 32, item 3; DESIGN.md §16): a real
`turnvisor serve` on a 12 MiB tmpfs this test mounts, filled by a file.

While it is full: a write fails with a clear error to its client (an
``INTERNAL_ERROR`` whose message says the disk is full), reads work, and the
cancel of a running turn works (its answer says the record is not written).
The server never exits.  When space returns (the file deleted) it recovers by
itself: writes work, the cancelled turn's record is written, and nothing it
acknowledged before is lost (checked again in the database after it stopped).
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.models import CANCELLED_STATUS
from tests.support.serverproc import server_process
from tests.support.ws import WsClient, ws_client
from tests.web.support import http, new_task

SIZE = "12m"


@asynccontextmanager
async def small_disk(where: Path) -> AsyncIterator[Path]:
    """A tmpfs of ``SIZE`` mounted at ``where`` (skipped where that cannot be)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root (CI runs as root)")
    await trio.Path(where).mkdir()
    mounted = await trio.run_process(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs",
                                      str(where)], check=False, capture_stderr=True,
                                     stdin=subprocess.DEVNULL)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        with trio.CancelScope(shield=True):
            await trio.run_process(["umount", "-l", str(where)], check=False)


def fill(path: Path) -> int:
    """Write ``path`` until the filesystem has no byte left; its size."""
    written = 0
    with path.open("wb", buffering=0) as f:
        for chunk in (1 << 20, 1 << 12, 1):
            block = b"\0" * chunk
            while True:
                try:
                    written += f.write(block) or 0
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    return written


async def wait_answer(ws: WsClient, action: str, payload: dict[str, Any],
                      ok: Any, within: float = 40) -> dict[str, Any]:
    """Retry ``action`` until its answer satisfies ``ok`` (the store recovering)."""
    with trio.fail_after(within):
        while True:
            frame = await ws.request(action, payload)
            if ok(frame):
                return frame
            await trio.sleep(0.5)


def db_rows(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db, timeout=10)
    try:
        return [tuple(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


async def test_a_full_disk_fails_writes_clearly_and_the_server_recovers(
    tmp_path: Path
) -> None:
    async with small_disk(tmp_path / "small") as disk:
        data = disk / "data"
        filler = disk / "filler"
        # The agents keep their own state (and the server its log) elsewhere:
        # this is about Turnvisor's store.
        env = {**os.environ, "MOCK_AGENT_STATE_DIR": str(tmp_path / "mock-state")}
        with trio.fail_after(150):
            async with server_process(data, log_path=tmp_path / "server.log",
                                      base_env=env) as srv, ws_client(srv) as ws:
                task_id = await new_task(ws, "before the disk filled")
                sid = (await ws.call("session.launch", {"task_id": task_id,
                                                        "agent": "mock"}))["id"]
                other = (await ws.call("session.launch", {"task_id": task_id,
                                                          "agent": "mock-codex"}))["id"]
                for s in (sid, other):
                    await ws.call("session.subscribe", {"session_id": s})
                # Acknowledged before: a whole turn, a running turn, a queued message.
                await ws.call("message.add", {"session_id": other, "content": "kept"})
                await ws.wait_for(lambda f: f["action"] == "session.turn.completed"
                                  and f["payload"]["session_id"] == other, timeout=20)
                await ws.call("message.add", {"session_id": sid, "content": "/tool 120000"})
                await ws.wait_for(lambda f: f["action"] == "session.message.added"
                                  and f["payload"]["message"]["kind"] == "tool_call"
                                  and f["payload"]["session_id"] == sid, timeout=20)
                queued = await ws.call("message.add", {"session_id": sid, "content": "later",
                                                       "delivery": "queue"})
                assert queued["delivery"] == "queued"
                kept = (await ws.call("message.list", {"session_id": other}))["messages"]

                size = await trio.to_thread.run_sync(fill, filler)
                assert size > 0

                # A write fails, said clearly (never "internal error" alone).
                answers = [await ws.request("task.create", {"title": f"while full {i}"})
                           for i in range(5)]
                errors = [a["payload"] for a in answers if a["type"] == "error"]
                assert errors, answers
                for err in errors:
                    assert err["code"] in ("INTERNAL_ERROR", "UNAVAILABLE"), err
                    assert "disk is full" in err["message"], err
                created_while_full = [a["payload"]["id"] for a in answers
                                      if a["type"] == "response"]
                # Reads work.
                assert (await ws.call("message.list", {"session_id": other})
                        )["messages"] == kept
                titles = {t["title"] for t in (await ws.call("task.list"))["tasks"]}
                assert "before the disk filled" in titles
                async with http(srv) as h:
                    r = await h.get(f"/api/v1/task-sessions/{sid}")
                    assert r.status_code == 200, r.text
                # The cancel of the running turn works: the agent stops, nothing pending.
                answer = await ws.call("agent.cancel", {"session_id": sid}, timeout=20)
                assert answer["success"] is True and answer["session_id"] == sid
                if "record_written" in answer:
                    assert answer["record_written"] is False and answer["agent_stopped"]
                    assert "disk is full" in answer["record_error"]
                state = await ws.call("session.list", {"task_id": task_id})
                mine = next(s for s in state["sessions"] if s["id"] == sid)
                assert mine["cancellation_pending"] is False
                await trio.sleep(3)  # the refused park and close retry; the server lives on
                assert srv.proc.returncode is None
                async with http(srv) as h:
                    assert (await h.get("/api/v1/health")).json() == {"status": "ok"}

                # Space returns: the server recovers by itself.
                await trio.to_thread.run_sync(filler.unlink)
                created = await wait_answer(ws, "task.create", {"title": "after"},
                                            lambda f: f["type"] == "response")
                after_id = created["payload"]["id"]

                def cancelled(frame: dict[str, Any]) -> bool:
                    msgs = frame["payload"].get("messages", [])
                    return any(m["kind"] == "status" and m["content"] == CANCELLED_STATUS
                               for m in msgs)

                frame = await wait_answer(ws, "message.list", {"session_id": sid}, cancelled)
                statuses = [m for m in frame["payload"]["messages"]
                            if m["content"] == CANCELLED_STATUS]
                assert len(statuses) == 1
                with trio.fail_after(20):
                    while True:
                        state = await ws.call("session.list", {"task_id": task_id})
                        mine = next(s for s in state["sessions"] if s["id"] == sid)
                        if mine["state"] == "WAITING_FOR_INPUT":
                            break
                        await trio.sleep(0.3)
                queue = await ws.call("queue.list", {"session_id": sid})
                assert [e["id"] for e in queue["entries"]] == [queued["entry"]["id"]]
                # And it works as before: a new turn in the other session.
                await ws.call("message.add", {"session_id": other, "content": "again"})
                await ws.wait_for(lambda f: f["action"] == "session.turn.completed"
                                  and f["payload"]["session_id"] == other
                                  and f["payload"]["stop_reason"] == "end_turn",
                                  after=0, timeout=20)
                assert "Traceback" not in srv.log()

        # Stopped: nothing it acknowledged is missing from the database.
        db = data / "turnvisor.db"
        assert await trio.to_thread.run_sync(db_rows, db, "PRAGMA integrity_check") == [("ok",)]
        ids = {r[0] for r in await trio.to_thread.run_sync(db_rows, db, "SELECT id FROM tasks")}
        assert {task_id, after_id, *created_while_full} <= ids
        rows = await trio.to_thread.run_sync(
            db_rows, db, "SELECT id FROM messages WHERE session_id = ? ORDER BY rowid", other)
        assert [m["id"] for m in kept] == [r[0] for r in rows][:len(kept)]
        entries = await trio.to_thread.run_sync(
            db_rows, db, "SELECT id FROM queue_entries WHERE session_id = ?", sid)
        assert entries == [(queued["entry"]["id"],)]
