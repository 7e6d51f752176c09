"""DESIGN.md §18 over the WebSocket API: every settled stop has a receipt (in the cancel's
answer, in the status message's metadata once complete, from ``turn.receipt``); the processes
the agent left in its group are listed and ended by ``session.kill_strays``; ``workspace.stop_all``
stops every running turn of the caller's workspace, each through its own single-flight cancel;
``server.info`` carries each profile's measured cancel figures."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.server import running_server
from tests.support.ws import WsClient, is_state, ws_client

from .support import cancellation_changes, frame_ok, launch, new_task

DIALECTS = ["mock", "mock-codex", "mock-acp2"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def _receipt_shown(ws: WsClient, sid: str, turn_id: str,
                         after: int = 0) -> dict[str, Any]:
    """The status message's receipt once its second step is in (strays known),
    from the notifications from index ``after`` on."""
    def done(f: dict[str, Any]) -> bool:
        if f["action"] != "session.message.updated":
            return False
        msg = f["payload"]["message"]
        receipt = msg.get("metadata", {}).get("receipt")
        return (msg["session_id"] == sid and msg["turn_id"] == turn_id
                and receipt is not None and receipt["strays"] is not None)
    frame = await ws.wait_for(done, after=after)
    return dict(frame["payload"]["message"]["metadata"]["receipt"])


@pytest.mark.parametrize("agent", DIALECTS)
async def test_a_stop_after_the_step_has_a_receipt_and_the_next_step_never_starts(
        tmp_path: Path, agent: str) -> None:
    with trio.fail_after(40):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            sid = await launch(ws, await new_task(ws), agent)
            await ws.call("session.subscribe", {"session_id": sid})
            # Steps of 5 s: the cancel lands in the first even when a loaded machine
            # delays its tool call's frame (with 0.8 s, it once came in the second).
            await ws.call("message.add", {"session_id": sid, "content": "/steps 3 5000"})
            await ws.wait_for(lambda f: f["action"] == "session.message.added"
                              and f["payload"]["message"]["kind"] == "tool_call")
            cancel = await ws.send("agent.cancel", {"session_id": sid, "when": "after_step"})
            answer = frame_ok(await cancel.wait())
            receipt = answer["receipt"]
            assert answer["outcome"] == "cancelled" and receipt["turn_id"] == answer["turn_id"]
            assert receipt["when"] == "after_step" and receipt["by"] == "user"
            assert len(receipt["tool_calls"]["finished"]) == 1, receipt
            assert receipt["tool_calls"]["cancelled"] == [], receipt
            # From acceptance to the agent's confirmation (the rest of the step included):
            # within the cancel's round trip here, which holds both (+1: its rounding).
            # Not a fixed bound: a loaded machine stretches the round trip, not the step.
            assert receipt["confirmed_ms"] is not None
            assert 0 < receipt["confirmed_ms"] <= cancel.ms + 1, (receipt, cancel.ms)
            await trio.sleep(0.5)  # the mock's next step would have started by now
            tools = [p["message"] for p in ws.of("session.message.added", sid)
                     if p["message"]["kind"] == "tool_call"]
            assert len(tools) == 1, tools  # step 2 never started
            shown = await _receipt_shown(ws, sid, answer["turn_id"])
            assert shown["tool_calls"] == receipt["tool_calls"]
            assert shown["strays"] == []
            stored = await ws.call("turn.receipt", {"session_id": sid,
                                                    "turn_id": answer["turn_id"]})
            assert stored["receipt"] == shown


@pytest.mark.parametrize("agent", DIALECTS)
async def test_a_permission_during_the_wait_is_answered_as_a_cancel(tmp_path: Path,
                                                                    agent: str) -> None:
    with trio.fail_after(60):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            sid = await launch(ws, await new_task(ws), agent)
            await ws.call("session.subscribe", {"session_id": sid})
            # Steps of 8 s: the request comes 4 s into the first; its end is 4 s later,
            # a margin a loaded machine's delays do not eat.
            await ws.call("message.add", {"session_id": sid,
                                          "content": "/steps 3 8000 permission"})
            await ws.wait_for(lambda f: f["action"] == "session.message.added"
                              and f["payload"]["message"]["kind"] == "tool_call")
            asked = trio.current_time()
            answer = await ws.call("agent.cancel", {"session_id": sid, "when": "after_step"})
            # The request came half-way through step 1: the cancel went then, not at 8 s.
            assert trio.current_time() - asked < 6.5
            assert answer["outcome"] == "cancelled", answer
            perms = [p["message"] for p in ws.of("session.message.updated", sid)
                     if p["message"]["kind"] == "permission"]
            assert perms and perms[-1]["metadata"]["status"] != "pending", perms
            assert cancellation_changes(ws, sid) == [(True, 1), (False, 2)]


async def test_strays_are_listed_and_ended(tmp_path: Path) -> None:
    with trio.fail_after(40):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            sid = await launch(ws, await new_task(ws))
            await ws.call("session.subscribe", {"session_id": sid})
            await ws.call("message.add", {"session_id": sid, "content": "/stray"})
            await ws.wait_for(lambda f: f["action"] == "session.turn.completed")
            mark = len(ws.notifications)  # the first turn's RUNNING is kept: not that one
            await ws.call("message.add", {"session_id": sid, "content": "/delay 5000"})
            await ws.wait_for(is_state(sid, "RUNNING"), after=mark)
            answer = await ws.call("agent.cancel", {"session_id": sid})
            receipt = await _receipt_shown(ws, sid, answer["turn_id"], after=mark)
            (stray,) = receipt["strays"]
            assert "sleep 600" in stray["command"] and _alive(stray["pid"])
            assert stray["pid"] != os.getpid()
            ended = await ws.call("session.kill_strays", {"session_id": sid})
            assert ended["killed"] == [stray["pid"]] and ended["remaining"] == []
            assert not _alive(stray["pid"])
            again = await ws.call("turn.receipt", {"session_id": sid,
                                                   "turn_id": answer["turn_id"]})
            assert again["receipt"]["strays"] == []


async def test_another_workspace_gets_no_receipt_and_kills_nothing(tmp_path: Path) -> None:
    with trio.fail_after(40):
        async with running_server(tmp_path / "data", workspaces={"b": "b" * 40}) as srv, \
                ws_client(srv) as ws, ws_client(srv, token="b" * 40) as other:
            sid = await launch(ws, await new_task(ws))
            await ws.call("session.subscribe", {"session_id": sid})
            await ws.call("message.add", {"session_id": sid, "content": "/stray"})
            await ws.wait_for(lambda f: f["action"] == "session.turn.completed")
            for action, payload in (("session.kill_strays", {"session_id": sid}),
                                    ("turn.receipt", {"session_id": sid, "turn_id": "t" * 8})):
                err = await other.request(action, payload)
                assert err["type"] == "error" and err["payload"]["code"] == "NOT_FOUND", err
            # Its stop-all stops nothing of ours.
            assert (await other.call("workspace.stop_all", {}))["sessions"] == []


async def test_stop_all_stops_every_running_turn_once(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_server(tmp_path / "data", workspaces={"b": "b" * 40}) as srv, \
                ws_client(srv) as ws, ws_client(srv, token="b" * 40) as other:
            task_id = await new_task(ws)
            sids = []
            for agent in ("mock", "mock-codex", "mock-acp2", "mock", "mock-codex"):
                sid = await launch(ws, task_id, agent)
                await ws.call("session.subscribe", {"session_id": sid})
                await ws.call("message.add", {"session_id": sid, "content": "/tool 6000"})
                sids.append(sid)
            theirs = await launch(other, await new_task(other))
            await other.call("session.subscribe", {"session_id": theirs})
            await other.call("message.add", {"session_id": theirs, "content": "/delay 8000"})
            for sid in sids:
                await ws.wait_for(is_state(sid, "RUNNING"))
            await other.wait_for(is_state(theirs, "RUNNING"))
            await trio.sleep(0.3)
            answers: list[dict[str, Any]] = []
            async with trio.open_nursery() as nursery:
                async def after_step() -> None:
                    answers.append(await ws.call("agent.cancel", {"session_id": sids[0],
                                                                  "when": "after_step"}))
                nursery.start_soon(after_step)
                await ws.wait_for(lambda f: f["action"] == "session.cancel.progress"
                                  and f["payload"]["session_id"] == sids[0])
                started = trio.current_time()
                stopped = await ws.call("workspace.stop_all", {})
            assert trio.current_time() - started < 5  # not the tools' 6 s
            entries = {e["session_id"]: e for e in stopped["sessions"]}
            assert set(entries) == set(sids), entries
            for sid in sids:
                receipt = entries[sid]["receipt"]
                assert receipt is not None and receipt["outcome"] == "cancelled", entries[sid]
                # Each through its own single flight: one pending pair per session.
                assert cancellation_changes(ws, sid) == [(True, 1), (False, 2)], sid
            # The one already cancelling was joined (its receipt says who asked first).
            assert entries[sids[0]]["receipt"]["by"] == "user"
            assert entries[sids[1]]["receipt"]["by"] == "stop_all"
            assert answers[0]["receipt"] == entries[sids[0]]["receipt"]
            # Another workspace's turn runs on.
            dto = (await other.call("session.list", {"task_id": (await other.call(
                "task.list"))["tasks"][0]["id"]}))["sessions"][0]
            assert dto["state"] == "RUNNING"


async def test_server_info_carries_each_profile_s_cancel_figures(tmp_path: Path) -> None:
    with trio.fail_after(40):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            sid = await launch(ws, await new_task(ws))
            await ws.call("session.subscribe", {"session_id": sid})
            for _ in range(3):
                mark = len(ws.notifications)  # only this turn's frames: earlier ones are kept
                await ws.call("message.add", {"session_id": sid, "content": "/delay 5000"})
                await ws.wait_for(is_state(sid, "RUNNING"), after=mark)
                answer = await ws.call("agent.cancel", {"session_id": sid})
                await _receipt_shown(ws, sid, answer["turn_id"], after=mark)
            info = await ws.call("server.info", {})
            assert "stop_levels" in info["features"]
            figures = {p["name"]: p for p in info["agent_profiles"]}
            mock = figures["mock"]["cancel"]
            assert mock["count"] == 3 and mock["escalated"] == 0, mock
            assert mock["p50_ms"] is not None and mock["p95_ms"] >= mock["p50_ms"]
            assert mock["version"] == "turnvisor-mock 0.1.0"
            assert figures["mock-codex"]["cancel"]["count"] == 0


async def test_an_escalated_stop_s_receipt_says_the_agent_never_confirmed(tmp_path: Path) -> None:
    timeouts = {"cancel_join_s": 0.3, "cancel_escalate_s": 0.8}
    with trio.fail_after(40):
        async with running_server(tmp_path / "data", timeouts=timeouts) as srv, \
                ws_client(srv) as ws:
            sid = await launch(ws, await new_task(ws))
            await ws.call("session.subscribe", {"session_id": sid})
            await ws.call("message.add", {"session_id": sid, "content": "/hang"})
            await ws.wait_for(is_state(sid, "RUNNING"))
            answer = await ws.call("agent.cancel", {"session_id": sid})
            assert answer["outcome"] == "escalated", answer
            receipt = answer["receipt"]
            assert receipt["outcome"] == "escalated" and receipt["confirmed_ms"] is None
            shown = await _receipt_shown(ws, sid, answer["turn_id"])
            assert shown["outcome"] == "escalated"
            assert shown["strays"] == []  # /hang starts nothing of its own
