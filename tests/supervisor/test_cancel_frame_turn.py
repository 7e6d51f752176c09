"""A cancel operation reads agentctl's answer to its own ``Cancel`` frame only
(issue 44, DESIGN.md §20), on virtual time.

agentctl's adapter keeps its last turn's frame and agentctl's answer to it
(``AgentctlAdapter.cancel_frame``) until its next prompt replaces the turn.
A cancel that comes before the next turn's prompt is written withholds the
prompt: nothing goes to the agent, so no frame is the operation's.  An earlier
turn's refusal (agentctl could not write that turn's cancel) must not fail it.

The adapter is the in-process mock agent's ACP adapter carrying such a refused
frame, as the adapter does after a turn whose cancel agentctl refused ended
anyway; the turn, the store (real SQLite) and the operation are the product's.
The store's opening of the next turn is held, so the cancel lands before its
prompt every run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from protocols.acp import AcpVersion
from protocols.adapters import AcpAdapter
from protocols.agentctl_wire import CancelAck
from supervisor.executors import LaunchedAgent
from supervisor.executors.agentctl_turn import FrameAnswer
from supervisor.models import Message, SessionState, Turn
from supervisor.profiles import AgentProfile
from supervisor.session.lifecycle import CancelOutcome
from tests.support.sessions import new_session
from tests.support.wait import wait_state

from .conftest import InlineStore, SupervisorFactory
from .fake_agent import FakeAgent, FakeLauncher

REFUSAL = "could not write the cancel to the agent: it did not read its stdin"


class RefusedFrameAdapter(AcpAdapter):
    """The mock agent's ACP adapter, holding (as agentctl's does) its previous
    turn's ``Cancel`` frame, which agentctl answered with ``CancelFailed``."""

    def __init__(self, stream: trio.abc.Stream, acp_version: AcpVersion) -> None:
        super().__init__(stream, stream, acp_version=acp_version)
        self.cancel_frame = FrameAnswer(sent=True)
        self.cancel_frame.answer(CancelAck(turn_id="the-previous-turn", error=REFUSAL))


class RefusedFrameLauncher:
    def __init__(self) -> None:
        self.fakes = FakeLauncher()

    @asynccontextmanager
    async def __call__(self, profile: AgentProfile, cwd: str,
                       session_id: str) -> AsyncIterator[LaunchedAgent]:
        client, agent_side = trio.testing.memory_stream_pair()
        agent = FakeAgent(agent_side, self.fakes, cwd, profile)
        self.fakes.agents.append(agent)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.serve)
            try:
                yield LaunchedAgent(adapter=RefusedFrameAdapter(client, profile.acp_version))
            finally:
                nursery.cancel_scope.cancel()
                await client.aclose()


class HeldOpenStore(InlineStore):
    """The real store; opening a turn waits for ``release`` (a busy disk)."""

    opening = trio.Event()
    release = trio.Event()

    async def open_turn(self, session_id: str, prompt: str, *, resume_queue: bool = False,
                        client_message_id: str | None = None,
                        metadata: dict[str, Any] | None = None) -> tuple[Turn, Message]:
        self.opening.set()
        with trio.fail_after(600):
            await self.release.wait()
        return await super().open_turn(session_id, prompt, resume_queue=resume_queue,
                                       client_message_id=client_message_id, metadata=metadata)


async def test_a_withheld_prompts_cancel_is_not_failed_by_an_earlier_frames_refusal(
    make_supervisor: SupervisorFactory, autojump_clock: trio.testing.MockClock
) -> None:
    HeldOpenStore.opening, HeldOpenStore.release = trio.Event(), trio.Event()
    launcher = RefusedFrameLauncher()
    async with make_supervisor(launcher=launcher, inline=True, store_class=HeldOpenStore,
                               cancel_join_s=3, cancel_escalate_s=10) as sup:
        caller, sid = await new_session(sup)
        outcomes: list[CancelOutcome] = []
        errors: list[Exception] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sup.orchestrator.send_message, caller, sid, "/delay 5000")
            with trio.fail_after(10):
                await HeldOpenStore.opening.wait()
            assert sup.lifecycle.turn_running(sid)

            async def cancel() -> None:
                try:
                    outcomes.append(await sup.orchestrator.cancel(caller, sid))
                except Exception as exc:
                    errors.append(exc)

            nursery.start_soon(cancel)
            # The operation waits on the withheld turn's close (the store holds it).
            await trio.sleep(1)
            HeldOpenStore.release.set()
        # The withheld prompt's turn ends as the user's cancel; the earlier
        # frame's refusal is not this cancel's.
        assert errors == [] and outcomes == [CancelOutcome.ACKNOWLEDGED], (errors, outcomes)
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=30)
        assert launcher.fakes.agents[0].prompts == []
        assert not sup.notify.projection.get(sid).pending
