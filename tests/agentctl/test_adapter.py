"""``AgentctlAdapter`` against a real agentctl process, in both dialects."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio
from agentctl_support import Agentctl, AgentctlFactory, mock_profile, wait_group_gone

from protocols.adapters import AgentClosed
from protocols.events import (
    AgentEvent,
    AgentNotice,
    MessageChunk,
    PermissionRequested,
    TurnEnded,
)
from protocols.transport import AgentRefused
from supervisor.config import Config, Timeouts
from supervisor.executors.agentctl import launch_agentctl
from supervisor.executors.agentctl_adapter import AgentctlAdapter
from supervisor.profiles import AgentProfile

DIALECTS = pytest.mark.parametrize("protocol", ["acp", "codex"])


@dataclass
class Collector:
    """What the lifecycle's pump would see on ``adapter.events``."""

    events: list[AgentEvent] = field(default_factory=list)
    ended: bool = False
    _changed: trio.Event = field(default_factory=trio.Event)

    async def run(self, channel: trio.MemoryReceiveChannel[AgentEvent]) -> None:
        async for ev in channel:
            self.events.append(ev)
            self._changed.set()
            self._changed = trio.Event()
        self.ended = True
        self._changed.set()

    async def wait_for(self, pred: Callable[[AgentEvent], bool], *, start: int = 0,
                       timeout: float = 10) -> AgentEvent:
        with trio.fail_after(timeout):
            while True:
                for ev in self.events[start:]:
                    if pred(ev):
                        return ev
                if self.ended:
                    raise AssertionError("events ended")
                await self._changed.wait()

    async def wait_ended(self, *, timeout: float = 10) -> None:
        with trio.fail_after(timeout):
            while not self.ended:
                await self._changed.wait()


@asynccontextmanager
async def driven(ctl: Agentctl, *, owner: str | None = "backend-session-1",
                 token: str | None = None, timeouts: Timeouts | None = None,
                 ) -> AsyncIterator[tuple[AgentctlAdapter, Collector]]:
    """An adapter run the way the lifecycle runs one: reader and pump in a nursery."""
    adapter = AgentctlAdapter(ctl.url, token or ctl.token, owner=owner, timeouts=timeouts)
    seen = Collector()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(adapter.connection.run)
            nursery.start_soon(seen.run, adapter.events)
            yield adapter, seen
            nursery.cancel_scope.cancel()
    finally:
        await adapter.aclose()


async def _first_chunk(seen: Collector, start: int) -> None:
    await seen.wait_for(lambda e: isinstance(e, MessageChunk), start=start)


@DIALECTS
async def test_prompt_cancel_and_next_prompt(agentctl: AgentctlFactory, protocol: str) -> None:
    with trio.fail_after(40):
        async with agentctl(protocol) as ctl, driven(ctl) as (adapter, seen):
            await adapter.initialize()
            session_id = await adapter.new_session("/ignored")
            assert adapter.agent_session_id == session_id and not adapter.attached

            ended = await adapter.prompt("hello from the backend")
            assert ended.stop_reason == "end_turn"
            await seen.wait_for(lambda e: isinstance(e, TurnEnded))
            text = "".join(e.text for e in seen.events if isinstance(e, MessageChunk))
            assert text == "hello from the backend"
            # The turn's end is the last of its events, as on a local adapter.
            assert isinstance(seen.events[-1], TurnEnded)

            result: list[TurnEnded] = []
            mark = len(seen.events)
            async with trio.open_nursery() as nursery:
                async def turn() -> None:
                    result.append(await adapter.prompt("/delay 5000"))
                nursery.start_soon(turn)
                await _first_chunk(seen, mark)
                assert adapter.turn_running and adapter.operation_id is not None
                started = trio.current_time()
                await adapter.cancel()
            took = trio.current_time() - started
            assert result[0].stop_reason == "cancelled"
            assert took < 1.0, f"cancel through agentctl took {took * 1000:.0f} ms"
            assert not adapter.turn_running

            again = await adapter.prompt("next prompt works")
            assert again.stop_reason == "end_turn"

            # A cancel issued while the prompt's request is still in flight must
            # not overtake it (they may travel on different connections).
            early: list[TurnEnded] = []
            async with trio.open_nursery() as nursery:
                async def quick(task_status: trio.TaskStatus[None]) -> None:
                    task_status.started()  # as the lifecycle starts a turn
                    early.append(await adapter.prompt("/delay 5000"))
                await nursery.start(quick)
                assert adapter.turn_running
                await adapter.cancel()
            assert early[0].stop_reason == "cancelled"


