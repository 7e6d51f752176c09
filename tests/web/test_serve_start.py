"""`turnvisor serve` starting (issue 32, item 4), the real process: one server
per data dir (a second start refuses, touching nothing, and a SIGKILLed
server's lock is gone with it), and every start-up failure one line naming
its fix, exit status 2."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from supervisor.storage.db import SCHEMA_VERSION, Db
from tests.support.leaks import kill_group, pgid_alive
from tests.support.serverproc import REPO_ROOT, server_process
from tests.support.ws import ws_client

from .support import new_task, running_session


async def serve_once(data_dir: Path, *args: str) -> tuple[int, list[str]]:
    """``turnvisor serve`` that is expected not to start: its status and stderr lines."""
    cmd = [sys.executable, "-m", "web", "serve", "--data-dir", str(data_dir), *args]
    if "--port" not in args:
        cmd += ["--port", "0"]
    env = {**os.environ, "TURNVISOR_TOKEN": "start-test-token-0123456789-0123456789",
           "TURNVISOR_LOG":
           "WARNING"}
    env.pop("TURNVISOR_DATA_DIR", None)
    with trio.fail_after(30):
        done = await trio.run_process(cmd, stdin=subprocess.DEVNULL, capture_stdout=True,
                                      capture_stderr=True, check=False, env=env, cwd=REPO_ROOT)
    assert b"listening" not in done.stdout, done.stdout
    return done.returncode, done.stderr.decode(errors="replace").splitlines()


def one_line(lines: list[str]) -> str:
    assert len(lines) == 1, lines
    assert lines[0].startswith("turnvisor: "), lines
    return lines[0]


def agent_groups(db: Path) -> list[int]:
    conn = sqlite3.connect(db, timeout=10)
    try:
        return [int(r[0]) for r in conn.execute("SELECT pgid FROM agent_groups")]
    finally:
        conn.close()


async def test_a_second_server_on_a_data_dir_refuses_and_touches_nothing(
    tmp_path: Path
) -> None:
    data = tmp_path / "data"
    pgids: list[int] = []
    try:
        async with server_process(data) as srv, ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid = await running_session(ws, task_id, "/delay 60000")
            pgids = await trio.to_thread.run_sync(agent_groups, data / "turnvisor.db")
            assert pgids and all(pgid_alive(p) for p in pgids)
            code, lines = await serve_once(data)
            assert code == 2
            assert one_line(lines) == (f"turnvisor: data dir {data.resolve()} in use by pid "
                                       f"{srv.pid}: stop that server first, or pick another "
                                       "--data-dir")
            # No sweep, no recovery: the first server's turn streams on, its agent alive.
            assert all(pgid_alive(p) for p in pgids)
            assert await trio.to_thread.run_sync(agent_groups,
                                                 data / "turnvisor.db") == pgids
            session = await ws.call("session.list", {"task_id": task_id})
            assert [s["state"] for s in session["sessions"] if s["id"] == sid] == ["RUNNING"]
            seen = len(ws.notifications)
            await ws.wait_for(lambda f: f["action"].startswith("session.message"), after=seen)
            # SIGKILL: the kernel drops the lock with the process; the next start works.
            srv.proc.send_signal(signal.SIGKILL)
            await srv.proc.wait()
        async with server_process(data) as again:
            assert again.pid != srv.pid
    finally:
        for pgid in pgids:
            kill_group(pgid)


@contextlib.contextmanager
def listening_socket() -> Iterator[int]:
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


async def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with listening_socket() as port:
        code, lines = await serve_once(tmp_path / "data", "--port", str(port))
    assert code == 2
    assert f"port {port} on 127.0.0.1 is in use" in one_line(lines)
    assert "--port" in lines[0]


@pytest.mark.parametrize(("args", "said"), [
    (("--port", "70000"), "--port 70000 is out of range"),
    (("--port", "-1"), "--port -1 is out of range"),
    (("--host", "no-such-host.invalid"), "--host no-such-host.invalid cannot be resolved"),
    (("--host", "192.0.2.1"), "--host 192.0.2.1 is not an address of this machine"),
])
async def test_bad_listening_addresses_are_one_line(tmp_path: Path, args: tuple[str, ...],
                                                    said: str) -> None:
    code, lines = await serve_once(tmp_path / "data", *args)
    assert code == 2
    assert said in one_line(lines)


async def test_a_corrupt_database_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "turnvisor.db").write_bytes(os.urandom(16384))
    code, lines = await serve_once(data)
    assert code == 2
    line = one_line(lines)
    assert f"the database {data.resolve() / 'turnvisor.db'} cannot be opened" in line
    assert "file is not a database" in line and "move it away" in line


async def test_a_database_from_a_newer_turnvisor_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    Db(data / "turnvisor.db").close()
    conn = sqlite3.connect(data / "turnvisor.db")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    code, lines = await serve_once(data)
    assert code == 2
    line = one_line(lines)
    assert f"written by a newer Turnvisor (schema {SCHEMA_VERSION + 1}" in line
    assert "run that version" in line


async def test_an_unwritable_data_dir_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "ro"
    data.mkdir()
    if os.geteuid() == 0:
        # Root writes through any permission bits: a read-only filesystem it is.
        mounted = await trio.run_process(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs",
                                          str(data)], check=False, capture_stderr=True)
        if mounted.returncode != 0:
            pytest.skip(f"cannot mount a read-only tmpfs here: {mounted.stderr.decode()!r}")
    else:
        data.chmod(0o500)
    try:
        code, lines = await serve_once(data)
    finally:
        if os.geteuid() == 0:
            await trio.run_process(["umount", str(data)], check=False)
        else:
            data.chmod(0o700)
    assert code == 2
    line = one_line(lines)
    assert f"data dir {data.resolve()} is not writable" in line
    assert "permissions" in line
