"""An escalated parent cancel with child sessions running, on virtual time
(MockClock, the mock agent in-process): the children end with the turn and its
status message counts them (DESIGN.md §13), as a confirmed cancel's does."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from supervisor.models import CANCELLED_STATUS, SessionState
from supervisor.session.lifecycle import CancelOutcome
from tests.support.sessions import new_session

from .conftest import SupervisorFactory
from .fake_agent import FakeLauncher


@pytest.mark.parametrize(("mode", "before"), [("hang", "cancelled"),
                                              ("hang-all", "cancelling")])
async def test_escalation_cancels_the_children_and_counts_them(
        make_supervisor: SupervisorFactory, autojump_clock: MockClock,
        mode: str, before: str) -> None:
    async with make_supervisor(launcher=FakeLauncher(), inline=True, cancel_join_s=3,
                               cancel_escalate_s=10) as sup:
        caller, sid = await new_session(sup)
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        await sup.orchestrator.send_message(caller, sid, f"/subagents 3 60000 {mode}")
        await trio.sleep(0.5)
        session = await sup.orchestrator.session(caller, sid)
        assert [c["state"] for c in sup.notify.session_dto(session)["subagents"]] == \
            ["running"] * 3
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            outcome: list[CancelOutcome] = []

            async def cancel() -> None:
                outcome.append(await sup.orchestrator.cancel(caller, sid))

            nursery.start_soon(cancel)
            await trio.sleep(5)  # late: the children's own cancels were answered, or not
            session = await sup.orchestrator.session(caller, sid)
            assert [c["state"] for c in sup.notify.session_dto(session)["subagents"]] == \
                [before] * 3
        assert outcome == [CancelOutcome.ESCALATED]
        assert 10 <= trio.current_time() - start < 10 + sup.config.timeouts.cancel_cleanup_s
        session = await sup.orchestrator.session(caller, sid)
        assert session.state is SessionState.WAITING_FOR_INPUT
        assert [(c["state"], c["cancellable"])
                for c in sup.notify.session_dto(session)["subagents"]] == [("cancelled", False)] * 3
        [status] = [m for m in await sup.orchestrator.list_messages(caller, sid)
                    if m.kind == "status"]
        assert status.content == CANCELLED_STATUS
        assert status.metadata["escalated"] is True
        assert status.metadata["subagents_cancelled"] == 3
