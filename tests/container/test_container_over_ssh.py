"""The container executor on an engine of another host: ``docker_host =
"ssh://user@host:PORT/path/to/engine.sock"``.  The host is this machine behind
a real ``sshd`` (tests/ssh/sshd.py); the engine is the tests' Podman service.
The engine's socket and the container's agentctl are both reached through
local unix sockets forwarded over that one SSH connection."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from supervisor.config import Config
from supervisor.executors.agentctl_adapter import AgentctlAdapter
from supervisor.executors.container import LABEL_BACKEND, LABEL_SESSION, backend_instance
from supervisor.executors.ssh_host import SshHost, control_dir
from supervisor.models import SessionState
from supervisor.root import open_supervisor
from supervisor.session.lifecycle import CancelOutcome
from supervisor.ssh_target import SshTarget
from tests.container.container_support import (
    Engine,
    agent_texts,
    container_profiles,
    session_containers,
    wait_chunks,
)
from tests.ssh.sshd import Sshd, running_sshd
from tests.support.sessions import new_agentctl_session
from tests.support.wait import wait_state


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    with running_sshd(tmp_path / "sshd") as server:
        yield server


def over_ssh(tmp_path: Path, engine: Engine, sshd: Sshd) -> Config:
    return Config.from_mapping(tmp_path / "data", {"agents": container_profiles(
        engine.image, docker_host=f"ssh://{sshd.destination}:{sshd.port}{engine.socket}",
        ssh_identity=str(sshd.identity), ssh_known_hosts=str(sshd.known_hosts))})


async def test_a_session_on_an_engine_over_ssh(tmp_path: Path, engine: Engine,
                                               sshd: Sshd) -> None:
    config = over_ssh(tmp_path, engine, sshd)
    # What a backend SIGKILLed before this one left on that engine: swept at start.
    left = (await trio.run_process(
        [engine.podman, "create", "--label", f"{LABEL_BACKEND}={backend_instance(config)}",
         "--label", f"{LABEL_SESSION}=gone", engine.image], capture_stdout=True)).stdout
    with trio.fail_after(120):
        async with open_supervisor(config) as sup:
            assert session_containers(engine.podman, "gone") == [], left
            caller, sid = await new_agentctl_session(sup, "mock")
            [container] = session_containers(engine.podman, sid)
            adapter = sup.lifecycle.executions[sid].adapter
            assert isinstance(adapter, AgentctlAdapter)
            # agentctl is reached through a socket forwarded over ssh, not a port here.
            assert adapter.connection.uds is not None
            assert await trio.Path(adapter.connection.uds).is_socket()

            await sup.orchestrator.send_message(caller, sid, "/delay 10000")
            await wait_chunks(sup, caller, sid)
            outcome = await sup.orchestrator.cancel(caller, sid)
            assert outcome is CancelOutcome.ACKNOWLEDGED
            assert (await sup.orchestrator.session(caller, sid)).state is \
                SessionState.WAITING_FOR_INPUT
            # The shared connection killed: the link goes down and comes back
            # (the engine's socket and agentctl's forwarded again), the container
            # and its agent untouched.
            link = adapter.connection
            profile = config.profiles["mock"]
            assert profile.ssh is not None
            host = SshHost(SshTarget(destination=sshd.destination, port=sshd.port,
                                     identity=profile.ssh.identity,
                                     known_hosts=profile.ssh.known_hosts),
                           control_dir(config.data_dir), connect_s=10)
            master = await host.master_pid()
            assert master is not None
            os.kill(master, signal.SIGKILL)
            while link.reachable:
                await link.until_changed()
            while not link.reachable:
                await link.until_changed()
            assert not link.closed.is_set()
            assert await host.master_pid() not in (None, master)
            await sup.orchestrator.send_message(caller, sid, "hello again")
            await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=30)
            assert (await agent_texts(sup, caller, sid))[-1] == "hello again"
            assert [c["Id"] for c in session_containers(engine.podman, sid)] == \
                [container["Id"]]
        # Teardown stopped and removed it, over the same connection.
        assert session_containers(engine.podman, sid) == []
    assert "Accepted publickey" in sshd.log()
