"""DESIGN.md §13 over the WebSocket API, on a real server with the mock agent (ACP v1 and v2):
the session DTO's ``subagents``, ``session.subagent.changed``, ``subagent.cancel``
and its answers at the edge (every frame is checked against the published schema)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.server import running_server
from tests.support.ws import WsClient, ws_client

from .support import launch, new_task


def _latest(ws: WsClient, sid: str) -> dict[str, dict[str, Any]]:
    """Each child's last ``session.subagent.changed``, by id."""
    return {p["subagent"]["id"]: p["subagent"] for p in ws.of("session.subagent.changed", sid)}


async def _both_running(ws: WsClient, sid: str) -> list[dict[str, Any]]:
    with trio.fail_after(10):
        while True:
            children = list(_latest(ws, sid).values())
            if len(children) == 2 and all(c["state"] == "running" for c in children):
                return children
            await trio.sleep(0.02)


@pytest.mark.parametrize("agent", ["mock", "mock-acp2", "mock-codex"])
async def test_subagent_cancel_over_the_websocket(tmp_path: Path, agent: str) -> None:
    with trio.fail_after(40):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            sid = await launch(ws, await new_task(ws), agent=agent)
            dto = (await ws.call("session.list", {"task_id": (await ws.call(
                "task.list"))["tasks"][0]["id"]}))["sessions"][0]
            assert dto["subagents"] == []
            await ws.call("session.subscribe", {"session_id": sid})
            # Validated at the edge: a missing field, then an unknown child.
            err = await ws.request("subagent.cancel", {"session_id": sid})
            assert err["payload"]["code"] == "VALIDATION_ERROR", err
            err = await ws.request("subagent.cancel", {"session_id": sid, "subagent_id": "x"})
            assert err["payload"]["code"] == "NOT_FOUND", err

            await ws.call("message.add", {"session_id": sid, "content": "/subagents 2 3000"})
            first, second = await _both_running(ws, sid)
            assert first["cancellable"] and first["title"] == "Subagent 1"
            listed = (await ws.call("session.list", {"task_id": dto["task_id"]}))["sessions"]
            assert [c["id"] for c in listed[0]["subagents"]] == [first["id"], second["id"]]

            answer = await ws.call("subagent.cancel",
                                   {"session_id": sid, "subagent_id": first["id"]})
            assert answer["outcome"] == "cancel_sent" and answer["subagent_id"] == first["id"]
            await ws.wait_for(lambda f: f["action"] == "session.subagent.changed"
                              and f["payload"]["subagent"]["id"] == first["id"]
                              and f["payload"]["subagent"]["state"] == "cancelled")
            assert _latest(ws, sid)[second["id"]]["state"] == "running"
            again = await ws.call("subagent.cancel",
                                  {"session_id": sid, "subagent_id": first["id"]})
            assert again["outcome"] == "already_finished"
            # The parent's turn goes on to its own end; no cancel was pending for it.
            ended = await ws.wait_for(lambda f: f["action"] == "session.turn.completed",
                                      timeout=10)
            assert ended["payload"]["stop_reason"] == "end_turn"
            assert ws.of("session.cancellation_changed", sid) == []
            assert _latest(ws, sid)[second["id"]]["state"] == "completed"
