"""A detached agentctl on an SSH host re-attached after a backend restart whose
profile changed meanwhile (DESIGN.md §20): the agentctl and its running turn
are kept, and the session says so — its DTO's ``profile_changed`` names the
settings, its transcript gets a warning notice.  Restarted with the same
profile: nothing is said.  Its session deleted, the launch record goes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from tests.ssh.sshd import Sshd, ssh_profile
from tests.support.restart_takeover import (
    killed,
    restarted_saying_nothing,
    said_changed,
    session_dto,
    start_long_turn,
)
from tests.support.serverproc import server_process
from tests.support.ws import ws_client


def toml_of(sshd: Sshd, *extra_args: str) -> str:
    keys: dict[str, Any] = {**ssh_profile(sshd), "command": [
        sshd.python, "-m", "protocols.mock_agent", "--protocol", "acp", *extra_args]}
    return "[agents.mock]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())


async def test_an_agentctl_started_from_another_profile_is_kept_and_said(
        tmp_path: Path, sshd: Sshd) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    records = data / "ssh-launch"
    same = toml_of(sshd)
    with trio.fail_after(240):
        async with server_process(data, toml=same) as srv, ws_client(srv) as ws:
            turn = await start_long_turn(ws, "mock", "ssh profile changed")
            assert (await session_dto(ws, turn.task_id))["profile_changed"] == []
            assert len(list(records.iterdir())) == 1
            await killed(srv)
        # The same profile: re-attached, nothing said.
        turn = await restarted_saying_nothing(data, same, turn)
        # Its command changed: the same agentctl runs the same turn on, and the
        # session names what differs.
        async with server_process(data, toml=toml_of(sshd, "--steering")) as srv, \
                ws_client(srv) as ws:
            notice = await said_changed(ws, turn, ["command"])
            assert "'mock' changed" in notice["content"], notice
            result = await ws.call("agent.cancel", {"session_id": turn.sid}, timeout=30)
            assert result["success"], result
            # Deleted: its agentctl stopped, and its launch record with it.
            await ws.call("session.delete", {"session_id": turn.sid}, timeout=30)
            with trio.fail_after(30):
                while list(records.iterdir()):
                    await trio.sleep(0.1)
