"""DESIGN.md §15 over the API: every connection of the workspace hears when a session
waits for an approval or is being cancelled (``session.attention``), subscribed or not, and
the task and session DTOs say it (``approval_count``, ``cancelling_count``,
``needs_approval``)."""

from __future__ import annotations

from typing import Any

import trio

from tests.support.ws import WsClient, is_turn_completed, ws_client

from .support import launch, new_task, start_turn


def attention(ws: WsClient, sid: str) -> list[tuple[bool, bool]]:
    """Each change of (needs approval, cancelling) heard; a ``session.attention`` that
    changes neither (a turn's end: its ``attention``, tests/web/test_attention_kept.py)
    leaves the pair as it was."""
    pairs: list[tuple[bool, bool]] = []
    for p in ws.of("session.attention", sid):
        pair = (p["needs_approval"], p["cancelling"])
        if not pairs or pairs[-1] != pair:
            pairs.append(pair)
    return pairs


async def task_row(ws: WsClient, task_id: str) -> dict[str, Any]:
    (row,) = [t for t in (await ws.call("task.list", {}))["tasks"] if t["id"] == task_id]
    return row


async def test_approval_and_cancel_reach_a_connection_that_does_not_follow(server: Any) -> None:
    with trio.fail_after(30):
        async with ws_client(server) as ws, ws_client(server) as other:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id)
            await ws.call("session.subscribe", {"session_id": sid})
            row = await task_row(other, task_id)
            assert (row["approval_count"], row["cancelling_count"]) == (0, 0)

            # Asked: the other connection (not subscribed) hears it; the DTOs say it.
            await ws.call("message.add", {"session_id": sid, "content": "/permission"})
            await other.wait_for(lambda f: f["action"] == "session.attention"
                                 and f["payload"]["session_id"] == sid)
            assert attention(other, sid) == [(True, False)]
            assert other.of("session.attention", sid)[0]["task_id"] == task_id
            assert (await task_row(other, task_id))["approval_count"] == 1
            (dto,) = (await other.call("session.list", {"task_id": task_id}))["sessions"]
            assert dto["needs_approval"] is True

            # Answered: no longer needed.
            req = (await ws.wait_for(lambda f: f["action"] == "session.permission.requested")
                   )["payload"]
            await ws.call("permission.respond", {"session_id": sid, "request_id": req["request_id"],
                                                 "option_id": req["options"][0]["option_id"]})
            await ws.wait_for(is_turn_completed(sid))
            await other.wait_for(lambda f: len(attention(other, sid)) >= 2)
            assert attention(other, sid) == [(True, False), (False, False)]
            assert (await task_row(other, task_id))["approval_count"] == 0

            # A cancel: "Cancelling" while it is pending, then over.
            await start_turn(ws, sid, "/delay 20000")
            await ws.call("agent.cancel", {"session_id": sid})
            await other.wait_for(lambda f: len(attention(other, sid)) >= 4)
            assert attention(other, sid)[2:] == [(False, True), (False, False)]
            (dto,) = (await other.call("session.list", {"task_id": task_id}))["sessions"]
            assert dto["needs_approval"] is False
            assert (await task_row(other, task_id))["cancelling_count"] == 0


async def test_a_withdrawn_question_needs_nobody(server: Any) -> None:
    with trio.fail_after(30):
        async with ws_client(server) as ws:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id)
            await ws.call("message.add", {"session_id": sid, "content": "/withdraw"})
            await ws.wait_for(lambda f: len(attention(ws, sid)) >= 2)
            assert attention(ws, sid) == [(True, False), (False, False)]
