"""``turnvisor backup`` and ``turnvisor restore`` (issue 32, item 5).

The round trip runs the real commands beside a real ``turnvisor serve`` that
streams turns in two sessions while the backups are taken: each backup is a
consistent database (integrity ok, mode 0600) holding everything acknowledged
before it started; restore is refused while the server runs, and once it is
stopped the data dir gets the backup back (what came after the backup gone,
the previous database kept beside it) and serves it.
"""

from __future__ import annotations

import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.storage.db import SCHEMA_VERSION, Db
from tests.support.serverproc import REPO_ROOT, server_process
from tests.support.ws import WsClient, ws_client
from tests.web.support import launch, new_task
from web.cli import main


async def turnvisor(*args: str) -> subprocess.CompletedProcess[bytes]:
    script = Path(sys.executable).with_name("turnvisor")
    return await trio.run_process([str(script), *args], check=False, capture_stdout=True,
                                  capture_stderr=True, stdin=subprocess.DEVNULL, cwd=REPO_ROOT)


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


async def stream_turns(ws: WsClient, sid: str, done: trio.Event) -> int:
    """Streamed turns one after another in ``sid`` until ``done``; how many ended."""
    ended = 0
    while not done.is_set():
        mark = len(ws.notifications)
        await ws.call("message.add", {"session_id": sid, "content": "/delay 300"})
        await ws.wait_for(lambda f: f["action"] == "session.turn.completed"
                          and f["payload"]["session_id"] == sid, after=mark, timeout=20)
        ended += 1
    return ended


def check_backups(backups: list[tuple[Path, set[str]]], task_id: str, after: str) -> None:
    """Each backup: one consistent file, 0600, with what was acknowledged before it."""
    for i, (path, _) in enumerate(backups):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert rows(path, "PRAGMA integrity_check") == [("ok",)]
        assert rows(path, "PRAGMA journal_mode") == [("delete",)]
        assert not Path(f"{path}-wal").exists()
        ids = {r[0] for r in rows(path, "SELECT id FROM tasks")}
        earlier = set().union(*(c for _, c in backups[:i + 1]))
        assert {task_id} | earlier <= ids and after not in ids


async def test_backup_while_streaming_then_restore_round_trip(tmp_path: Path) -> None:
    data = tmp_path / "data"
    backups: list[tuple[Path, set[str]]] = []
    with trio.fail_after(120):
        async with server_process(data, log_path=tmp_path / "server.log") as srv, \
                ws_client(srv) as ws:
            task_id = await new_task(ws, "kept by the backup")
            sessions = [await launch(ws, task_id, agent) for agent in ("mock", "mock-codex")]
            for sid in sessions:
                await ws.call("session.subscribe", {"session_id": sid})
            done = trio.Event()
            counts: list[int] = []

            async def streaming(sid: str) -> None:
                counts.append(await stream_turns(ws, sid, done))

            async with trio.open_nursery() as nursery:
                for sid in sessions:
                    nursery.start_soon(streaming, sid)
                for i in range(3):
                    await trio.sleep(0.4)
                    titles = {(await ws.call("task.create", {"title": f"before {i}"}))["id"]}
                    path = tmp_path / f"backup-{i}.db"
                    result = await turnvisor("backup", str(path), "--data-dir", str(data))
                    assert result.returncode == 0, result.stderr.decode()
                    assert f"backed up {data}" in result.stdout.decode()
                    backups.append((path, titles))
                done.set()
            assert sum(counts) >= 2  # the backups ran beside streamed turns
            # Refused while the server holds the data dir; nothing touched.
            refused = await turnvisor("restore", str(backups[0][0]), "--data-dir", str(data))
            assert refused.returncode == 2
            assert refused.stderr.decode().strip() == (
                f"turnvisor: data dir {data} in use by pid {srv.pid}: stop that server "
                "first, or pick another --data-dir")
            after = (await ws.call("task.create", {"title": "after the backups"}))["id"]
            messages = {sid: (await ws.call("message.list", {"session_id": sid}))["messages"]
                        for sid in sessions}

        check_backups(backups, task_id, after)

        # Stopped: the last backup goes back in; what came later is gone, the old db kept.
        last = backups[-1][0]
        result = await turnvisor("restore", str(last), "--data-dir", str(data))
        assert result.returncode == 0, result.stderr.decode()
        out = result.stdout.decode()
        assert f"restored {last} into {data}" in out and "before-restore-" in out
        kept = next(data.glob("turnvisor.db.before-restore-*"))
        assert after in {r[0] for r in rows(kept, "SELECT id FROM tasks")}
        assert stat.S_IMODE((data / "turnvisor.db").stat().st_mode) == 0o600
        async with server_process(data, log_path=tmp_path / "server.log") as srv, \
                ws_client(srv) as ws:
            ids = {t["id"] for t in (await ws.call("task.list"))["tasks"]}
            assert {task_id} | backups[-1][1] <= ids and after not in ids
            for sid in sessions:
                got = (await ws.call("message.list", {"session_id": sid}))["messages"]
                users = [m["id"] for m in got if m["role"] == "user"]
                assert users == [m["id"] for m in messages[sid]
                                 if m["role"] == "user"][:len(users)]
                assert users
                state = await ws.call("session.list", {"task_id": task_id})
                assert all(s["state"] == "WAITING_FOR_INPUT" for s in state["sessions"])
            # And it serves: a turn in the restored session.
            await ws.call("session.subscribe", {"session_id": sessions[0]})
            await ws.call("message.add", {"session_id": sessions[0], "content": "again"})
            await ws.wait_for(lambda f: f["action"] == "session.turn.completed"
                              and f["payload"]["session_id"] == sessions[0], timeout=20)


def one_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("turnvisor: "), err
    return err


def test_restore_refuses_what_is_not_a_backup_of_this_version(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    good = tmp_path / "good.db"
    data.mkdir()
    Db(data / "turnvisor.db").close()
    assert main(["backup", str(good), "--data-dir", str(data)]) == 0
    capsys.readouterr()
    before = (data / "turnvisor.db").read_bytes()

    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all " * 100)
    assert "is not a Turnvisor database (file is not a database)" in one_line(
        capsys, "restore", str(junk), "--data-dir", str(data))
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    assert "is not a Turnvisor database (it has no Turnvisor tables)" in one_line(
        capsys, "restore", str(other), "--data-dir", str(data))
    newer = tmp_path / "newer.db"
    newer.write_bytes(good.read_bytes())
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    assert (f"was written by a newer Turnvisor (schema {SCHEMA_VERSION + 1}, this one knows "
            f"up to {SCHEMA_VERSION})") in one_line(capsys, "restore", str(newer),
                                                   "--data-dir", str(data))
    assert "is not a file" in one_line(capsys, "restore", str(tmp_path / "none.db"),
                                       "--data-dir", str(data))
    assert (data / "turnvisor.db").read_bytes() == before
    assert not list(data.glob("*before-restore*"))

    # A backup never overwrites, and needs a database to copy.
    assert "already exists" in one_line(capsys, "backup", str(good), "--data-dir", str(data))
    assert "there is no database" in one_line(capsys, "backup", str(tmp_path / "x.db"),
                                              "--data-dir", str(tmp_path / "empty"))
    # Into a data dir that has none yet: no previous database to keep.
    fresh = tmp_path / "fresh"
    assert main(["restore", str(good), "--data-dir", str(fresh)]) == 0
    assert "previous database" not in capsys.readouterr().out
    assert rows(fresh / "turnvisor.db", "PRAGMA integrity_check") == [("ok",)]
