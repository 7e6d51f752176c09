"""A ``turnvisor serve`` stopped (SIGTERM) or killed (SIGKILL) mid-turn leaves
its session's detached agentctl running on the SSH host; the next ``turnvisor
serve`` on the same data dir takes the running turn over (its output goes on
in the same turn, a cancel lands), and its start sweeps only the runs of this
data dir whose session is gone: another data dir's are left alone."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import tomllib
from pathlib import Path
from typing import Any

import pytest
import trio

from protocols.process import process_identity
from supervisor.config import Config
from supervisor.executors.container import backend_instance
from supervisor.executors.ssh import start_remote
from supervisor.executors.ssh_host import SshHost, control_dir
from tests.ssh.sshd import Sshd, ssh_profile
from tests.support.serverproc import server_process
from tests.support.ws import WsClient, is_state, ws_client
from tests.web.support import new_task


def toml_of(sshd: Sshd) -> str:
    lines = ["[agents.mock]"] + [f"{key} = {json.dumps(value)}"
                                 for key, value in ssh_profile(sshd).items()]
    return "\n".join(lines) + "\n"


async def turn_text(ws: WsClient, sid: str, turn_id: str) -> str:
    listed = await ws.call("message.list", {"session_id": sid})
    return "".join(m["content"] for m in listed["messages"]
                   if m["turn_id"] == turn_id and m["role"] == "agent" and m["kind"] == "text")


async def chunks_past(ws: WsClient, sid: str, turn_id: str, count: int) -> list[int]:
    """The turn's chunk numbers once it has streamed more than ``count`` of them."""
    with trio.fail_after(40):
        while True:
            numbers = [int(n) for n in re.findall(r"chunk(\d+) ",
                                                  await turn_text(ws, sid, turn_id))]
            if len(set(numbers)) > count:
                return numbers
            await trio.sleep(0.05)


def turn_row(db: Path, turn_id: str) -> tuple[Any, ...]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT state, stop_reason FROM turns WHERE id = ?",
                           (turn_id,)).fetchone()
    conn.close()
    return tuple(row)


def pid_record(run: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((run / "agentctl.pid").read_text())
    return record


def alive(record: dict[str, Any]) -> bool:
    return process_identity(int(record["pid"])) == record["identity"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
async def test_a_backend_restart_takes_the_turn_over_and_sweeps_only_what_is_gone(
        tmp_path: Path, sshd: Sshd, signum: signal.Signals) -> None:
    data = tmp_path / "data"
    toml = toml_of(sshd)
    data.mkdir(mode=0o700)
    config = Config.from_mapping(data, tomllib.loads(toml))
    profile = config.profiles["mock"]
    assert profile.ssh is not None
    instance = backend_instance(config)
    runs = sshd.remote_data / "agentctl"
    with trio.fail_after(180):
        async with server_process(data, toml=toml, log_level="INFO") as srv, \
                ws_client(srv) as ws:
            task_id = await new_task(ws, "ssh restart")
            session = await ws.call("session.launch", {"task_id": task_id, "agent": "mock"})
            sid = session["id"]
            turn_id = (await ws.call("message.add", {"session_id": sid,
                                                     "content": "/delay 60000"}))["turn_id"]
            before = await chunks_past(ws, sid, turn_id, 3)
            ours = pid_record(runs / instance / sid)
            # What is left on the host besides: a run of this data dir whose
            # session the store does not have, and another data dir's.
            host = SshHost(profile.ssh, control_dir(tmp_path / "planter"), connect_s=10)
            await host.ensure_master()
            left = {}
            for name in (f"{instance}/gone-session", "another-data-dir/its-own"):
                _, attached = await start_remote(host, config, profile, str(tmp_path), name,
                                                 "t" * 40)
                assert not attached
                left[name] = pid_record(runs / name)
            srv.proc.send_signal(signum)
            with trio.fail_after(30):
                await srv.proc.wait()
        # The backend is gone; the host's agentctl (detached) runs the turn on.
        assert alive(ours)
        async with server_process(data, toml=toml, log_level="INFO") as srv, \
                ws_client(srv) as ws:
            # Listening means the supervisor has started, its sweep done.
            gone, other = left.values()
            assert not alive(gone) and not (runs / instance / "gone-session").exists()
            assert alive(other)
            assert pid_record(runs / instance / sid) == ours  # re-attached, not restarted
            await ws.call("session.subscribe", {"session_id": sid})
            listed = await ws.call("session.list", {"task_id": task_id})
            assert listed["sessions"][0]["state"] == "RUNNING", listed
            # The turn goes on: the same turn id streams past what it had.
            after = await chunks_past(ws, sid, turn_id, max(before) + 5)
            assert sorted(set(after))[: len(set(before))] == sorted(set(before))
            result = await ws.call("agent.cancel", {"session_id": sid}, timeout=30)
            assert (result["success"], result["session_id"]) == (True, sid), result
            await ws.wait_for(is_state(sid, "WAITING_FOR_INPUT"), timeout=30)
            assert alive(ours), srv.log_tail(80)  # a cancel stops the turn, not the agent
            state, stop_reason = await trio.to_thread.run_sync(
                turn_row, data / "turnvisor.db", turn_id)
            assert stop_reason == "cancelled", (state, stop_reason)
            # The session deleted: its host's agentctl stopped, its run gone.
            await ws.call("session.delete", {"session_id": sid})
            with trio.fail_after(30):
                while alive(ours) or (runs / instance / sid).exists():
                    await trio.sleep(0.1)
        assert alive(other)  # another data dir's run is not this backend's to stop
        done = await host.run([*profile.ssh.remote_turnvisor, "hosts", "stop",
                               "another-data-dir/its-own"], timeout_s=30)
        assert done.stdout.strip() == b"stopped"
        assert not alive(other)
