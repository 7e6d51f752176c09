"""The mock with ``--no-offers`` (the bench's baseline for the cancel with options present,
bench/attachments.py): as a real subprocess, in ACP 1 and 2, its session offers no options and
no commands (nothing of them arrives before its first turn has ended), and a turn runs as usual.
The mock without the flag offers both (tests/protocols/test_session_offers_mock.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from protocols.adapters import AcpAdapter
from protocols.events import AgentEvent, CommandsChanged, MessageChunk, OptionsChanged, TurnEnded
from protocols.mock_agent import ACP_VERSION_ENV, STATE_DIR_ENV
from protocols.process import start_agent_process, terminate_group

from .conftest import SETUP_S, TEST_TIMEOUTS
from .helpers import MOCK_AGENT, REPO_ROOT


@pytest.mark.parametrize("version", ["1", "2"])
async def test_no_options_and_no_commands(tmp_path: Path, version: str) -> None:
    env = {**os.environ, STATE_DIR_ENV: str(tmp_path / "state"), ACP_VERSION_ENV: version}
    proc = await start_agent_process([*MOCK_AGENT, "--protocol", "acp", "--no-offers"],
                                     cwd=str(REPO_ROOT), env=env)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        adapter = AcpAdapter(proc.stdin, proc.stdout, timeouts=TEST_TIMEOUTS)
        async with trio.open_nursery() as nursery:
            await nursery.start(adapter.connection.run)
            with trio.fail_after(SETUP_S):
                await adapter.initialize()
                await adapter.new_session(str(tmp_path))
                seen: list[AgentEvent] = []
                nursery.start_soon(adapter.prompt, "hello")
                while not isinstance(ev := await adapter.events.receive(), TurnEnded):
                    seen.append(ev)
            assert ev.stop_reason == "end_turn"
            assert "".join(e.text for e in seen if isinstance(e, MessageChunk)) == "hello"
            assert [e for e in seen if isinstance(e, OptionsChanged | CommandsChanged)] == []
            nursery.cancel_scope.cancel()
    finally:
        await terminate_group(proc, grace_s=1.0)
