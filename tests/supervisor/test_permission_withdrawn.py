"""An agent that takes its permission request back (issue 15): the card is
dismissed (``session.permission.cancelled``, the message marked cancelled and
withdrawn) and the turn goes on, with the mock agent as a real subprocess."""

from __future__ import annotations

import pytest

from supervisor.models import SessionState
from tests.support.bus_frames import queued
from tests.support.sessions import new_session
from tests.support.wait import wait_state

from .conftest import SupervisorFactory

AGENTS = ["mock", "mock-acp2", "mock-codex"]


@pytest.mark.parametrize("agent", AGENTS)
async def test_withdrawn_permission_is_dismissed(
    make_supervisor: SupervisorFactory, agent: str
) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, agent)
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        await sup.orchestrator.send_message(caller, sid, "/withdraw")
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT)
        msgs = await sup.orchestrator.list_messages(caller, sid)
        [perm] = [m for m in msgs if m.kind == "permission"]
        assert perm.metadata["status"] == "cancelled"
        assert perm.metadata["withdrawn"] is True
        assert sup.lifecycle.executions[sid].permissions == {}
        assert [m.content for m in msgs if m.role == "agent" and m.kind == "text"][-1] == (
            "withdrawn: -32800" if agent != "mock-codex" else "withdrawn: resolved"
        )
        frames = queued(sub)
        assert sum("session.permission.cancelled" in f for f in frames) == 1
