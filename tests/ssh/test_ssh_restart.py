"""A ``turnvisor serve`` SIGKILLed mid-turn leaves its detached agentctl running
on the SSH host (a dropped connection does not stop it); the next ``turnvisor
serve`` on the same data dir stops it before it listens (the startup sweep)."""

from __future__ import annotations

import json
import signal
import tomllib
from pathlib import Path

import trio

from protocols.process import process_identity
from supervisor.config import Config
from supervisor.executors.container import backend_instance
from tests.ssh.sshd import Sshd, ssh_profile
from tests.support.serverproc import server_process
from tests.support.ws import ws_client
from tests.web.support import new_task, running_session


def toml_of(sshd: Sshd) -> str:
    lines = ["[agents.mock]"] + [f"{key} = {json.dumps(value)}"
                                 for key, value in ssh_profile(sshd).items()]
    return "\n".join(lines) + "\n"


async def test_a_sigkilled_backend_leaves_agentctl_and_the_next_start_sweeps_it(
        tmp_path: Path, sshd: Sshd) -> None:
    data = tmp_path / "data"
    toml = toml_of(sshd)
    data.mkdir(mode=0o700)
    instance = backend_instance(Config.from_mapping(data, tomllib.loads(toml)))
    runs = sshd.remote_data / "agentctl" / instance
    with trio.fail_after(120):
        async with server_process(data, toml=toml, log_level="INFO") as srv, \
                ws_client(srv) as ws:
            await running_session(ws, await new_task(ws, "ssh restart"), "/delay 60000", "mock")
            [run] = [json.loads((d / "agentctl.pid").read_text()) for d in runs.iterdir()]
            srv.proc.send_signal(signal.SIGKILL)
            await srv.proc.wait()
        # The backend is gone; the host's agentctl (detached) is not.
        assert process_identity(run["pid"]) == run["identity"]
        async with server_process(data, toml=toml, log_level="INFO") as srv:
            # Listening means the supervisor has started, its sweep done.
            assert process_identity(run["pid"]) is None
            assert list(runs.iterdir()) == []
            assert "startup sweep: stopped agentctl" in srv.log_path.read_text()