@DIALECTS
async def test_agentctl_killed_mid_turn(agentctl: AgentctlFactory, protocol: str) -> None:
    with trio.fail_after(40):
        async with agentctl(protocol) as ctl, driven(ctl) as (adapter, seen):
            await adapter.initialize()
            await adapter.new_session("/ignored")
            pgid = (await ctl.status())["agent"]["pid"]
            result: list[TurnEnded] = []
            async with trio.open_nursery() as nursery:
                async def turn() -> None:
                    result.append(await adapter.prompt("/delay 10000"))
                nursery.start_soon(turn)
                await _first_chunk(seen, 0)
                ctl.kill()
                killed = trio.current_time()
            took = trio.current_time() - killed
            assert result[0].stop_reason == "error" and result[0].error
            # Well under the turn's 10 s: the kill ended it, not the agent's delay
            # (the margin is for a loaded machine; it returns in milliseconds).
            assert took < 5.0, f"the pending prompt took {took:.2f}s to return"
            assert adapter.connection.closed.is_set()
            assert "agentctl" in adapter.connection.close_reason
            await seen.wait_ended(timeout=5)
            assert not adapter.turn_running
            with pytest.raises(AgentClosed):
                await adapter.cancel_and_join(0)
            with pytest.raises(AgentClosed):
                await adapter.prompt("x")
            # The agent did not outlive agentctl.
            await wait_group_gone(pgid, timeout=5)


async def test_agentctl_killed_before_the_prompt_is_answered(agentctl: AgentctlFactory) -> None:
    """agentctl dying with the prompt's request in flight ends the turn with an
    error, as a death after its answer does: the caller is not handed the
    transport's exception (CI once killed it in that window)."""
    with trio.fail_after(40):
        async with agentctl() as ctl, driven(ctl) as (adapter, _seen):
            await adapter.initialize()
            await adapter.new_session("/ignored")
            result: list[TurnEnded] = []
            async with trio.open_nursery() as nursery:
                async def turn() -> None:
                    result.append(await adapter.prompt("/delay 10000"))
                # Frozen, it accepts the connection (the kernel does) but never answers.
                os.kill(ctl.process.pid, signal.SIGSTOP)
                nursery.start_soon(turn)
                await trio.sleep(0.3)
                assert adapter.turn_running and not result
                ctl.kill()
            assert result[0].stop_reason == "error" and result[0].error
            assert not adapter.turn_running
            with pytest.raises(AgentClosed):
                await adapter.prompt("x")


async def test_agent_exit_and_cancel_after_loss(agentctl: AgentctlFactory) -> None:
    """The agent crashing behind agentctl is a crashed agent for the adapter too."""
    with trio.fail_after(30):
        async with agentctl() as ctl, driven(ctl) as (adapter, seen):
            await adapter.initialize()
            await adapter.new_session("/ignored")
            ended = await adapter.prompt("/crash")
            assert ended.stop_reason == "error"
            await seen.wait_ended(timeout=5)
            assert adapter.connection.closed.is_set()
            assert "agent exited (status 1)" in adapter.connection.close_reason
            await adapter.cancel()  # no turn: a no-op, as on a local adapter
            with pytest.raises(AgentClosed):
                await adapter.prompt("x")


async def test_escalation_abandons_the_turn(agentctl: AgentctlFactory) -> None:
    """The lifecycle's escalation: cancel ignored, abandon_turn, cancel the prompt
    task.  The abandoned turn's late end is only a notice, never a turn end; the
    next prompt works."""
    with trio.fail_after(30):
        async with agentctl() as ctl, driven(ctl) as (adapter, seen):
            await adapter.initialize()
            await adapter.new_session("/ignored")
            escalation = trio.CancelScope()
            async with trio.open_nursery() as nursery:
                async def turn() -> None:
                    with escalation:
                        await adapter.prompt("/slow 2000")
                nursery.start_soon(turn)
                await _first_chunk(seen, 0)
                await adapter.cancel()
                await trio.sleep(0.5)  # /slow ignores the cancel: not acknowledged
                escalation.cancel()
            assert escalation.cancelled_caught
            assert adapter.abandon_turn() is True
            assert not adapter.turn_running and adapter.abandon_turn() is False
            late = await seen.wait_for(lambda e: isinstance(e, AgentNotice)
                                       and "late end of abandoned turn" in e.message)
            assert isinstance(late, AgentNotice) and "cancelled" in late.message
            assert not any(isinstance(e, TurnEnded) for e in seen.events)
            ended = await adapter.prompt("after escalation")
            assert ended.stop_reason == "end_turn", ended
            assert (await ctl.status())["turn"] is None


