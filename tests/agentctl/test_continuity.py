"""Session continuity through an agentctl at a configured URL: the agent
outlives the backend, and after a restart the session's next prompt re-attaches
the conversation agentctl kept for its owner (our session id) — no restore
warning, the same agent remembers (``/recall``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio
from agentctl_support import TOKEN, AgentctlFactory

from supervisor.config import Config
from supervisor.models import SessionState
from supervisor.root import Supervisor, open_supervisor
from supervisor.turn.restore import RESTORE_FAILED_STATUS
from tests.support.sessions import new_session
from tests.support.wait import wait_state


async def _turn(sup: Supervisor, sid: str, prompt: str) -> str:
    caller = await sup.caller()
    msg = await sup.orchestrator.send_message(caller, sid, prompt)
    await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=20)
    return "".join(m.content for m in await sup.orchestrator.list_messages(caller, sid)
                   if m.turn_id == msg.turn_id and m.role == "agent")


@pytest.mark.parametrize("protocol", ["acp", "codex"])
async def test_a_backend_restart_re_attaches_the_agentctl_conversation(
    tmp_path: Path, agentctl: AgentctlFactory, protocol: str
) -> None:
    with trio.fail_after(60):
        async with agentctl(protocol) as ctl:
            config = Config.from_mapping(tmp_path / "data", {"agents": {"remote": {
                "protocol": protocol, "executor": "agentctl", "agentctl_url": ctl.url,
                "agentctl_token": TOKEN,
                "command": [sys.executable, "-m", "protocols.mock_agent"]}}})
            async with open_supervisor(config) as sup:
                _caller, sid = await new_session(sup, "remote")
                assert await _turn(sup, sid, "kept by agentctl") == "kept by agentctl"
                agent_pid = (await ctl.status())["agent"]["pid"]
            async with open_supervisor(config) as sup:
                assert not sup.lifecycle.agent_live(sid)
                assert await _turn(sup, sid, "/recall") == "recall: kept by agentctl"
                assert (await ctl.status())["agent"]["pid"] == agent_pid  # the same agent
                caller = await sup.caller()
                assert not [m for m in await sup.orchestrator.list_messages(caller, sid)
                            if m.content == RESTORE_FAILED_STATUS]
