"""DESIGN.md §14: ``message.add {client_message_id}`` is safe to retry: a repeat
in the same session answers what the first made and runs nothing again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from tests.support.server import Server, running_server
from tests.support.ws import WsClient, is_agent_output, is_state, is_turn_completed, ws_client

from .support import launch, new_task


async def user_messages(ws: WsClient, sid: str) -> list[dict[str, Any]]:
    msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
    return [m for m in msgs if m["role"] == "user"]


def add(sid: str, content: str, cid: str, **more: Any) -> dict[str, Any]:
    return {"session_id": sid, "content": content, "client_message_id": cid, **more}


def user_message_added(sid: str) -> Any:
    def pred(f: dict[str, Any]) -> bool:
        p = f.get("payload") or {}
        return (f["action"] == "session.message.added" and p.get("session_id") == sid
                and p["message"]["role"] == "user")
    return pred


async def test_a_retry_after_a_dropped_connection_runs_nothing_again(server: Server) -> None:
    async with ws_client(server) as ws:
        sid = await launch(ws, await new_task(ws))
        await ws.call("session.subscribe", {"session_id": sid})
        # The first attempt ran, and its answer was lost with the connection.
        async with ws_client(server) as lost:
            await lost.send("message.add", add(sid, "only once", "c-1"))
            await ws.wait_for(user_message_added(sid))
        again = await ws.call("message.add", add(sid, "only once", "c-1"))
        assert again["delivery"] == "started" and again["repeated"] is True
        [first] = await user_messages(ws, sid)
        assert again["id"] == first["id"] and again["turn_id"] == first["turn_id"]
        assert first["metadata"]["client_message_id"] == "c-1"
        # Another id is another message.
        await ws.wait_for(is_turn_completed(sid))
        other = await ws.call("message.add", add(sid, "only once", "c-2"))
        assert other.get("repeated") is None and other["id"] != first["id"]
        assert len(await user_messages(ws, sid)) == 2


async def test_a_retry_whatever_the_dropped_attempt_did(server: Server) -> None:
    """Dropped at once: the first attempt may have run or not; after the
    retry the message exists exactly once."""
    async with ws_client(server) as ws:
        sid = await launch(ws, await new_task(ws))
        async with ws_client(server) as lost:
            await lost.send("message.add", add(sid, "exactly once", "d-1"))
        await ws.call("message.add", add(sid, "exactly once", "d-1"))
        await ws.call("message.add", add(sid, "exactly once", "d-1"))
        assert [m["content"] for m in await user_messages(ws, sid)] == ["exactly once"]


async def test_concurrent_duplicates_from_two_connections(server: Server) -> None:
    async with ws_client(server) as one, ws_client(server) as two:
        sid = await launch(one, await new_task(one))
        answers: list[dict[str, Any]] = []

        async def send(ws: WsClient) -> None:
            answers.append(await ws.call("message.add", add(sid, "/delay 300", "same")))

        async with trio.open_nursery() as nursery:
            for ws in (one, two, one, two):
                nursery.start_soon(send, ws)
        assert len({a["id"] for a in answers}) == 1, answers
        assert sorted(bool(a.get("repeated")) for a in answers) == [False, True, True, True]
        assert len(await user_messages(one, sid)) == 1


async def test_a_queued_message_is_queued_once_and_keeps_its_id_into_its_turn(
        server: Server) -> None:
    async with ws_client(server) as ws:
        sid = await launch(ws, await new_task(ws))
        await ws.call("session.subscribe", {"session_id": sid})
        await ws.call("message.add", {"session_id": sid, "content": "/delay 800"})
        first = await ws.call("message.add", add(sid, "after it", "q-1"))
        again = await ws.call("message.add", add(sid, "after it", "q-1"))
        assert first["delivery"] == again["delivery"] == "queued"
        assert again["entry"]["id"] == first["entry"]["id"] and again["repeated"]
        assert first["entry"]["client_message_id"] == "q-1"
        queue = await ws.call("queue.list", {"session_id": sid})
        assert [e["id"] for e in queue["entries"]] == [first["entry"]["id"]]
        # Once its turn started, a repeat answers with that turn's message.
        with trio.fail_after(15):
            while len(await user_messages(ws, sid)) < 2:
                await trio.sleep(0.05)
        started = await ws.call("message.add", add(sid, "after it", "q-1"))
        assert started["delivery"] == "started" and started["repeated"]
        assert started["content"] == "after it"
        assert len(await user_messages(ws, sid)) == 2


async def test_the_same_id_for_another_message_is_refused(server: Server) -> None:
    async with ws_client(server) as ws:
        sid = await launch(ws, await new_task(ws))
        await ws.call("message.add", add(sid, "one text", "x"))
        clash = await ws.request("message.add", add(sid, "another text", "x"))
        assert clash["type"] == "error" and clash["payload"]["code"] == "CONFLICT"
        long_id = await ws.request("message.add", add(sid, "t", "x" * 129))
        assert long_id["payload"]["code"] == "VALIDATION_ERROR"


async def test_a_repeat_after_a_backend_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with running_server(data) as server, ws_client(server) as ws:
        sid = await launch(ws, await new_task(ws))
        await ws.call("session.subscribe", {"session_id": sid})
        first = await ws.call("message.add", add(sid, "before the restart", "r-1"))
        await ws.wait_for(is_turn_completed(sid))
    async with running_server(data) as server, ws_client(server) as ws:
        again = await ws.call("message.add", add(sid, "before the restart", "r-1"))
        assert again["repeated"] and again["id"] == first["id"]
        assert len(await user_messages(ws, sid)) == 1


async def test_a_steer_is_steered_once(server: Server) -> None:
    async with ws_client(server) as ws:
        sid = await launch(ws, await new_task(ws), "mock-codex")
        await ws.call("session.subscribe", {"session_id": sid})
        # Long, and steered once the agent streams: on a loaded machine a 3 s turn
        # could end (or not yet have started at the agent) before the steer arrives.
        await ws.call("message.add", {"session_id": sid, "content": "/delay 15000"})
        await ws.wait_for(is_state(sid, "RUNNING"))
        await ws.wait_for(is_agent_output(sid), timeout=20)
        first = await ws.call("message.add", add(sid, "steer this way", "s-1",
                                                 delivery="steer"))
        again = await ws.call("message.add", add(sid, "steer this way", "s-1",
                                                 delivery="steer"))
        assert first["delivery"] == again["delivery"] == "steered"
        assert again["id"] == first["id"] and again["repeated"]
        steers = [m for m in await user_messages(ws, sid)
                  if m["metadata"].get("delivery") == "steer"]
        assert len(steers) == 1
        await ws.call("agent.cancel", {"session_id": sid})
