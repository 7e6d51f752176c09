"""A ``turnvisor serve`` stopped (SIGTERM) or killed (SIGKILL) mid-turn leaves
its session's detached agentctl running on the SSH host; the next ``turnvisor
serve`` on the same data dir takes the running turn over (its output goes on
in the same turn, a cancel lands), and its start sweeps only the runs of this
data dir whose session is gone: another data dir's are left alone."""

from __future__ import annotations

import json
import signal
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
from tests.support.restart_takeover import (
    RunningTurn,
    delete_until,
    run_then_stop,
    take_over_and_cancel,
)
from tests.support.serverproc import server_process
from tests.support.ws import ws_client


def toml_of(sshd: Sshd) -> str:
    lines = ["[agents.mock]"] + [f"{key} = {json.dumps(value)}"
                                 for key, value in ssh_profile(sshd).items()]
    return "\n".join(lines) + "\n"


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
    # (Made: the sshd fixture's teardown finds its socket dir by this data dir.)
    (tmp_path / "planter").mkdir()
    host = SshHost(profile.ssh, control_dir(tmp_path / "planter"), connect_s=10)

    async def leave(turn: RunningTurn) -> list[dict[str, Any]]:
        """Ours recorded; left on the host besides: a run of this data dir whose
        session the store does not have, and another data dir's."""
        assert profile.ssh is not None
        left = [pid_record(runs / instance / turn.sid)]
        await host.ensure_master()
        for name in (f"{instance}/gone-session", "another-data-dir/its-own"):
            _, attached = await start_remote(host, config, profile, str(tmp_path), name,
                                             "t" * 40)
            assert not attached
            left.append(pid_record(runs / name))
        return left

    with trio.fail_after(180):
        turn, (ours, gone_record, other) = await run_then_stop(data, toml, "mock", signum,
                                                              leave)
        gone = runs / instance / "gone-session"
        # The backend is gone; the host's agentctl (detached) runs the turn on.
        assert alive(ours)
        async with server_process(data, toml=toml, log_level="INFO") as srv, \
                ws_client(srv) as ws:
            # Listening means the supervisor has started, its sweep done.
            assert not alive(gone_record) and not gone.exists()
            assert alive(other)
            assert pid_record(runs / instance / turn.sid) == ours  # re-attached, not restarted
            await take_over_and_cancel(srv, ws, turn)
            assert alive(ours), srv.log_tail(80)  # a cancel stops the turn, not the agent
            # The session deleted: its host's agentctl stopped, its run gone.
            await delete_until(ws, turn.sid, lambda: not alive(ours) and not (
                runs / instance / turn.sid).exists())
        assert alive(other)  # another data dir's run is not this backend's to stop
        done = await host.run([*profile.ssh.remote_turnvisor, "hosts", "stop",
                               "another-data-dir/its-own"], timeout_s=30)
        assert done.stdout.strip() == b"stopped"
        assert not alive(other)
