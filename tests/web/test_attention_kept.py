"""DESIGN.md §15 without a page: what needs the person is the backend's, kept in the
database until seen.  A turn that ends sets the session DTO's ``attention`` to
``turn_ended`` (``failed`` when it ended in an error), a failed start to ``failed``, a
waiting permission shows ``approval``; ``session.seen`` clears it for every connection
(``session.attention`` and ``session.changed``); and it survives a restart of the server
on the same data dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.profiles import parse_profiles
from tests.support.server import Server, running_server
from tests.support.ws import RequestFailed, WsClient, is_turn_completed, ws_client

from .support import launch, new_task

BROKEN = parse_profiles({"broken": {"protocol": "acp", "command": ["no-such-agent-cli"],
                                    "sandbox": "none"}})


async def session_row(ws: WsClient, task_id: str, sid: str) -> dict[str, Any]:
    (row,) = [s for s in (await ws.call("session.list", {"task_id": task_id}))["sessions"]
              if s["id"] == sid]
    return row


async def task_row(ws: WsClient, task_id: str) -> dict[str, Any]:
    (row,) = [t for t in (await ws.call("task.list", {}))["tasks"] if t["id"] == task_id]
    return row


def heard(ws: WsClient, sid: str) -> list[str | None]:
    return [p.get("attention") for p in ws.of("session.attention", sid)]


async def run_turn(ws: WsClient, sid: str, prompt: str) -> None:
    await ws.call("session.subscribe", {"session_id": sid})
    await ws.call("message.add", {"session_id": sid, "content": prompt})
    await ws.wait_for(is_turn_completed(sid), timeout=20)


async def test_a_turn_end_waits_for_the_person_until_one_connection_sees_it(
        server: Server) -> None:
    with trio.fail_after(40):
        async with ws_client(server) as ws, ws_client(server) as other:
            task_id = await new_task(ws, "Parser fix")
            sid = await launch(ws, task_id)
            assert (await session_row(other, task_id, sid))["attention"] is None
            assert (await task_row(other, task_id))["attention_sessions"] == []

            await run_turn(ws, sid, "hello")
            # The other connection follows no session and hears it all the same.
            await other.wait_for(lambda f: f["action"] == "session.attention"
                                 and f["payload"].get("attention") == "turn_ended")
            assert (await session_row(other, task_id, sid))["attention"] == "turn_ended"
            assert (await task_row(other, task_id))["attention_sessions"] == [
                {"session_id": sid, "attention": "turn_ended", "agent": "mock", "title": None}]

            # Seen on one connection: gone for every one, DTO included.
            mark = len(other.notifications)
            seen = await ws.call("session.seen", {"session_id": sid})
            assert seen["id"] == sid and seen["attention"] is None
            await other.wait_for(lambda f: f["action"] == "session.attention"
                                 and f["payload"]["session_id"] == sid
                                 and f["payload"].get("attention") is None, after=mark)
            await other.wait_for(lambda f: f["action"] == "session.changed"
                                 and f["payload"]["session"]["id"] == sid
                                 and f["payload"]["session"]["attention"] is None, after=mark)
            assert (await session_row(other, task_id, sid))["attention"] is None
            assert (await task_row(other, task_id))["attention_sessions"] == []
            # Seeing it again changes nothing and announces nothing.
            count = len(heard(other, sid))
            await ws.call("session.seen", {"session_id": sid})
            await ws.call("ping", {})
            await other.call("ping", {})
            assert len(heard(other, sid)) == count


async def test_an_approval_shows_until_answered_and_a_failed_turn_says_failed(
        server: Server) -> None:
    with trio.fail_after(40):
        async with ws_client(server) as ws:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id)
            await ws.call("session.subscribe", {"session_id": sid})
            await ws.call("message.add", {"session_id": sid, "content": "/permission"})
            req = (await ws.wait_for(lambda f: f["action"] == "session.permission.requested")
                   )["payload"]
            assert (await session_row(ws, task_id, sid))["attention"] == "approval"
            assert [a["attention"] for a in (await task_row(ws, task_id))["attention_sessions"]
                    ] == ["approval"]
            # Seeing the question does not answer it.
            assert (await ws.call("session.seen", {"session_id": sid}))["attention"] == "approval"
            await ws.call("permission.respond", {"session_id": sid,
                                                 "request_id": req["request_id"],
                                                 "option_id": req["options"][0]["option_id"]})
            await ws.wait_for(is_turn_completed(sid))
            await ws.wait_for(lambda f: "turn_ended" in heard(ws, sid))
            assert heard(ws, sid)[0] == "approval"

            await ws.call("session.seen", {"session_id": sid})
            await run_turn(ws, sid, "/crash")
            await ws.wait_for(lambda f: "failed" in heard(ws, sid))
            assert (await session_row(ws, task_id, sid))["attention"] == "failed"


async def test_a_failed_start_is_counted_and_marked(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data", profiles=BROKEN) as server, \
            ws_client(server) as ws:
        with trio.fail_after(30):
            task_id = await new_task(ws)
            with pytest.raises(RequestFailed):
                await ws.call("session.launch", {"task_id": task_id, "agent": "broken"})
            (row,) = (await ws.call("session.list", {"task_id": task_id}))["sessions"]
            assert (row["state"], row["attention"]) == ("FAILED", "failed")
            task = await task_row(ws, task_id)
            assert task["failed_count"] == 1
            assert task["attention_sessions"][0]["attention"] == "failed"
            # Seen: no longer news, but the task still counts its failed session.
            await ws.call("session.seen", {"session_id": row["id"]})
            task = await task_row(ws, task_id)
            assert (task["failed_count"], task["attention_sessions"]) == (1, [])


async def test_what_was_not_seen_survives_a_restart_and_a_stranger_cannot_clear_it(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with running_server(data) as server, ws_client(server) as ws:
        with trio.fail_after(30):
            task_id = await new_task(ws)
            sid = await launch(ws, task_id)
            await run_turn(ws, sid, "hello")
            await ws.wait_for(lambda f: "turn_ended" in heard(ws, sid))
    async with running_server(data) as server, ws_client(server) as ws:
        with trio.fail_after(30):
            assert (await session_row(ws, task_id, sid))["attention"] == "turn_ended"
            boot = await ws.call("task.list", {})
            (task,) = [t for t in boot["tasks"] if t["id"] == task_id]
            assert [a["session_id"] for a in task["attention_sessions"]] == [sid]
            with pytest.raises(RequestFailed) as err:
                await ws.call("session.seen", {"session_id": "no-such-session"})
            assert err.value.frame["payload"]["code"] == "NOT_FOUND"
            await ws.call("session.seen", {"session_id": sid})
    async with running_server(data) as server, ws_client(server) as ws:
        with trio.fail_after(30):
            assert (await session_row(ws, task_id, sid))["attention"] is None
