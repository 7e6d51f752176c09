"""A hostile agent under the default sandbox (issue 17, items 1 and 6).

The backend runs as a real ``python -m web serve`` (its token in the data dir,
as by default) and the agent is launched through a ``turnvisor.toml`` profile
that does not name a sandbox: the default (bwrap, which ``make test``
installs) applies.  Every attempt against the backend's secrets and process
fails; connecting to the server works (the network is shared) but a guessed
token gets 401 — README and docs/reliability.md say so.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import trio

from protocols.sandbox import resolve_mode
from tests.faults.support import wait_turn_end
from tests.support.leaks import pgid_alive, processes_in
from tests.support.server import Server
from tests.support.serverproc import parse_listening
from tests.support.ws import ws_client

REPO = Path(__file__).resolve().parents[2]
HOSTILE = Path(__file__).with_name("hostile_agent.py")
#: The tree agent's child: deaf to the pipes' end.
SLEEP = "sleep 600 </dev/null >/dev/null 2>&1"

TOML = """
[agents.hostile]
protocol = "acp"
command = ["{python}", "{hostile}"]
# A home of its own named by the profile (bound writable, by identity).
env = {{ HOME = "{home}" }}

[agents.tree]
protocol = "acp"
command = ["sh", "-c", "{sleep} & exec {python} -m protocols.mock_agent"]
"""


def _prepare(data: Path, home: Path) -> None:
    data.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    (data / "turnvisor.toml").write_text(TOML.format(python=sys.executable, hostile=HOSTILE,
                                                     home=home, sleep=SLEEP))


@asynccontextmanager
async def serve(data: Path, home: Path, log: Path) -> AsyncIterator[tuple[trio.Process, Server]]:
    """``python -m web serve`` on a free port; its token is the one it stored."""
    _prepare(data, home)
    env = {k: v for k, v in os.environ.items()
           if k not in ("TURNVISOR_TOKEN", "TURNVISOR_DATA_DIR")}
    with log.open("ab") as stderr:
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "web", "serve", "--port", "0", "--data-dir", str(data)],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=stderr)
    try:
        assert proc.stdout is not None
        buf = b""
        with trio.fail_after(30):
            while b"\n" not in buf:
                chunk = await proc.stdout.receive_some(4096)
                assert chunk, "turnvisor serve exited before listening"
                buf += chunk
        found = parse_listening(buf.split(b"\n", 1)[0].decode(), data)
        assert found is not None, buf
        url, token = found
        assert token == (data / "token").read_text().strip()
        yield proc, Server(url, token, None, trio.Event(), data)  # type: ignore[arg-type]
    finally:
        if proc.returncode is None:
            proc.kill()
            with trio.move_on_after(5):
                await proc.wait()
        assert proc.stdout is not None
        await proc.stdout.aclose()


async def run_session(srv: Server, agent: str, prompt: str | None) -> str:
    async with ws_client(srv) as ws:
        task = await ws.call("task.create", {"title": "hostile"})
        sid = str((await ws.call("session.launch", {"task_id": task["id"], "agent": agent}))["id"])
        await ws.call("session.subscribe", {"session_id": sid})
        if prompt is not None:
            mark = len(ws.notifications)
            await ws.call("message.add", {"session_id": sid, "content": prompt})
            end = await wait_turn_end(ws, sid, after=mark, timeout=60)
            assert end["stop_reason"] == "end_turn", end
    return sid


def outside_path() -> Path:
    """A place the agent may not write: the repository, unless it is in /tmp."""
    if str(REPO).startswith(("/tmp/", "/var/tmp/")):
        return Path("/etc/turnvisor-hostile-planted")
    return REPO / ".hostile-planted"


async def test_a_hostile_agent_gets_nothing(tmp_path: Path) -> None:
    assert resolve_mode(None) == "bwrap", "bwrap must work here (make test installs it)"
    data = tmp_path / "data"
    outside = outside_path()
    try:
        with trio.fail_after(120):
            async with serve(data, tmp_path / "home", tmp_path / "serve.log") as (proc, srv):
                sid = await run_session(
                    srv, "hostile", f"/attack {data} {srv.url} {proc.pid} {outside}")
                # In the session's own work dir (DATA_DIR/work/<workspace>/<session>).
                (found,) = (data / "work").glob(f"*/{sid}/attack.json")
                report: dict[str, Any] = json.loads(found.read_text())
                async with httpx.AsyncClient(base_url=srv.url, headers=srv.auth) as h:
                    r = await h.get(f"/api/v1/task-sessions/{sid}/messages")
                    answer = [m["content"] for m in r.json()["messages"] if m["role"] == "agent"]
                    assert json.loads("".join(answer)) == report
                    # The backend lived through it all.
                    assert proc.returncode is None
                    assert (await h.get("/api/v1/health")).status_code == 200
    finally:
        planted = outside.exists()
        outside.unlink(missing_ok=True)
    refused = {k: v for k, v in report.items() if v.startswith("refused")}
    # The secrets: not in its environment, not in the data dir it sees.
    for name in ["env_token", "read_token", "read_db", "read_wal", "read_config"]:
        assert name in refused, (name, report[name])
    # Only the mount points of what is bound back: the work dirs, the agent homes.
    assert report["list_data_dir"] in ("ok: ['work']", "ok: ['homes', 'work']"), \
        report["list_data_dir"]
    # The backend: not in its /proc, not signalable, its group out of reach.
    assert report["backend_in_proc"] == "ok: []", report["backend_in_proc"]
    for name in ["backend_environ", "signal_backend", "signal_backend_group"]:
        assert name in refused, (name, report[name])
    assert "not reachable" in report["signal_parent_group"], report["signal_parent_group"]
    # No terminal to type into.
    assert "controlling_tty" in refused, report["controlling_tty"]
    # Writes: nothing outside the allowed places; the data dir it sees is a
    # tmpfs, gone with the agent.
    assert "write_outside" in refused and not planted, report["write_outside"]
    assert not (data / "planted").exists()
    # Its network is its own: Turnvisor's port on the host's loopback is not
    # even reachable (no token to guess at; no connections to hold open).
    for name in ["guessed_token", "empty_token"]:
        assert report[name].startswith("refused") and "refused" in report[name], report[name]


def _groups(db: Path) -> list[int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return [int(r[0]) for r in conn.execute("SELECT pgid FROM agent_groups")]
    finally:
        conn.close()


async def test_a_sigkilled_backend_leaves_no_sandboxed_agent(tmp_path: Path) -> None:
    """The agent's child ignores the pipes' end and would outlive a SIGKILLed
    backend; in the sandbox's pid namespace it dies with the agent, and the
    restart has nothing left to sweep."""
    assert resolve_mode(None) == "bwrap"
    data = tmp_path / "data"
    with trio.fail_after(90):
        async with serve(data, tmp_path / "home", tmp_path / "serve.log") as (proc, srv):
            await run_session(srv, "tree", "hello")
            (pgid,) = await trio.to_thread.run_sync(_groups, data / "turnvisor.db")
            assert pgid_alive(pgid) and processes_in(data / "work")
            proc.send_signal(signal.SIGKILL)
            assert await proc.wait() == -signal.SIGKILL
        with trio.fail_after(10):
            while pgid_alive(pgid) or processes_in(data / "work"):
                await trio.sleep(0.05)
        async with serve(data, tmp_path / "home", tmp_path / "serve2.log") as (_, srv2):
            assert await trio.to_thread.run_sync(_groups, data / "turnvisor.db") == []
            assert "killed orphaned agent group" not in (tmp_path / "serve2.log").read_text()
            assert srv2.url
