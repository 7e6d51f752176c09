"""DESIGN.md §19: the person's choices are given to every agent the session starts. A fresh
agent (one that cannot restore the conversation, after a crash) starts on its own defaults; the
choice kept with the session is applied to it before its first turn."""

from __future__ import annotations

import pytest
import trio

from supervisor.models import SessionState
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor
from tests.support.sessions import new_session
from tests.support.wait import wait_state

from .conftest import SupervisorFactory
from .fake_agent import FakeLauncher


async def _said(sup: Supervisor, caller: Caller, sid: str, prompt: str) -> str:
    await sup.orchestrator.send_message(caller, sid, prompt)
    await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
    return [m.content for m in await sup.orchestrator.list_messages(caller, sid)
            if m.role == "agent"][-1]


@pytest.mark.parametrize("agent", ["mock", "mock-acp2", "mock-codex"])
async def test_a_fresh_agent_gets_the_person_s_choice(make_supervisor: SupervisorFactory,
                                                     agent: str) -> None:
    launcher = FakeLauncher()  # not resumable: every new agent starts a fresh session
    async with make_supervisor(launcher=launcher) as sup:
        caller, sid = await new_session(sup, agent)
        with trio.fail_after(10):
            await _said(sup, caller, sid, "hello")
            model = next(o for o in sup.notify.offers.options(sid) if o["category"] == "model")
            other = next(c["value"] for c in model["choices"] if c["value"] != model["current"])
            session = await sup.orchestrator.session(caller, sid)
            await sup.lifecycle.offers.choose(sup.lifecycle.agents.running(sid), session,
                                              model["id"], other)
            assert other in await _said(sup, caller, sid, "/options")
            await sup.orchestrator.send_message(caller, sid, "/crash")
            await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
            # The next prompt starts a fresh agent (no restore): on its defaults
            # but for what the person chose.
            assert other in await _said(sup, caller, sid, "/options")
        assert len(launcher.agents) == 2
