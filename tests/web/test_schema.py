"""The published contract (DESIGN.md §14): ``GET /api/v1/schema`` generated from
the models the gateway validates with, ``server.info`` / ``GET /api/v1/info``,
and the check every WebSocket test runs against the schema."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from jsonschema import Draft202012Validator

from tests.support import frames_check
from tests.support.server import Server
from tests.support.ws import is_turn_completed, ws_client
from web.contract.schema import schema_document

from .support import http, launch, new_task


def frame(kind: str, action: str, payload: Any) -> dict[str, Any]:
    return {"id": "1", "type": kind, "action": action, "payload": payload,
            "timestamp": "2026-12-04T00:00:00Z"}


async def test_the_schema_is_served_and_is_a_2020_12_schema(server: Server) -> None:
    async with http(server) as h:
        r = await h.get("/api/v1/schema")
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/schema+json")
        doc = r.json()
        assert (await h.get("/api/v1/schema", headers={"Authorization": ""})).status_code == 401
    assert doc == schema_document()
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(doc)
    # Every action the gateway serves has a request and a response in it.
    for action in ("task.create", "message.add", "agent.cancel", "queue.move",
                   "session.subscribe", "permission.respond", "server.info"):
        assert set(doc["x-actions"][action]) == {"request", "response"}
    assert "session.cancellation_changed" in doc["x-notifications"]


@pytest.mark.parametrize(("good", "sample"), [
    (True, frame("request", "task.create", {"title": "fix the parser"})),
    (False, frame("request", "task.create", {"title": ""})),
    (False, frame("request", "task.create", {"title": 5})),
    (True, frame("request", "message.add", {"session_id": "s", "content": "hi",
                                            "delivery": "steer"})),
    (False, frame("request", "message.add", {"session_id": "s", "content": "hi",
                                             "delivery": "later"})),
    (True, frame("error", "agent.cancel", {"code": "CONFLICT", "message": "no"})),
    (False, frame("error", "agent.cancel", {"code": "OOPS", "message": "no"})),
    (True, frame("notification", "session.cancellation_changed",
                 {"session_id": "s", "cancellation_pending": True,
                  "cancellation_revision": 3})),
    (False, frame("notification", "session.cancellation_changed",
                  {"session_id": "s", "cancellation_pending": "yes",
                   "cancellation_revision": 3})),
    (False, {"type": "request"}),
])
def test_the_document_alone_validates_frames(good: bool, sample: dict[str, Any]) -> None:
    """A client can validate any frame with the document and nothing else."""
    assert Draft202012Validator(schema_document()).is_valid(sample) is good


def test_a_field_the_schema_does_not_declare_is_caught() -> None:
    """What keeps the schema true: a DTO field added without its model fails
    the check every WebSocket test runs."""
    session = {"id": "s", "task_id": "t", "state": "RUNNING", "agent": "mock",
               "created_at": "x", "updated_at": "x", "cancellation_pending": False,
               "cancellation_revision": 0, "title": None, "archived": False,
               "agent_live": True, "queued_count": 0, "auto_run": True,
               "current_turn_id": None, "protocol": "acp/1", "subagents": []}
    frames_check.check_received(frame("notification", "session.changed",
                                      {"session": session}))
    with pytest.raises(frames_check.SchemaMismatch, match="undeclared"):
        frames_check.check_received(frame("notification", "session.changed",
                                          {"session": {**session, "undeclared": 1}}))
    with pytest.raises(frames_check.SchemaMismatch, match="not in the schema"):
        frames_check.check_received(frame("notification", "session.mystery", {}))


async def test_server_info_over_ws_and_rest(server: Server) -> None:
    async with ws_client(server) as ws, http(server) as h:
        info = await ws.call("server.info", {})
        assert (await h.get("/api/v1/info")).json() == info
    assert info["protocol_version"] == 1
    assert info["version"]
    assert "mock" in info["agents"] and "mock-codex" in info["agents"]
    assert "schema" in info["features"]


async def test_a_whole_turn_is_checked_frame_by_frame(server: Server) -> None:
    assert frames_check.enabled
    before = frames_check.checked
    with trio.fail_after(30):
        async with ws_client(server) as ws:
            sid = await launch(ws, await new_task(ws))
            await ws.call("session.subscribe", {"session_id": sid, "text_appends": True})
            await ws.call("message.add", {"session_id": sid, "content": "/tool 10"})
            await ws.wait_for(is_turn_completed(sid))
            await ws.call("message.add", {"session_id": sid, "content": "/delay 5000"})
            await ws.call("agent.cancel", {"session_id": sid})
            # Refused by the schema and by the server alike.
            bad = await ws.request("message.add", {"session_id": sid, "content": ""})
            assert bad["type"] == "error"
            assert bad["payload"]["code"] == "VALIDATION_ERROR"
    assert frames_check.checked - before >= 10
