"""DESIGN.md §18 over the WebSocket API, in every dialect: ``agent.cancel {when:
"after_step"}`` lets the running tool call finish, then stops the turn; with none running it is
a cancel now; a later "now" joins the same operation and stops at once; the wait is bounded; a
reload (a second connection) sees the phase in the session's DTO."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.server import running_server
from tests.support.ws import WsClient, is_cancellation, is_state, ws_client

from .support import cancellation_changes, launch, new_task

DIALECTS = ["mock", "mock-codex", "mock-acp2"]


def _phases(ws: WsClient, sid: str) -> list[str]:
    return [p["phase"] for p in ws.of("session.cancel.progress", sid)]


def _tool_updates(ws: WsClient, sid: str) -> list[tuple[str, str]]:
    """(tool call id, status) of every tool call message the session published."""
    seen: list[tuple[str, str]] = []
    for action in ("session.message.added", "session.message.updated"):
        for p in ws.of(action, sid):
            msg = p["message"]
            if msg.get("kind") == "tool_call":
                seen.append((msg["metadata"].get("tool_call_id"), msg["metadata"].get("status")))
    return seen


async def _tool_running(ws: WsClient, sid: str) -> None:
    def running(f: dict[str, Any]) -> bool:
        if f["action"] not in ("session.message.added", "session.message.updated"):
            return False
        msg = f["payload"]["message"]
        return (msg.get("session_id") == sid and msg.get("kind") == "tool_call"
                and msg["metadata"].get("status") in ("in_progress", "pending"))
    await ws.wait_for(running)


async def _dto(ws: WsClient, sid: str) -> dict[str, Any]:
    """The session's DTO as a page loading now reads it."""
    for task in (await ws.call("task.list"))["tasks"]:
        for s in (await ws.call("session.list", {"task_id": task["id"]}))["sessions"]:
            if s["id"] == sid:
                return dict(s)
    raise AssertionError(f"session {sid} not listed")


async def _session(ws: WsClient, agent: str, prompt: str) -> str:
    sid = await launch(ws, await new_task(ws), agent)
    await ws.call("session.subscribe", {"session_id": sid})
    await ws.call("message.add", {"session_id": sid, "content": prompt})
    await ws.wait_for(is_state(sid, "RUNNING"))
    return sid


