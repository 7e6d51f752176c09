"""The WebSocket gateway's envelope and routing (DESIGN.md §4)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import trio

from supervisor.config import Limits
from tests.support.server import Server, running_server
from tests.support.ws import WsClient, is_turn_completed, ws_client

from .support import launch, new_task, raw_request


async def test_envelope_of_responses_and_notifications(server: Server) -> None:
    with trio.fail_after(20):
        async with ws_client(server) as ws:
            reply = await ws.request("task.create", {"title": "envelope"})
            assert reply["type"] == "response"
            assert reply["action"] == "task.create"
            assert set(reply) == {"id", "type", "action", "payload", "timestamp"}
            assert datetime.fromisoformat(reply["timestamp"]).tzinfo is not None
            task_id = reply["payload"]["id"]
            sid = await launch(ws, task_id)
            sub = await ws.request("session.subscribe", {"session_id": sid})
            assert sub["payload"] == {"success": True}
            snap = await ws.wait_for(lambda f: f["action"] == "session.state_changed")
            assert snap["type"] == "notification"
            assert set(snap) == {"id", "type", "action", "payload", "timestamp"}
            assert set(snap["payload"]) == {"session_id", "task_id", "new_state", "updated_at",
                                            "cancellation_pending", "cancellation_revision",
                                            "agent_live", "reachable", "current_turn_id"}
            assert snap["payload"]["agent_live"] is True  # launched: its agent runs
            # The client's id is echoed whatever it looks like.
            await ws.send_raw(raw_request("task.list", None, rid="my-id-42"))
            frame = await ws.wait_for(lambda f: f["id"] == "my-id-42")
            assert frame["type"] == "response"
            assert frame["action"] == "task.list"


#: Notifications about the workspace's task and session lists (not DESIGN §4's per-session ones).
#: The workspace's notifications (every connection of it hears them, subscribed or not).
LIST_ACTIONS = {"task.changed", "task.removed", "session.changed", "session.removed",
                "session.attention"}


def session_frames(ws: WsClient) -> list[dict[str, Any]]:
    return [f for f in ws.notifications if f["action"] not in LIST_ACTIONS]


async def test_notifications_reach_only_subscribers(server: Server) -> None:
    with trio.fail_after(30):
        async with ws_client(server) as a, ws_client(server) as b, ws_client(server) as c, \
                ws_client(server) as witness:
            task_id = await new_task(a)
            s1 = await launch(a, task_id)
            s2 = await launch(a, task_id)
            await a.call("session.subscribe", {"session_id": s1})
            await b.call("session.subscribe", {"session_id": s2})
            await witness.call("session.subscribe", {"session_id": s1})
            for sid in (s1, s2):
                await c.call("message.add", {"session_id": sid, "content": "hello there"})
            await a.wait_for(is_turn_completed(s1))
            await b.wait_for(is_turn_completed(s2))
            await c.call("task.list")
            assert {f["payload"]["session_id"] for f in session_frames(a)} == {s1}
            assert {f["payload"]["session_id"] for f in session_frames(b)} == {s2}
            assert session_frames(c) == []
            # The workspace's list notifications reach every connection, subscribed or not.
            assert any(f["action"] == "session.changed" for f in c.notifications)

            assert await a.call("session.unsubscribe", {"session_id": s1}) == {"success": True}
            seen = len(session_frames(a))
            await c.call("message.add", {"session_id": s1, "content": "after unsubscribe"})
            await witness.wait_for(
                lambda f: is_turn_completed(s1)(f)
                and len(witness.of("session.turn.completed", s1)) == 2)
            await a.call("task.list")  # a round trip: anything queued for A is here now
            assert session_frames(a)[seen:] == []
            assert server.sup.bus.subscriber_count(s1) == 1


async def test_frame_above_the_hard_cap_closes_only_that_connection(tmp_path: Path) -> None:
    """Between limits.max_ws_frame_bytes and 4x that (at least 4 MiB) a frame gets
    an error (test_bad_input); above it Hypercorn closes the connection (1009)
    without reading it into the gateway.  Nothing else is affected."""
    with trio.fail_after(30):
        async with running_server(tmp_path / "data",
                                  limits=Limits(max_ws_frame_bytes=16 * 1024)) as srv, \
                ws_client(srv) as bystander:
            task_id = await new_task(bystander)
            async with ws_client(srv) as ws:
                await ws.send_raw(raw_request("task.create", {"title": "x" * (5 << 20)}))
                with trio.fail_after(10):
                    while not ws.closed:
                        await ws.changed()
                assert ws.conn.closed is not None
                assert ws.conn.closed.code == 1009
            tasks = (await bystander.call("task.list"))["tasks"]
            assert [t["id"] for t in tasks] == [task_id]
            async with ws_client(srv) as again:
                assert json.dumps(await again.call("task.list"))
