"""`turnvisor serve` as a real subprocess: SIGTERM/SIGINT with a running turn
stop it gracefully, within a few seconds, and leave no agent behind."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.helpers import TOKEN, Server, kill_quietly, pgid_alive, ws_client

from .support import http, new_task, running_session

REPO = Path(__file__).resolve().parents[2]


async def read_url(proc: trio.Process) -> str:
    assert proc.stdout is not None
    buf = b""
    while b"\n" not in buf:
        data = await proc.stdout.receive_some(4096)
        assert data, "turnvisor serve exited before listening"
        buf += data
    line = buf.split(b"\n", 1)[0].decode()
    assert line.startswith("Turnvisor listening on http://"), line
    url = line.removeprefix("Turnvisor listening on ")
    assert url.endswith(f"/?token={TOKEN}"), url
    return url.removesuffix(f"/?token={TOKEN}")


def agent_groups(db: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(db, timeout=10) as conn:
        rows = conn.execute("SELECT pgid, session_id FROM agent_groups").fetchall()
    conn.close()
    return [(int(pgid), str(sid)) for pgid, sid in rows]


def session_state(db: Path, sid: str) -> str:
    with sqlite3.connect(db, timeout=10) as conn:
        (state,) = conn.execute("SELECT state FROM task_sessions WHERE id = ?",
                                (sid,)).fetchone()
    conn.close()
    return str(state)


@pytest.mark.parametrize(("signum", "agent"), [(signal.SIGTERM, "mock"),
                                                (signal.SIGINT, "mock-codex")])
async def test_signal_stops_the_server_and_its_agents(
    tmp_path: Path, signum: signal.Signals, agent: str
) -> None:
    data = tmp_path / "data"
    # INFO: the log is checked for the token below.
    env = {**os.environ, "TURNVISOR_TOKEN": TOKEN, "TURNVISOR_LOG": "INFO"}
    env.pop("TURNVISOR_DATA_DIR", None)
    stderr_path = tmp_path / "stderr.txt"
    pgids: list[int] = []
    with stderr_path.open("wb") as stderr, trio.fail_after(40):
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "web", "serve", "--port", "0", "--data-dir", str(data)],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=stderr)
        try:
            url = await read_url(proc)
            srv = Server(url, TOKEN, None, trio.Event(), data)  # type: ignore[arg-type]
            async with http(srv) as h:
                assert (await h.get("/api/v1/health")).json() == {"status": "ok"}
                # A page opened with the one-time ?token= (the URL it printed).
                page = await h.get("/", params={"token": TOKEN}, headers={"Authorization": ""})
                assert page.status_code == 302
            async with ws_client(srv) as ws:
                task_id = await new_task(ws)
                sid = await running_session(ws, task_id, "/delay 30000", agent)
                groups = await trio.to_thread.run_sync(agent_groups, data / "turnvisor.db")
                assert [s for _, s in groups] == [sid]
                pgids = [pgid for pgid, _ in groups]
                assert all(pgid_alive(p) for p in pgids)

                started = trio.current_time()
                proc.send_signal(signum)
                with trio.fail_after(8):
                    code = await proc.wait()
                took = trio.current_time() - started
                # The server said goodbye (1001) rather than dropping the socket.
                with trio.fail_after(5):
                    while not ws.closed:
                        await ws._changed.wait()
                assert ws.conn.closed is not None
                assert ws.conn.closed.code == 1001, ws.conn.closed
            assert code == 0, (code, stderr_path.read_text()[-3000:])
            assert took < 6, took
            # The agent's whole process group is gone, and the store says so.
            assert not any(pgid_alive(p) for p in pgids), pgids
            assert await trio.to_thread.run_sync(agent_groups, data / "turnvisor.db") == []
            assert await trio.to_thread.run_sync(session_state, data / "turnvisor.db",
                                                 sid) != "RUNNING"
            log = stderr_path.read_text()
            assert "Traceback" not in log, log[-3000:]
            assert TOKEN not in log
        finally:
            if proc.returncode is None:
                proc.kill()
                with trio.move_on_after(5):
                    await proc.wait()
            for pgid in pgids:
                kill_quietly(pgid)
