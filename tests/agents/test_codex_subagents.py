"""Codex's multi-agent child threads through ``codex app-server`` 0.171, against the fake
provider (DESIGN.md §13, as for Claude's subagents: tests/agents/test_subagent_agents.py).

The provider asks the parent's model for ``spawn_agent`` (``SPAWN``, tests/fake_provider),
then for ``wait_agent`` on the child; the child thread streams slowly in its own model
requests (``SLOW``) under its own ``threadId``.  What Codex sends for it (the captured
wire: tests/fixtures/agent-transcripts/codex-0.171-multi-agent.jsonl): no
``thread/started`` for the child; the parent's ``collabAgentToolCall`` item (tool
``spawnAgent``) names it in ``receiverThreadIds`` with its ``agentsStates``; then the
child's own ``turn/started`` (``rootTurnId``: the parent's turn), deltas and
``turn/completed``.  ``turn/interrupt {threadId: CHILD, turnId: CHILD_TURN}`` stops the
child alone (``interrupted``); the parent's ``wait_agent`` does not return for that, only
at its timeout (the least Codex takes, 10 s), then the parent's turn completes.

What Turnvisor's Codex core must make of it (the same events as ACP children): a
``SubagentChanged`` ``running``, cancellable, whose ``subagent_id`` is the child's thread
id; the child's text never in the parent's ``MessageChunk``\\ s;
``adapter.cancel_subagent(child)`` interrupts the child's current turn, the child ends
``cancelled`` while the parent's turn goes on and ends ``end_turn``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from protocols.events import MessageChunk
from tests.fake_provider import FakeProvider

from .cli import find_cli
from .harness import AgentUnderTest, agent_session
from .test_end_to_end import TEST_S, e2e_session, provider
from .test_subagent_agents import child_is

__all__ = ["provider"]  # the fixture, used by name

pytestmark = [pytest.mark.agents, pytest.mark.slow,
              pytest.mark.skipif(find_cli("codex") is None,
                                 reason="codex CLI is not installed")]


def _received(agent: AgentUnderTest) -> list[dict[str, Any]]:
    """Every JSON-RPC message the agent wrote so far (its stdout, split into lines)."""
    data = b"".join(chunk for _, way, chunk in agent.wire if way == "<-")
    out = []
    for line in data.split(b"\n"):
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict):
            out.append(msg)
    return out


def _spawned(agent: AgentUnderTest) -> list[str]:
    """The child thread ids the parent's ``spawnAgent`` items named."""
    return [tid for m in _received(agent) if m.get("method") == "item/completed"
            and m["params"]["item"].get("type") == "collabAgentToolCall"
            and m["params"]["item"].get("tool") == "spawnAgent"
            for tid in m["params"]["item"].get("receiverThreadIds") or []]


def _deltas(agent: AgentUnderTest, thread_id: str) -> list[str]:
    return [m["params"]["delta"] for m in _received(agent)
            if m.get("method") == "item/agentMessage/delta"
            and m["params"].get("threadId") == thread_id]


def _child_items(agent: AgentUnderTest, thread_id: str) -> set[str]:
    """The ids of the items (agent messages) streamed on ``thread_id``."""
    return {m["params"]["itemId"] for m in _received(agent)
            if m.get("method") == "item/agentMessage/delta"
            and m["params"].get("threadId") == thread_id}