@pytest.mark.parametrize("agent", DIALECTS)
async def test_the_running_tool_call_finishes_then_the_turn_stops(tmp_path: Path,
                                                                 agent: str) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws, \
                ws_client(srv) as tab:
            # 4 s: a loaded machine's delays between the tool's start and the checks
            # below must not let it finish before the second tab has read the wait.
            sid = await _session(ws, agent, "/tool 4000")
            await _tool_running(ws, sid)
            answer: dict[str, Any] = {}

            async def cancel() -> None:
                answer.update(await ws.call("agent.cancel", {"session_id": sid,
                                                             "when": "after_step"}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel)
                progress = await ws.wait_for(
                    lambda f: f["action"] == "session.cancel.progress"
                    and f["payload"]["phase"] == "after_step")
                step = progress["payload"]
                assert step["tool_call_ids"] and step["title"], step
                # A second tab (a reload) reads the wait from the session's DTO.
                dto = await _dto(tab, sid)
                assert dto["cancellation_pending"] is True
                assert dto["cancel_progress"]["phase"] == "after_step", dto
                assert dto["cancel_progress"]["tool_call_ids"] == step["tool_call_ids"]
            # The stop did not cut the tool call: it completed, and only then did the
            # stop settle (frame order, not a clock: a loaded machine may deliver the
            # tool's start late).
            assert answer["outcome"] == "cancelled", answer
            statuses = dict(_tool_updates(ws, sid))
            assert all(statuses[t] == "completed" for t in step["tool_call_ids"]), statuses
            frames = ws.notifications
            completed = min(i for i, f in enumerate(frames)
                            if f["action"] == "session.message.updated"
                            and f["payload"]["message"]["metadata"].get("tool_call_id")
                            in step["tool_call_ids"]
                            and f["payload"]["message"]["metadata"].get("status") == "completed")
            settled = min(i for i, f in enumerate(frames) if is_cancellation(sid, False)(f))
            assert completed < settled, (completed, settled)
            assert cancellation_changes(ws, sid) == [(True, 1), (False, 2)]
            assert _phases(ws, sid)[0] == "after_step"
            dto = await _dto(tab, sid)
            assert dto["cancellation_pending"] is False and dto["cancel_progress"] is None


@pytest.mark.parametrize("agent", DIALECTS)
async def test_with_no_tool_call_running_it_is_a_cancel_now(tmp_path: Path, agent: str) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            sid = await _session(ws, agent, "/delay 5000")
            await ws.wait_for(lambda f: f["action"] in ("session.message.added",
                                                        "session.message.updated")
                              and f["payload"]["message"].get("role") == "agent")
            asked = trio.current_time()
            answer = await ws.call("agent.cancel", {"session_id": sid, "when": "after_step"})
            assert answer["outcome"] == "cancelled", answer
            assert trio.current_time() - asked < 3
            assert "after_step" not in _phases(ws, sid)


@pytest.mark.parametrize("agent", DIALECTS)
async def test_stop_now_during_the_wait_joins_and_stops_at_once(tmp_path: Path,
                                                               agent: str) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            sid = await _session(ws, agent, "/tool 8000")
            await _tool_running(ws, sid)
            answers: list[dict[str, Any]] = []

            async def cancel(when: str) -> None:
                answers.append(await ws.call("agent.cancel", {"session_id": sid,
                                                              "when": when}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel, "after_step")
                await ws.wait_for(lambda f: f["action"] == "session.cancel.progress"
                                  and f["payload"]["phase"] == "after_step")
                asked = trio.current_time()
                nursery.start_soon(cancel, "now")
            assert trio.current_time() - asked < 4  # not the tool's 8 s
            assert [a["outcome"] for a in answers] == ["cancelled", "cancelled"], answers
            # One operation: one pending pair; the running tool call was cut.
            assert cancellation_changes(ws, sid) == [(True, 1), (False, 2)]
            assert _phases(ws, sid)[:2] == ["after_step", "sent"]
            assert "cancelled" in dict(_tool_updates(ws, sid)).values()


@pytest.mark.parametrize("agent", DIALECTS)
async def test_the_wait_is_bounded_then_it_is_a_cancel_now(tmp_path: Path, agent: str) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path / "data",
                                  timeouts={"after_step_timeout_s": 0.5}) as srv, \
                ws_client(srv) as ws:
            sid = await _session(ws, agent, "/tool 8000")
            await _tool_running(ws, sid)
            asked = trio.current_time()
            answer = await ws.call("agent.cancel", {"session_id": sid, "when": "after_step"})
            waited = trio.current_time() - asked
            assert 0.4 < waited < 4, waited
            assert answer["outcome"] == "cancelled", answer
            assert _phases(ws, sid)[:2] == ["after_step", "sent"]
            assert cancellation_changes(ws, sid) == [(True, 1), (False, 2)]


@pytest.mark.parametrize("agent", DIALECTS)
async def test_an_agent_that_dies_during_the_wait_clears_pending_at_once(
        tmp_path: Path, agent: str) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            sid = await _session(ws, agent, "/tool 8000")
            await _tool_running(ws, sid)
            answers: list[dict[str, Any]] = []

            async def cancel() -> None:
                answers.append(await ws.call("agent.cancel", {"session_id": sid,
                                                              "when": "after_step"}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel)
                await ws.wait_for(lambda f: f["action"] == "session.cancel.progress"
                                  and f["payload"]["phase"] == "after_step")
                killed = trio.current_time()
                process = srv.sup.lifecycle.executions[sid].agent.process
                assert process is not None
                os.killpg(process.pid, signal.SIGKILL)
                await ws.wait_for(lambda f: f["action"] == "session.cancellation_changed"
                                  and f["payload"]["cancellation_pending"] is False)
                assert trio.current_time() - killed < 5  # not the 120 s of the wait's bound
            assert len(answers) == 1, answers  # answered, whatever it says of the dead agent
            assert cancellation_changes(ws, sid) == [(True, 1), (False, 2)]