async def test_permission_round_trip(agentctl: AgentctlFactory) -> None:
    with trio.fail_after(30):
        async with agentctl() as ctl, driven(ctl) as (adapter, seen):
            await adapter.initialize()
            await adapter.new_session("/ignored")
            result: list[TurnEnded] = []
            async with trio.open_nursery() as nursery:
                async def turn() -> None:
                    result.append(await adapter.prompt("/permission"))
                nursery.start_soon(turn)
                asked = await seen.wait_for(lambda e: isinstance(e, PermissionRequested))
                assert isinstance(asked, PermissionRequested) and asked.options
                with pytest.raises(AgentRefused):
                    await adapter.respond_permission("no-such-request", None)
                await adapter.respond_permission(asked.request_id, asked.options[0].option_id)
            assert result[0].stop_reason == "end_turn"


async def _backend_dies_mid_turn(ctl: Agentctl, owner: str, text: str) -> str:
    """A backend that starts (or re-attaches to) a session, starts a turn and
    disappears (its adapter just goes away)."""
    async with driven(ctl, owner=owner) as (adapter, seen):
        await adapter.initialize()
        session_id = await adapter.new_session("/ignored")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(adapter.prompt, text)
            await _first_chunk(seen, 0) if text != "/hang" else await trio.sleep(0.3)
            nursery.cancel_scope.cancel()
    return session_id


async def test_reattach_by_owner_and_refusals(agentctl: AgentctlFactory) -> None:
    with trio.fail_after(40):
        async with agentctl() as ctl:
            session_id = await _backend_dies_mid_turn(ctl, "session-A", "/delay 10000")
            assert (await ctl.status())["turn"] is not None
            # The restarted backend re-attaches: same session, the orphan turn cancelled.
            async with driven(ctl, owner="session-A") as (second, _):
                await second.initialize()
                assert await second.new_session("/ignored") == session_id
                assert second.attached and not second.turn_running
                assert (await ctl.status())["turn"] is None
                ended = await second.prompt("re-attached")
                assert ended.stop_reason == "end_turn"
            # An orphan turn that ignores the cancel: the agent is replaced.
            await _backend_dies_mid_turn(ctl, "session-A", "/hang")
            quick = Timeouts(agentctl_attach_join_s=0.3)
            async with driven(ctl, owner="session-A", timeouts=quick) as (third, _):
                await third.initialize()
                assert await third.new_session("/ignored") != session_id
                assert not third.attached
                assert (await ctl.status())["agents_started"] == 2
                assert (await third.prompt("fresh agent")).stop_reason == "end_turn"
                # Another owner is refused while session-A's backend is connected...
                async with driven(ctl, owner="session-B") as (other, _):
                    await other.initialize()
                    with pytest.raises(AgentRefused, match="already has a session"):
                        await other.new_session("/ignored")
            # ...and takes the agent over (a fresh one) once that backend is gone.
            async with driven(ctl, owner="session-B") as (other, _):
                await other.initialize()
                await other.new_session("/ignored")
                assert not other.attached and (await ctl.status())["owner"] == "session-B"
                assert (await other.prompt("taken over")).stop_reason == "end_turn"
            # A wrong token closes the link.
            async with driven(ctl, token="wrong-token") as (bad, seen):
                with pytest.raises(AgentClosed, match="refused the token"):
                    await bad.initialize()
                await seen.wait_ended(timeout=5)


async def test_launch_agentctl_spawns_and_tears_down(tmp_path: Path) -> None:
    """The spawn-a-local-agentctl executor, driven as the lifecycle drives it."""
    # The agent's cwd is beside the data dir, neither it nor above it (an agent
    # that can write above the data dir could move it away: refused).
    (tmp_path / "data").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    config = Config.from_mapping(tmp_path / "data", {})
    base = mock_profile("codex")
    profile = AgentProfile(name="remote-mock", protocol=base.protocol, command=base.command,
                           executor="agentctl")
    with trio.fail_after(40):
        async with launch_agentctl(config, profile, str(work), owner="s1") as agent:
            assert agent.process is not None and agent.pgid == agent.process.pid
            adapter = agent.adapter
            async with trio.open_nursery() as nursery:
                nursery.start_soon(adapter.connection.run)
                await adapter.initialize()
                await adapter.new_session(str(work))
                assert (await adapter.prompt("spawned")).stop_reason == "end_turn"
                assert isinstance(adapter, AgentctlAdapter)
                agent_pgid = (await adapter.status())["agent"]["pid"]
                nursery.cancel_scope.cancel()
        assert agent.returncode is not None
        await wait_group_gone(agent.pgid, timeout=5)
        await wait_group_gone(agent_pgid, timeout=5)