async def test_stop_codexs_child_thread_and_the_parent_finishes(
        provider: FakeProvider, tmp_path: Path) -> None:
    async with agent_session("codex", provider, tmp_path) as agent:
        # The parent's thread, as thread/start answered it (its thread/started
        # notification may still be on its way).
        parent = agent.adapter.agent_session_id
        assert parent
        ended: list[object] = []

        async def run() -> None:
            ended.append(await agent.adapter.prompt("SPAWN: delegate to a subagent"))

        with trio.fail_after(90):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                # Codex spawned the child and the child streams: its own model request,
                # slowly, its deltas under its own thread id (facts of the real CLI).
                await agent.wait_until(lambda: bool(_spawned(agent)), 45,
                                       "Codex's spawnAgent item")
                [child_id] = _spawned(agent)
                assert child_id != parent
                await agent.wait_until(
                    lambda: any(r.mode == "slow" and r.tokens_sent >= 2
                                for r in provider.snapshot()), 30, "the child streaming")
                await agent.wait_until(lambda: len(_deltas(agent, child_id)) >= 2, 10,
                                       "the child's deltas on the wire")
                # The parent waits on its child (wait_agent): its turn is still running.
                assert not ended, "the parent's turn ended before the child was stopped"

                # Turnvisor: the child announced as a running subagent (by the spawn
                # item), cancellable once its own turn has started (its deltas are on
                # the wire, so it has).
                await agent.wait_until(
                    lambda: any(c.subagent_id == child_id and c.state == "running"
                                for c in agent.subagents()), 5, "the child's SubagentChanged")
                child = [c for c in agent.subagents() if c.subagent_id == child_id][-1]
                assert child.state == "running" and child.cancellable, agent.subagents()
                # The child's text is its own, never the parent's.
                child_text = "".join(_deltas(agent, child_id))
                assert "".join(agent.chunks()) == "".join(_deltas(agent, parent)), (
                    agent.chunks(), child_text)

                streaming = [r for r in provider.main_streams() if r.mode == "slow" and r.open]
                assert streaming
                assert await agent.adapter.cancel_subagent(child_id)
                await agent.wait_until(
                    lambda: agent.subagents()[-1].state in ("cancelled", "completed", "failed"),
                    30, "the child's end")
                # A child that ended cannot be stopped again: nothing is sent.
                assert not await agent.adapter.cancel_subagent(child_id)
        states = [c.state for c in agent.subagents() if c.subagent_id == child_id]
        assert states[0] == "running" and states[-1] == "cancelled", agent.subagents()
        assert set(states) <= {"running", "cancelling", "cancelled"}, agent.subagents()
        assert {c.subagent_id for c in agent.subagents()} == {child_id}, agent.subagents()
        # What Turnvisor sent for the child: turn/interrupt of the child's own turn.
        [child_turn] = [m["params"]["turn"]["id"] for m in _received(agent)
                        if m.get("method") == "turn/started"
                        and m["params"]["threadId"] == child_id]
        sent = [json.loads(line) for _, way, chunk in agent.wire if way == "->"
                for line in chunk.split(b"\n") if line.strip()]
        interrupts = [m["params"] for m in sent if m.get("method") == "turn/interrupt"]
        assert interrupts == [{"threadId": child_id, "turnId": child_turn}], interrupts
        # The parent's turn went on (its wait_agent timed out) and ended normally.
        [turn] = ended
        assert getattr(turn, "stop_reason", None) == "end_turn", turn
        # The parent's chunks are the parent's deltas only (its short answer).
        assert "".join(agent.chunks()) == "".join(_deltas(agent, parent)) == "tok0 tok1 tok2 "
        assert not any(isinstance(e, MessageChunk) and e.channel == "agent"
                       and e.message_id in _child_items(agent, child_id) for e in agent.events)
        # The child's model request was cut short, not streamed to its end.
        assert all(r.aborted for r in await agent.wait_aborted(streaming))


async def test_codexs_child_thread_through_turnvisor(
        provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the WebSocket API: the child thread's row data and its own stop
    (``subagent.cancel``) while the parent goes on to its normal end; then a user cancel
    of a parent whose child runs: Codex's interrupt of the parent leaves the child
    running, so Turnvisor interrupts it too, and the status counts it."""
    with trio.fail_after(TEST_S):
        async with e2e_session("codex", provider, tmp_path, monkeypatch) as e:
            mark, turn_id = await e.prompt("SPAWN: delegate to a subagent")
            await e.wait(mark, lambda f: child_is("running")(f)
                         and f["payload"]["subagent"]["cancellable"],
                         "the child's announcement, cancellable")
            child = [p["subagent"] for p in e.since(mark, "session.subagent.changed")][-1]
            assert child["turn_id"] == turn_id, child
            await e.wait_streams(lambda s: any(r.mode == "slow" and r.tokens_sent >= 2
                                               for r in s), "the child streaming")
            assert not e.since(mark, "session.turn.completed")
            answer = await e.ws.call("subagent.cancel", {"session_id": e.sid,
                                                         "subagent_id": child["id"]})
            assert answer["outcome"] == "cancel_sent", answer
            await e.wait(mark, child_is("cancelled"), "the child's end")
            # Codex's wait_agent returns at its timeout (10 s), then the parent ends.
            assert await e.turn_end(mark, turn_id) == "end_turn"
            assert [m for m in await e.messages() if m["kind"] == "status"] == []
            said = " ".join(m["content"] for m in await e.messages()
                            if m["turn_id"] == turn_id and m["role"] == "agent")
            assert said.strip() == "tok0 tok1 tok2", said  # the parent's words alone

            rev = e.revision()
            mark, turn_id = await e.prompt("SPAWN: delegate again")
            second = (await e.wait(mark, lambda f: child_is("running")(f)
                                   and f["payload"]["subagent"]["cancellable"],
                                   "the second child"))["payload"]["subagent"]
            await e.wait_streams(lambda s: any(r.mode == "slow" and r.open and r.tokens_sent >= 2
                                               for r in s), "the second child streaming")
            slow = [r for r in e.provider.main_streams() if r.mode == "slow" and r.open]
            await e.cancel()
            assert await e.turn_end(mark, turn_id) == "cancelled"
            changes = [(c["cancellation_pending"], c["cancellation_revision"])
                       for c in e.since(mark, "session.cancellation_changed")]
            assert changes == [(True, rev + 1), (False, rev + 2)], changes
            [status] = [m for m in await e.messages()
                        if m["kind"] == "status" and m["turn_id"] == turn_id]
            assert status["metadata"]["subagents_cancelled"] == 1, status
            await e.wait(mark, lambda f: child_is("cancelled")(f) and f["payload"]["subagent"][
                "id"] == second["id"], "the second child's end")
            ids = {r.id for r in slow}
            final = await e.wait_streams(lambda s: all(not r.open for r in s if r.id in ids),
                                         "the child's model stream's end")
            assert all(r.aborted for r in final if r.id in ids)
