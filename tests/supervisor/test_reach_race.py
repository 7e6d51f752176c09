"""A remote host's reachability, published as the session is stored (DESIGN.md §20), on
virtual time.

``watch_reach`` publishes the session's state at each change of its link; the
session is read from the store, on a worker thread in the product.  A turn that
closes (and publishes its close) while that read is on its way must not be
followed by the state read before the close: the page would show the ended
turn's session as running (05d0eb7).  Here the read's answer is held at the
store's public boundary (``get_session``) until the close has been stored and
published, so the window is hit every run, whatever the machine's load.

The link is a host whose reachability the test sets (``Host``); the agent, the
turn, the store (real SQLite) and the publications are the product's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from protocols.acp import AcpVersion
from protocols.adapters import AcpAdapter
from supervisor.executors import LaunchedAgent
from supervisor.executors.link_hold import OfflineStops
from supervisor.models import Session, SessionState
from supervisor.profiles import AgentProfile
from tests.support.bus_frames import queued_json
from tests.support.sessions import new_session
from tests.support.wait import wait_state

from .conftest import InlineStore, SupervisorFactory
from .fake_agent import FakeAgent, FakeLauncher


class Host:
    """The link to a remote agent's host (``LinkHold``), cut and restored by the test."""

    def __init__(self) -> None:
        self.reachable = True
        self.down_since: float | None = None
        self.owed_sent_at: float | None = None
        self.closed = trio.Event()
        self.offline = OfflineStops()
        self._changed = trio.Event()

    def set_reachable(self, reachable: bool) -> None:
        self.reachable = reachable
        self.down_since = None if reachable else trio.current_time()
        self._changed.set()
        self._changed = trio.Event()

    async def until_changed(self) -> None:
        changed = self._changed
        async with trio.open_nursery() as nursery:
            async def closed() -> None:
                await self.closed.wait()
                nursery.cancel_scope.cancel()
            nursery.start_soon(closed)
            await changed.wait()
            nursery.cancel_scope.cancel()


class RemoteAcpAdapter(AcpAdapter):
    """The mock agent's ACP adapter, reached through ``Host`` as an agentctl's would be."""

    def __init__(self, stream: trio.abc.Stream, host: Host, acp_version: AcpVersion) -> None:
        super().__init__(stream, stream, acp_version=acp_version)
        self.link_hold = host


class RemoteLauncher:
    """Launches the in-process mock agent behind one ``Host``."""

    def __init__(self, host: Host) -> None:
        self.host = host
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
                yield LaunchedAgent(adapter=RemoteAcpAdapter(client, self.host,
                                                             profile.acp_version))
            finally:
                nursery.cancel_scope.cancel()
                await client.aclose()


class HeldReadStore(InlineStore):
    """The real store; once ``hold_next_read`` is called, the next session read
    reads the row, then keeps its answer until ``release`` (a worker thread's
    read that has read but not yet returned)."""

    armed = False
    read = trio.Event()
    released = trio.Event()

    def hold_next_read(self) -> None:
        self.armed, self.read, self.released = True, trio.Event(), trio.Event()

    async def get_session(self, session_id: str) -> Session | None:
        session = await super().get_session(session_id)
        if self.armed:
            self.armed = False
            self.read.set()
            with trio.fail_after(600):
                await self.released.wait()
        return session


def _states(frames: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    return [(f["payload"]["new_state"], f["payload"]["reachable"]) for f in frames
            if f["action"] == "session.state_changed"]


async def test_a_close_during_the_reachability_read_is_not_followed_by_the_older_state(
    make_supervisor: SupervisorFactory, autojump_clock: trio.testing.MockClock
) -> None:
    host = Host()
    async with make_supervisor(launcher=RemoteLauncher(host), inline=True,
                               store_class=HeldReadStore) as sup:
        store = sup.store
        assert isinstance(store, HeldReadStore)
        caller, sid = await new_session(sup)
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        await sup.orchestrator.add_message(caller, sid, "/pause 5000")
        await wait_state(sup, caller, sid, SessionState.RUNNING)
        queued_json(sub)  # (what the start published: not under test)

        # The link goes down: the watcher reads the session (RUNNING) and its
        # answer is held while the turn ends, is stored and published.
        store.hold_next_read()
        host.set_reachable(False)
        with trio.fail_after(10):
            await store.read.wait()
        stored = await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=30)
        assert ("WAITING_FOR_INPUT", False) in _states(queued_json(sub))  # the close's
        store.released.set()

        # The watcher's publication for the cut comes once its read returns.
        frames: list[dict[str, Any]] = []
        with trio.fail_after(10):
            while not _states(frames):
                await trio.sleep(0.01)
                frames += queued_json(sub)
        # It is the session as stored after the close, never the RUNNING read before it.
        assert _states(frames) == [(stored.state.value, False)], _states(frames)
        # And the link's return is published after it, in order.
        host.set_reachable(True)
        with trio.fail_after(10):
            while len(_states(frames)) < 2:
                await trio.sleep(0.01)
                frames += queued_json(sub)
        assert _states(frames) == [(stored.state.value, False), (stored.state.value, True)]


async def test_a_turn_the_host_stopped_by_itself_is_the_offline_stop_before_its_end(
    make_supervisor: SupervisorFactory, autojump_clock: trio.testing.MockClock
) -> None:
    """The link hands the offline stop to the session and reads on only once it is
    taken: the turn's end, read after it, settles a stop ``by`` offline."""
    host = Host()
    async with make_supervisor(launcher=RemoteLauncher(host), inline=True) as sup:
        caller, sid = await new_session(sup)
        await sup.orchestrator.add_message(caller, sid, "/pause 5000")
        running = await wait_state(sup, caller, sid, SessionState.RUNNING)
        turn_id = running.current_turn_id
        assert turn_id is not None
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        assert await host.offline.hand("another-turn")  # taken, and not this turn's stop
        assert not any(f["payload"].get("cancellation_pending") for f in queued_json(sub))
        assert await host.offline.hand(turn_id)
        # Recorded by the time the link reads on: pending, its cancel already sent.
        said = {f["action"]: f["payload"] for f in queued_json(sub)}
        assert said["session.cancellation_changed"]["cancellation_pending"] is True
        assert said["session.cancel.progress"] == {"session_id": sid, "turn_id": turn_id,
                                                   "phase": "sent"}
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=30)
        receipt = await sup.stops.receipt(caller, sid, turn_id)
        assert receipt["by"] == "offline", receipt


async def test_an_offline_stop_nobody_watches_is_not_kept() -> None:
    stops = OfflineStops()
    with trio.fail_after(1):
        assert not await stops.hand("t")  # no session is up to take it: not waited for
