"""`turnvisor serve` as a real subprocess: SIGTERM/SIGINT with a running turn
stop it gracefully, within a few seconds, and leave no agent behind."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

import pytest
import trio

from tests.support.leaks import kill_group, pgid_alive
from tests.support.serverproc import server_process
from tests.support.ws import ws_client

from .support import http, new_task, running_session


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
    pgids: list[int] = []
    # INFO: the log is checked for the token below.
    with trio.fail_after(40):
        async with server_process(data, log_level="INFO") as srv:
            proc = srv.proc
            try:
                async with http(srv) as h:
                    assert (await h.get("/api/v1/health")).json() == {"status": "ok"}
                    # A page opened with ?token= (the URL in server.json): the shell.
                    page = await h.get("/", params={"token": srv.token},
                                       headers={"Authorization": ""})
                    assert page.status_code == 200
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
                            await ws.changed()
                    assert ws.conn.closed is not None
                    assert ws.conn.closed.code == 1001, ws.conn.closed
                assert code == 0, (code, srv.log()[-3000:])
                assert took < 6, took
                # The agent's whole process group is gone, and the store says so.
                assert not any(pgid_alive(p) for p in pgids), pgids
                assert await trio.to_thread.run_sync(agent_groups, data / "turnvisor.db") == []
                assert await trio.to_thread.run_sync(session_state, data / "turnvisor.db",
                                                     sid) != "RUNNING"
                log = srv.log()
                assert "Traceback" not in log, log[-3000:]
                assert srv.token not in log
            finally:
                for pgid in pgids:
                    kill_group(pgid)
