"""Floods (issue 27, item 7): an agent's text in one turn, a client's one message.

The attack: 20 MiB of text in one turn grew the database by 394 MiB and
pushed 215 MB to one subscriber.  Now the turn's text stops at the cap, one
status message says so, the turn goes on and the user's cancel still lands;
what the flood costs on disk and on a subscriber's connection is bounded by
the cap, not by the flood.  A client's one message (a REST body, a
WebSocket frame or message) above its limit gets a clear error, and the
connection is kept where the protocol allows.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import WebSocketConnection, open_websocket_url

from supervisor.config import Limits
from supervisor.turn.transcript import OUTPUT_CUT_STATUS
from tests.support.server import running_server
from tests.support.ws import RequestFailed, ws_client

CAP = 1024 * 1024
FLOOD_MIB = 20


class Client:
    """A WebSocket client that counts every byte it receives."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self.received = 0
        self.frames: list[dict[str, Any]] = []
        self.changed = trio.Event()

    async def read(self) -> None:
        while True:
            data = await self.ws.get_message()
            self.received += len(data)
            frame = json.loads(data)
            if frame.get("action") == "session.message.updated":
                frame["payload"] = {}  # (only counted: the flood's text is not kept here)
            self.frames.append(frame)
            self.changed.set()
            self.changed = trio.Event()

    async def wait_for(self, pred: Any, within_s: float = 30) -> dict[str, Any]:
        with trio.fail_after(within_s):
            while True:
                for frame in self.frames:
                    if pred(frame):
                        return frame
                await self.changed.wait()

    async def call(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        rid = str(uuid.uuid4())
        await self.ws.send_message(json.dumps(
            {"id": rid, "type": "request", "action": action, "payload": payload}))
        frame = await self.wait_for(lambda f: f.get("id") == rid)
        assert frame["type"] == "response", frame
        return dict(frame["payload"])


def store_size(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.glob("turnvisor.db*"))


def added(frame: dict[str, Any]) -> dict[str, Any] | None:
    if frame.get("action") == "session.message.added":
        return dict(frame["payload"]["message"])
    return None


async def test_a_flood_of_text_costs_the_cap_not_the_flood(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    async with running_server(data_dir, limits=Limits(max_turn_output_bytes=CAP)) as srv, \
            open_websocket_url(srv.ws_url, extra_headers=[
                (b"Authorization", f"Bearer {srv.token}".encode())],
                max_message_size=64 * 1024 * 1024) as ws, \
            trio.open_nursery() as nursery:
        client = Client(ws)
        nursery.start_soon(client.read)
        task = await client.call("task.create", {"title": "flood"})
        session = await client.call("session.launch", {"task_id": task["id"]})
        sid = session["id"]
        # Whole-message updates (no text_appends): the costlier kind of subscriber.
        await client.call("session.subscribe", {"session_id": sid})
        disk_before, received_before = store_size(data_dir), client.received
        await client.call("message.add", {"session_id": sid, "content": f"/flood {FLOOD_MIB}"})

        def cut(frame: dict[str, Any]) -> bool:
            msg = added(frame)
            return msg is not None and bool(msg["metadata"].get("output_cut"))

        status = added(await client.wait_for(cut, 60))
        assert status is not None
        assert status["content"] == OUTPUT_CUT_STATUS.format("1 MiB")
        assert status["metadata"] == {"output_cut": True, "limit_bytes": CAP,
                                      "variant": "warning"}
        # The turn goes on (the agent is still flooding or waiting) ...
        listed = await client.call("session.list", {"task_id": task["id"]})
        assert listed["sessions"][0]["state"] == "RUNNING"
        # ... and the user's cancel lands.
        with trio.fail_after(15):
            answer = await client.call("agent.cancel", {"session_id": sid})
        assert answer["success"] is True
        done = await client.wait_for(lambda f: f.get("action") == "session.turn.completed")
        assert done["payload"]["stop_reason"] == "cancelled"

        messages = (await client.call("message.list", {"session_id": sid}))["messages"]
        text = "".join(m["content"] for m in messages
                       if m["role"] == "agent" and m["kind"] == "text")
        assert len(text.encode()) == CAP  # what fits, to the byte; nothing after
        cuts = [m for m in messages if m["metadata"].get("output_cut")]
        assert len(cuts) == 1
        assert any(m["content"] == "Turn cancelled by user" for m in messages)
        grown = store_size(data_dir) - disk_before
        pushed = client.received - received_before
        nursery.cancel_scope.cancel()
    # Bounded by the cap (a long answer is written in segments, so its rewrites
    # are too), not by the flood: 20 MiB once cost 394 MiB and 215 MB.
    assert grown < 6 * CAP, f"the store grew by {grown / 2**20:.1f} MiB"
    assert pushed < 6 * CAP, f"the subscriber got {pushed / 2**20:.1f} MiB"


async def test_one_message_above_its_limit_is_refused_clearly(tmp_path: Path) -> None:
    limits = Limits(max_body_bytes=64 * 1024, max_ws_frame_bytes=32 * 1024)
    async with running_server(tmp_path / "data", limits=limits) as srv:
        async with httpx.AsyncClient(base_url=srv.url, headers=srv.auth) as http:
            big = await http.post("/api/v1/tasks", json={"title": "x" * 100_000})
            assert big.status_code == 413
            assert big.json()["error"]["message"] == (
                "request body larger than 65536 bytes (the server's [limits] max_body_bytes)")
            assert big.headers["connection"] == "close"  # its body was never read
            assert (await http.get("/api/v1/health")).status_code == 200
        async with ws_client(srv) as ws:
            # Above the frame limit: an error naming the limit, the connection kept.
            with pytest.raises(RequestFailed) as refused:
                await ws.call("task.create", {"title": "x" * 40_000})
            error = refused.value.frame["payload"]
            assert error["code"] == "BAD_REQUEST"
            assert "frame larger than 32768 bytes" in error["message"]
            assert "tasks" in await ws.call("task.list")
            # Above the message limit (4 MiB at least): closed with 1009, unread.
            await ws.send_raw("x" * (5 << 20))
            with trio.fail_after(10):
                while not ws.closed:
                    await ws.changed()
            assert ws.conn.closed is not None and ws.conn.closed.code == 1009
            assert "larger than" in (ws.conn.closed.reason or "")
        async with ws_client(srv) as again:
            assert (await again.call("task.list"))["tasks"] == []
