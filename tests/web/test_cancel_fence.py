"""DESIGN.md §14: ``agent.cancel {turn_id}`` never stops a turn other than the
one it names, and every cancel answer says what happened (``outcome``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from tests.support.server import Server, running_server
from tests.support.ws import Frame, WsClient, is_state, ws_client

from .support import http, launch, new_task


def completed(sid: str, turn_id: str) -> Any:
    def pred(f: Frame) -> bool:
        p = f.get("payload") or {}
        return (f["action"] == "session.turn.completed" and p.get("session_id") == sid
                and p.get("turn_id") == turn_id)
    return pred


def next_user_turn(previous: str) -> Any:
    def pred(f: Frame) -> bool:
        msg = (f.get("payload") or {}).get("message") or {}
        return (f["action"] == "session.message.added" and msg.get("role") == "user"
                and msg.get("turn_id") not in (None, previous))
    return pred


async def started_turn(ws: WsClient, sid: str, content: str) -> str:
    answer = await ws.call("message.add", {"session_id": sid, "content": content})
    assert answer["delivery"] == "started", answer
    return str(answer["turn_id"])


async def test_outcomes_of_plain_cancels(tmp_path: Path) -> None:
    timeouts = {"cancel_join_s": 0.5, "cancel_escalate_s": 1.5}
    async with running_server(tmp_path / "data", timeouts=timeouts) as server, \
            ws_client(server) as ws:
        sid = await launch(ws, await new_task(ws))
        await ws.call("session.subscribe", {"session_id": sid})
        idle = await ws.call("agent.cancel", {"session_id": sid})
        assert (idle["outcome"], idle["turn_id"]) == ("nothing_running", None)

        turn = await started_turn(ws, sid, "/delay 30000")
        state = await ws.wait_for(is_state(sid, "RUNNING"))
        assert state["payload"]["current_turn_id"] == turn
        stopped = await ws.call("agent.cancel", {"session_id": sid, "turn_id": turn})
        assert (stopped["outcome"], stopped["turn_id"]) == ("cancelled", turn)

        stubborn = await started_turn(ws, sid, "/slow 30000")
        await ws.wait_for(is_state(sid, "RUNNING"))
        forced = await ws.call("agent.cancel", {"session_id": sid}, timeout=20)
        assert (forced["outcome"], forced["turn_id"]) == ("escalated", stubborn)
        # The REST cancel answers the same way.
        async with http(server) as h:
            r = await h.post(f"/api/v1/task-sessions/{sid}/cancel", json={"turn_id": turn})
        assert r.status_code == 200
        assert r.json()["outcome"] == "turn_ended" and r.json()["turn_id"] == turn


async def test_a_cancel_aimed_at_an_ended_turn_leaves_the_next_one_alone(
        server: Server) -> None:
    async with ws_client(server) as ws:
        sid = await launch(ws, await new_task(ws))
        await ws.call("session.subscribe", {"session_id": sid})
        first = await started_turn(ws, sid, "hello")
        await ws.wait_for(completed(sid, first))
        second = await started_turn(ws, sid, "/delay 2000")
        await ws.wait_for(is_state(sid, "RUNNING"))
        seen = len(ws.notifications)
        late = await ws.call("agent.cancel", {"session_id": sid, "turn_id": first})
        assert (late["outcome"], late["turn_id"]) == ("turn_ended", first)
        done = await ws.wait_for(completed(sid, second), timeout=15)
        assert done["payload"]["stop_reason"] == "end_turn"
        # Nothing about a cancel was published for the turn that went on.
        assert not [f for f in ws.notifications[seen:]
                    if f["action"] in ("session.cancellation_changed", "session.cancel.progress")]


async def test_cancels_timed_around_a_turns_end_never_stop_the_queued_turn(
        server: Server) -> None:
    """The race of the issue: a short turn A with an entry queued behind it;
    cancels aimed at A are sent just before, at and after A's end.  Whatever
    each one hits, the turn that runs after A is never stopped by them."""
    async with ws_client(server) as ws:
        sid = await launch(ws, await new_task(ws))
        await ws.call("session.subscribe", {"session_id": sid})
        for offset_ms in (150, 190, 200, 210, 230, 260, 300):
            mark = len(ws.notifications)
            a = await started_turn(ws, sid, "/delay 200")
            queued = await ws.call("message.add", {"session_id": sid,
                                                   "content": "/delay 400",
                                                   "delivery": "queue"})
            assert queued["delivery"] == "queued"
            await trio.sleep(offset_ms / 1000)
            answers: list[dict[str, Any]] = []

            async def aim(delay: float, a: str = a, out: list[dict[str, Any]] = answers) -> None:
                await trio.sleep(delay)
                out.append(await ws.call("agent.cancel", {"session_id": sid, "turn_id": a}))

            async with trio.open_nursery() as nursery:
                for k in range(4):
                    nursery.start_soon(aim, k * 0.02)
            assert all(ans["turn_id"] == a for ans in answers), answers
            assert {ans["outcome"] for ans in answers} <= {"cancelled", "turn_ended"}
            ended_a = await ws.wait_for(completed(sid, a), timeout=15)
            if ended_a["payload"]["stop_reason"] == "cancelled":
                # A user cancel pauses the queue: the person resumes it.
                await ws.call("queue.set_auto_run", {"session_id": sid, "auto_run": True})
            b = await ws.wait_for(next_user_turn(a), timeout=15, after=mark)
            b_turn = b["payload"]["message"]["turn_id"]
            ended_b = await ws.wait_for(completed(sid, b_turn), timeout=15)
            assert ended_b["payload"]["stop_reason"] == "end_turn", (offset_ms, answers)
