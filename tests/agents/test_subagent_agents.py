"""Claude's subagent tool through claude-agent-acp 0.101, against the fake provider (DESIGN.md
§13): the provider asks for a subagent (``TASK``); claude-agent-acp announces it as an ACP child
session (``subagent_update``, granting ``cancel``); the child streams (its own model requests,
``SLOW``); the child is stopped through its own ``session/cancel``; the parent's turn ends
normally (``end_turn``), not cancelled."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from protocols.acp import AcpVersion
from tests.fake_provider import FakeProvider

from .cli import find_cli
from .harness import agent_session
from .test_end_to_end import TEST_S, e2e_session, provider

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

        with trio.fail_after(90):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await agent.wait_until(lambda: any(c.state == "running" for c in agent.subagents()),
                                       45, "the subagent's announcement")
                child = agent.subagents()[0]
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
                    lambda: agent.subagents()[-1].state in ("cancelled", "completed", "failed"),
                    30, "the subagent's end")
        assert [c.state for c in agent.subagents() if c.subagent_id == child.subagent_id][-1] == (
            "cancelled"), agent.subagents()
        [turn] = ended
        assert getattr(turn, "stop_reason", None) == "end_turn", turn
        # The child's model request was cut short, not streamed to its end.
        assert streaming and all(r.aborted for r in await agent.wait_aborted(streaming))


def child_is(state: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: (f["action"] == "session.subagent.changed"
                      and f["payload"]["subagent"]["state"] == state)


async def test_claudes_subagent_through_turnvisor(
        provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the WebSocket API (ACP v1, the claude profile's): the child's row data, its own
    stop (``subagent.cancel``) while the parent goes on, then the parent's normal end; and
    a user cancel of a parent whose child runs: both stop, the status counts the child."""
    with trio.fail_after(TEST_S):
        async with e2e_session("claude", provider, tmp_path, monkeypatch) as e:
            mark, turn_id = await e.prompt("TASK: delegate to a subagent")
            running = await e.wait(mark, child_is("running"), "the subagent's announcement")
            child = running["payload"]["subagent"]
            assert child["cancellable"] and child["turn_id"] == turn_id, child
            await e.wait_streams(lambda s: any(r.mode == "slow" and r.tokens_sent >= 2
                                               for r in s), "the subagent streaming")
            assert not e.since(mark, "session.turn.completed")
            answer = await e.ws.call("subagent.cancel", {"session_id": e.sid,
                                                         "subagent_id": child["id"]})
            assert answer["outcome"] == "cancel_sent", answer
            await e.wait(mark, child_is("cancelled"), "the subagent's end")
            assert await e.turn_end(mark, turn_id) == "end_turn"
            assert [m for m in await e.messages() if m["kind"] == "status"] == []

            # A parent cancel stops its running child too, and says so.
            rev = e.revision()
            mark, turn_id = await e.prompt("TASK: delegate again")
            second = (await e.wait(mark, child_is("running"), "the second subagent"))["payload"]
            await e.wait_streams(lambda s: any(r.mode == "slow" and r.open and r.tokens_sent >= 2
                                               for r in s), "the second subagent streaming")
            slow = [r for r in e.provider.main_streams() if r.mode == "slow" and r.open]
            await e.cancel()
            assert await e.turn_end(mark, turn_id) == "cancelled"
            changes = [(c["cancellation_pending"], c["cancellation_revision"])
                       for c in e.since(mark, "session.cancellation_changed")]
            assert changes == [(True, rev + 1), (False, rev + 2)], changes
            [status] = [m for m in await e.messages()
                        if m["kind"] == "status" and m["turn_id"] == turn_id]
            assert status["content"] == "Turn cancelled by user", status
            assert status["metadata"]["subagents_cancelled"] == 1, status
            await e.wait(mark, lambda f: child_is("cancelled")(f) and f["payload"]["subagent"][
                "id"] == second["subagent"]["id"], "the second subagent's end")
            ids = {r.id for r in slow}
            final = await e.wait_streams(lambda s: all(not r.open for r in s if r.id in ids),
                                         "the subagent's model stream's end")
            assert all(r.aborted for r in final if r.id in ids)
