"""Sessions on ``executor = "ssh"`` through the WebSocket API: a real ``sshd``
on a loopback port (tests/ssh/sshd.py), this machine as the host, the mock
agent behind a detached ``turnvisor agentctl`` started there over ssh and
reached through a forwarded unix socket over one shared connection."""

from __future__ import annotations

import json
import os
from pathlib import Path

import trio

from protocols.process import process_identity
from supervisor.executors.agentctl_adapter import AgentctlAdapter
from supervisor.executors.container import backend_instance
from supervisor.profiles import parse_profiles
from tests.ssh.sshd import Sshd, ssh_profile
from tests.support.server import Server, running_server
from tests.support.ws import is_state, is_turn_completed, ws_client
from tests.web.support import launch, new_task, start_turn


def profiles(sshd: Sshd, **extra: object) -> object:
    return parse_profiles({"mock": ssh_profile(sshd, **extra)})


def remote_runs(sshd: Sshd, srv: Server) -> list[dict[str, object]]:
    """The detached agentctls this backend has on the host (their pid records)."""
    base = sshd.remote_data / "agentctl" / backend_instance(srv.sup.config)
    if not base.is_dir():
        return []
    return [json.loads((run / "agentctl.pid").read_text()) for run in sorted(base.iterdir())
            if (run / "agentctl.pid").is_file()]


def cmdlines() -> dict[int, str]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    out[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                pass
    return out


def adapter_of(srv: Server, sid: str) -> AgentctlAdapter:
    adapter = srv.sup.lifecycle.executions[sid].adapter
    assert isinstance(adapter, AgentctlAdapter)
    return adapter


async def test_a_turn_and_a_cancel_over_ssh(tmp_path: Path, sshd: Sshd) -> None:
    with trio.fail_after(120):
        async with running_server(tmp_path / "data", profiles=profiles(sshd)) as srv, \
                ws_client(srv) as ws:
            sid = await launch(ws, await new_task(ws), "mock")
            await ws.call("session.subscribe", {"session_id": sid})
            await ws.call("message.add", {"session_id": sid, "content": "hello over ssh"})
            await ws.wait_for(is_turn_completed(sid), timeout=30)
            adapter = adapter_of(srv, sid)
            assert adapter.connection.uds is not None
            [run] = remote_runs(sshd, srv)
            pid = int(str(run["pid"]))
            assert process_identity(pid) == run["identity"]
            # The token is on no command line of this machine (both ends of the ssh).
            token = adapter.connection._token
            assert len(token) >= 32
            lines = cmdlines()
            assert "web.agentctl.detached" in lines[pid], lines[pid]
            assert any("protocols.mock_agent" in c for c in lines.values())
            assert [c for c in lines.values() if token in c] == []

            await start_turn(ws, sid, "/delay 20000")
            start = trio.current_time()
            result = await ws.call("agent.cancel", {"session_id": sid}, timeout=20)
            assert (result["success"], result["session_id"]) == (True, sid), result
            assert trio.current_time() - start < 10
            await ws.wait_for(is_state(sid, "WAITING_FOR_INPUT"), timeout=20)
            # The same agentctl serves the next prompt.
            await ws.call("message.add", {"session_id": sid, "content": "again"})
            await ws.wait_for(is_state(sid, "RUNNING"), timeout=20)
            await ws.wait_for(is_state(sid, "WAITING_FOR_INPUT"), timeout=30)
            assert [r["pid"] for r in remote_runs(sshd, srv)] == [pid]
        # The backend stopped: the host's agentctl (and its agent) with it.
        with trio.fail_after(30):
            while process_identity(pid) is not None:
                await trio.sleep(0.1)
