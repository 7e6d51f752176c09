"""The link to an agentctl reached over a network survives a cut (DESIGN.md §20).

A real agentctl with the mock agent, reached through a TCP proxy the test cuts
and restores (tests/support/cut_proxy.py); the adapter run as the lifecycle runs it.  While
the link is down it says so, requests meet ``LinkDown`` within their bounds, a
cancel is held; on its return the held cancel goes out first, the events of the
outage are replayed in order (none lost, none twice), and the turn ends
cancelled.  Without ``reconnect`` a cut still closes the link as before.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from agentctl_support import AgentctlFactory

from protocols.events import AgentEvent, MessageChunk, TurnEnded
from supervisor.config import Timeouts
from supervisor.executors.agentctl_adapter import AgentctlAdapter
from supervisor.executors.link_hold import LinkDown
from tests.support.cut_proxy import cut_proxy

TIMEOUTS = Timeouts(agent_request_s=2.0)


@asynccontextmanager
async def driven(url: str, token: str, *, reconnect: bool,
                 ) -> AsyncIterator[tuple[AgentctlAdapter, list[AgentEvent]]]:
    adapter = AgentctlAdapter(url, token, owner="backend-session-1", timeouts=TIMEOUTS,
                              reconnect=reconnect)
    seen: list[AgentEvent] = []

    async def pump() -> None:
        async for ev in adapter.events:
            seen.append(ev)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(adapter.connection.run)
            nursery.start_soon(pump)
            yield adapter, seen
            nursery.cancel_scope.cancel()
    finally:
        await adapter.aclose()


def _text(seen: list[AgentEvent]) -> str:
    return "".join(e.text for e in seen if isinstance(e, MessageChunk))


async def _until(pred: object, within: float = 15) -> None:
    assert callable(pred)
    with trio.fail_after(within):
        while not pred():
            await trio.sleep(0.02)


async def test_a_cut_is_waited_out_and_the_held_cancel_goes_first(
    agentctl: AgentctlFactory
) -> None:
    with trio.fail_after(60):
        async with agentctl("acp") as ctl, cut_proxy(ctl.url) as proxy, \
                driven(proxy.url, ctl.token, reconnect=True) as (adapter, seen):
            link = adapter.connection
            await adapter.initialize()
            await adapter.new_session("/ignored")
            ended: list[TurnEnded] = []
            async with trio.open_nursery() as nursery:
                async def turn() -> None:
                    ended.append(await adapter.prompt("/delay 30000"))
                nursery.start_soon(turn)
                await _until(lambda: "chunk1 " in _text(seen))
                proxy.cut()
                await _until(lambda: not link.reachable)
                assert link.down_since is not None and not link.closed.is_set()
                with pytest.raises(LinkDown):
                    await adapter.cancel()  # held, not lost
                started = trio.current_time()
                with pytest.raises(LinkDown):
                    await adapter.status()
                assert trio.current_time() - started < TIMEOUTS.agent_request_s + 2
                await trio.sleep(1.0)  # the agent streams on into agentctl's log alone
                assert adapter.turn_running and not ended
                assert (await ctl.status())["turn"]["id"] == adapter.operation_id
                proxy.restore()
                await _until(lambda: link.reachable)
                assert link.owed_sent_at is not None and link.down_since is None
            # The held cancel ended the turn; what the agent streamed during the cut
            # came with the replay, in order, once each.
            assert ended[0].stop_reason == "cancelled"
            numbers = [int(n) for n in re.findall(r"chunk(\d+) ", _text(seen))]
            assert numbers == list(range(len(numbers))) and len(numbers) >= 5, numbers
            assert not (await ctl.status()).get("turn")


async def test_without_reconnect_a_cut_closes_the_link(agentctl: AgentctlFactory) -> None:
    with trio.fail_after(60):
        async with agentctl("acp") as ctl, cut_proxy(ctl.url) as proxy, \
                driven(proxy.url, ctl.token, reconnect=False) as (adapter, _seen):
            await adapter.initialize()
            await adapter.new_session("/ignored")
            ended: list[TurnEnded] = []
            async with trio.open_nursery() as nursery:
                async def turn() -> None:
                    ended.append(await adapter.prompt("/delay 8000"))
                nursery.start_soon(turn)
                await _until(lambda: adapter.turn_running and adapter.operation_id is not None)
                await trio.sleep(0.3)
                proxy.cut()
            assert ended[0].stop_reason == "error"
            assert adapter.connection.closed.is_set()
