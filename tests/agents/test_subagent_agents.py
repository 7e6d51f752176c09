"""Claude's subagent tool through claude-agent-acp 0.101, against the fake provider (DESIGN.md
§13): the provider asks for a subagent (``TASK``); claude-agent-acp announces it as an ACP child
session (``subagent_update``, granting ``cancel``); the child streams (its own model requests,
``SLOW``); the child is stopped through its own ``session/cancel``; the parent's turn ends
normally (``end_turn``), not cancelled."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from protocols.acp import AcpVersion
from protocols.events import SubagentChanged
from tests.fake_provider import FakeProvider

from .cli import find_cli
from .harness import agent_session
from .test_end_to_end import provider

__all__ = ["provider"]  # the fixture, used by name

pytestmark = [pytest.mark.agents, pytest.mark.slow,
              pytest.mark.skipif(find_cli("claude") is None,
                                 reason="claude CLI is not installed")]


@pytest.mark.parametrize("acp_version", [1, 2])
async def test_stop_claudes_subagent_and_the_parent_finishes(
        provider: FakeProvider, tmp_path: Path, acp_version: AcpVersion) -> None:
    async with agent_session("claude", provider, tmp_path, acp_version=acp_version) as agent:
        ended: list[object] = []

        async def run() -> None:
            ended.append(await agent.adapter.prompt("TASK: delegate to a subagent"))

        def children() -> list[SubagentChanged]:
            return [e for e in agent.events if isinstance(e, SubagentChanged)]

        with trio.fail_after(90):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await agent.wait_until(lambda: any(c.state == "running" for c in children()),
                                       45, "the subagent's announcement")
                child = children()[0]
                assert child.cancellable, child
                # The child streams: its own model requests, slowly.
                await agent.wait_until(
                    lambda: any(r.mode == "slow" and r.tokens_sent >= 2
                                for r in provider.snapshot()), 30, "the subagent streaming")
                # v1: claude-agent-acp holds the parent's turn while its subagent runs;
                # v2: Claude runs it as a background ("async") agent and the parent's
                # turn may end first (its idle state_update lists the child in
                # ``background``). Either way the child is stopped on its own.
                if acp_version == 1:
                    assert not ended, "the parent's turn ended before the child was stopped"
                streaming = [r for r in provider.main_streams() if r.mode == "slow" and r.open]
                assert await agent.adapter.cancel_subagent(child.subagent_id)
                await agent.wait_until(
                    lambda: children()[-1].state in ("cancelled", "completed", "failed"),
                    30, "the subagent's end")
        assert [c.state for c in children() if c.subagent_id == child.subagent_id][-1] == (
            "cancelled"), children()
        [turn] = ended
        assert getattr(turn, "stop_reason", None) == "end_turn", turn
        # The child's model request was cut short, not streamed to its end.
        assert streaming and all(r.aborted for r in await agent.wait_aborted(streaming))
