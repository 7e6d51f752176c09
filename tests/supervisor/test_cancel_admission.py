"""A cancel's admission (MockClock, autojump).  One that comes before the turn's
prompt reached the agent: the prompt is never written, the turn ends as the
user's cancel, and nothing claims the agent was told or answered.  One that
cannot begin at all: answered with an error, nothing left registered."""

from __future__ import annotations

from typing import Any

import trio
from trio.testing import MockClock

from supervisor.errors import CancelFailed
from supervisor.models import CANCELLED_STATUS, Message, SessionState, Turn
from supervisor.session.lifecycle import CancelOutcome
from tests.support.bus_frames import queued
from tests.support.sessions import new_session
from tests.support.wait import wait_state

from .conftest import InlineStore, SupervisorFactory
from .fake_agent import FakeLauncher

#: How long the store takes to open a turn (a busy disk, another writer).
OPEN_TURN_S = 1.0


class SlowOpenStore(InlineStore):
    """The real SQLite store on a disk that takes ``OPEN_TURN_S`` to open a turn."""

    async def open_turn(self, session_id: str, prompt: str, *, resume_queue: bool = False,
                        client_message_id: str | None = None,
                        metadata: dict[str, Any] | None = None) -> tuple[Turn, Message]:
        await trio.sleep(OPEN_TURN_S)
        return await super().open_turn(session_id, prompt, resume_queue=resume_queue,
                                       client_message_id=client_message_id, metadata=metadata)


async def test_a_cancel_while_the_turn_is_opened_never_sends_the_prompt(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    launcher = FakeLauncher()
    async with make_supervisor(launcher=launcher, inline=True, store_class=SlowOpenStore,
                               cancel_join_s=3, cancel_escalate_s=10) as sup:
        caller, sid = await new_session(sup)
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        agent = launcher.agents[0]
        outcomes: list[CancelOutcome] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sup.orchestrator.send_message, caller, sid, "/delay 5000")
            await trio.sleep(OPEN_TURN_S / 2)  # the store is opening the turn
            assert sup.lifecycle.turn_running(sid)
            start = trio.current_time()

            async def cancel() -> None:
                outcomes.append(await sup.orchestrator.cancel(caller, sid))

            nursery.start_soon(cancel)
        took = trio.current_time() - start
        # Closed as the user's cancel as soon as the turn exists, within the join window.
        assert outcomes == [CancelOutcome.ACKNOWLEDGED]
        assert took < sup.config.timeouts.cancel_join_s, took
        # The agent was sent neither the prompt nor a cancel.
        await trio.sleep(1)
        assert agent.prompts == [] and agent.cancels == 0
        session = await sup.orchestrator.session(caller, sid)
        assert session.state is SessionState.WAITING_FOR_INPUT
        msgs = await sup.orchestrator.list_messages(caller, sid)
        assert [m.content for m in msgs if m.kind == "status"] == [CANCELLED_STATUS]
        assert [m.content for m in msgs if m.role == "user"] == ["/delay 5000"]
        marks = sup.orchestrator.trace.settled[-1].marks
        assert "adapter_sent" not in marks and "agent_answered" not in marks
        frames = queued(sub)
        # Truthful progress: no "sent" phase (nothing went to the agent), and no
        # acknowledgement by an agent that never saw the turn.
        assert not any('"phase":"sent"' in f for f in frames)
        assert not any("session.agent.cancelled" in f for f in frames)
        assert sum("session.turn.completed" in f for f in frames) == 1
        assert not sup.notify.projection.get(sid).pending
        # The same agent takes the next prompt.
        await sup.orchestrator.send_message(caller, sid, "again")
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=30)
        assert agent.prompts == ["again"]
        assert launcher.agents == [agent]


async def test_a_cancel_that_cannot_begin_is_settled_not_left_registered(
    make_supervisor: SupervisorFactory, autojump_clock: MockClock
) -> None:
    """A cancel admitted once the operations nursery is gone (the supervisor
    has stopped) cannot run: it is answered with an error at once, and leaves
    neither an operation in flight nor the session pending."""
    async with make_supervisor(launcher=FakeLauncher(), inline=True) as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.session(caller, sid)  # its owner is known from here
    op = sup.orchestrator.admit_known(caller, sid)
    assert op is not None and op.done.is_set()
    assert isinstance(op.error, CancelFailed)
    assert sid not in sup.orchestrator.operations
    assert not sup.notify.projection.get(sid).pending
    # A later cancel is a new operation (the session is not stuck behind this one).
    again = sup.orchestrator.admit_known(caller, sid)
    assert again is not None and again is not op and again.done.is_set()
