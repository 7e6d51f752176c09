"""Bad input gets a clear error, the connection stays usable, no traceback
reaches a client and nothing stored is lost (issue 4, item 5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.config import Limits
from tests.support.server import Server, running_server
from tests.support.ws import WsClient, is_turn_completed, ws_client

from .support import assert_no_traceback, http, launch, new_task, raw_request

FRAME_LIMIT = 16 * 1024
UNKNOWN = "00000000-0000-0000-0000-000000000000"


async def stored_conversation(ws: WsClient) -> tuple[str, str, list[dict[str, Any]]]:
    task_id = await new_task(ws)
    sid = await launch(ws, task_id)
    await ws.call("session.subscribe", {"session_id": sid})
    await ws.call("message.add", {"session_id": sid, "content": "keep these words"})
    await ws.wait_for(is_turn_completed(sid))
    messages = (await ws.call("message.list", {"session_id": sid}))["messages"]
    assert [m["role"] for m in messages] == ["user", "agent"]
    return task_id, sid, messages


async def still_works(ws: WsClient) -> None:
    assert isinstance((await ws.call("task.list"))["tasks"], list)


async def new_frame(ws: WsClient, send: str | bytes, pred: Any) -> dict[str, Any]:
    """Send ``send`` raw and return the first frame after it that matches ``pred``
    (error frames that match no pending request land in ``notifications``)."""
    old = {id(f) for f in ws.notifications}
    await ws.send_raw(send)
    return await ws.wait_for(lambda f: id(f) not in old and pred(f), timeout=5)


# (raw frame, expected code): frames whose error cannot echo a request id
UNMATCHED_FRAMES: list[tuple[str | bytes, str]] = [
    ("{not json", "BAD_REQUEST"),
    ("", "BAD_REQUEST"),
    ("[1, 2, 3]", "BAD_REQUEST"),
    ('"a string"', "BAD_REQUEST"),
    ("42", "BAD_REQUEST"),
    ("null", "BAD_REQUEST"),
    ("[" * 5000 + "]" * 5000, "BAD_REQUEST"),
    (b'{"id":"b1","type":"request","action":"task.list","payload":{}}', "BAD_REQUEST"),
    (b"\x00\xff\xfe binary", "BAD_REQUEST"),
    (b"", "BAD_REQUEST"),
]


async def test_malformed_frames_get_errors_and_the_connection_survives(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path / "data",
                                  limits=Limits(max_ws_frame_bytes=FRAME_LIMIT)) as srv, \
                ws_client(srv) as ws:
            _, sid, before = await stored_conversation(ws)
            for data, code in UNMATCHED_FRAMES:
                err = await new_frame(ws, data, lambda f: f["type"] == "error")
                assert err["payload"]["code"] == code, (data[:40], err)
                assert err["payload"]["message"]
                await still_works(ws)

            # Oversized text frame (a valid request, just too big), a bit and far above.
            for size in (FRAME_LIMIT + 1, 40 * FRAME_LIMIT):
                big = raw_request("task.create", {"title": "x" * size}, rid="big")
                reply = await _send_expecting(ws, big, "big")
                assert reply["type"] == "error"
                assert reply["payload"]["code"] == "BAD_REQUEST", reply
                assert str(FRAME_LIMIT) in reply["payload"]["message"]
                await still_works(ws)
            assert all(t["title"][:1] != "x" for t in (await ws.call("task.list"))["tasks"])

            for frame in ws.notifications:
                assert_no_traceback(json.dumps(frame))
            after = (await ws.call("message.list", {"session_id": sid}))["messages"]
            assert after == before


async def _send_expecting(ws: WsClient, raw: str, rid: str) -> dict[str, Any]:
    """Send a hand-made frame whose error echoes ``rid``; return that frame."""
    return await new_frame(ws, raw, lambda f: f["id"] == rid)


# (envelope as sent, expected code)
ENVELOPES: list[tuple[dict[str, Any], str]] = [
    ({"id": "e1", "action": "task.list", "payload": {}}, "BAD_REQUEST"),  # no type
    ({"id": "e2", "type": "response", "action": "task.list"}, "BAD_REQUEST"),
    ({"id": "e3", "type": "request", "payload": {}}, "BAD_REQUEST"),  # no action
    ({"id": "e4", "type": "request", "action": 7}, "BAD_REQUEST"),
    ({"id": "e5", "type": "request", "action": "task.destroy"}, "UNKNOWN_ACTION"),
    ({"id": "e6", "type": "request", "action": "__class__"}, "UNKNOWN_ACTION"),
    ({"id": "e7", "type": "request", "action": "task.create", "payload": []},
     "VALIDATION_ERROR"),
    ({"id": "e8", "type": "request", "action": "task.create", "payload": "t"},
     "VALIDATION_ERROR"),
]


@pytest.mark.parametrize(("envelope", "code"), ENVELOPES,
                         ids=[e["id"] for e, _ in ENVELOPES])
async def test_bad_envelopes(server: Server, envelope: dict[str, Any], code: str) -> None:
    with trio.fail_after(20):
        async with ws_client(server) as ws:
            reply = await _send_expecting(ws, json.dumps(envelope), envelope["id"])
            assert reply["type"] == "error"
            assert reply["payload"]["code"] == code, reply
            if isinstance(envelope.get("action"), str):
                assert reply["action"] == envelope["action"]
            assert_no_traceback(json.dumps(reply))
            await still_works(ws)


async def test_missing_mistyped_fields_and_unknown_ids(server: Server) -> None:
    with trio.fail_after(30):
        async with ws_client(server) as ws:
            task_id, sid, before = await stored_conversation(ws)
            cases: list[tuple[str, dict[str, Any], str]] = [
                ("task.create", {}, "VALIDATION_ERROR"),
                ("task.create", {"title": 5}, "VALIDATION_ERROR"),
                ("task.create", {"title": None}, "VALIDATION_ERROR"),
                ("task.create", {"title": "   "}, "VALIDATION_ERROR"),
                ("task.create", {"title": "t" * 501}, "VALIDATION_ERROR"),
                ("session.launch", {}, "VALIDATION_ERROR"),
                ("session.launch", {"task_id": ["x"]}, "VALIDATION_ERROR"),
                ("session.launch", {"task_id": task_id, "agent": "no-such-agent"},
                 "VALIDATION_ERROR"),
                ("session.launch", {"task_id": UNKNOWN}, "NOT_FOUND"),
                ("session.list", {"task_id": 1}, "VALIDATION_ERROR"),
                ("session.list", {"task_id": UNKNOWN}, "NOT_FOUND"),
                ("session.subscribe", {}, "VALIDATION_ERROR"),
                ("session.subscribe", {"session_id": {"id": sid}}, "VALIDATION_ERROR"),
                ("session.subscribe", {"session_id": UNKNOWN}, "NOT_FOUND"),
                ("session.unsubscribe", {"session_id": 3}, "VALIDATION_ERROR"),
                ("message.add", {"session_id": sid}, "VALIDATION_ERROR"),
                ("message.add", {"session_id": sid, "content": 12}, "VALIDATION_ERROR"),
                ("message.add", {"session_id": sid, "content": "  "}, "VALIDATION_ERROR"),
                ("message.add", {"session_id": UNKNOWN, "content": "hi"}, "NOT_FOUND"),
                ("message.list", {"session_id": sid, "limit": "10"}, "VALIDATION_ERROR"),
                ("message.list", {"session_id": sid, "limit": 0}, "VALIDATION_ERROR"),
                ("message.list", {"session_id": sid, "limit": True}, "VALIDATION_ERROR"),
                ("message.list", {"session_id": UNKNOWN}, "NOT_FOUND"),
                ("agent.cancel", {}, "VALIDATION_ERROR"),
                ("agent.cancel", {"session_id": 1.5}, "VALIDATION_ERROR"),
                ("agent.cancel", {"session_id": sid, "task_id": 9}, "VALIDATION_ERROR"),
                ("agent.cancel", {"session_id": UNKNOWN}, "NOT_FOUND"),
                ("agent.cancel", {"session_id": sid, "task_id": UNKNOWN}, "NOT_FOUND"),
                ("permission.respond", {"session_id": sid}, "VALIDATION_ERROR"),
                ("permission.respond", {"session_id": sid, "request_id": "r",
                                        "cancelled": "yes"}, "VALIDATION_ERROR"),
                ("permission.respond", {"session_id": UNKNOWN, "request_id": "r",
                                        "option_id": "o"}, "NOT_FOUND"),
            ]
            for action, payload, code in cases:
                reply = await ws.request(action, payload)
                assert reply["type"] == "error", (action, payload, reply)
                assert reply["payload"]["code"] == code, (action, payload, reply)
                assert reply["action"] == action
                assert_no_traceback(json.dumps(reply))
                await still_works(ws)
            # Nothing was created or lost along the way.
            assert [t["id"] for t in (await ws.call("task.list"))["tasks"]] == [task_id]
            after = (await ws.call("message.list", {"session_id": sid}))["messages"]
            assert after == before
            # No cancel operation was started by any of the refused cancels.
            assert server.sup.orchestrator.operations_started == 0


async def test_rest_bad_input(server: Server) -> None:
    with trio.fail_after(30):
        async with ws_client(server) as ws:
            task_id, sid, before = await stored_conversation(ws)
        async with http(server) as h:
            json_headers = {"Content-Type": "application/json"}
            cases: list[tuple[str, str, Any, int, str]] = [
                ("POST", "/api/v1/tasks", "{bad json", 400, "BAD_REQUEST"),
                ("POST", "/api/v1/tasks", "[1, 2]", 400, "BAD_REQUEST"),
                ("POST", "/api/v1/tasks", '"title"', 400, "BAD_REQUEST"),
                ("POST", "/api/v1/tasks", "{}", 422, "VALIDATION_ERROR"),
                ("POST", "/api/v1/tasks", '{"title": 5}', 422, "VALIDATION_ERROR"),
                ("POST", "/api/v1/tasks", '{"title": ["a"]}', 422, "VALIDATION_ERROR"),
                ("POST", "/api/v1/tasks", '{"title": "  "}', 422, "VALIDATION_ERROR"),
                ("POST", "/api/v1/tasks", json.dumps({"title": "x" * 300_000}), 413,
                 "BAD_REQUEST"),
                ("POST", f"/api/v1/task-sessions/{sid}/cancel", "{nope", 400, "BAD_REQUEST"),
                ("POST", f"/api/v1/task-sessions/{sid}/cancel", "[]", 400, "BAD_REQUEST"),
                ("POST", f"/api/v1/task-sessions/{sid}/cancel", '{"task_id": 3}', 422,
                 "VALIDATION_ERROR"),
                ("POST", f"/api/v1/task-sessions/{sid}/cancel",
                 json.dumps({"task_id": UNKNOWN}), 404, "NOT_FOUND"),
                ("POST", f"/api/v1/task-sessions/{UNKNOWN}/cancel", "", 404, "NOT_FOUND"),
                ("GET", f"/api/v1/task-sessions/{UNKNOWN}", None, 404, "NOT_FOUND"),
                ("GET", f"/api/v1/task-sessions/{UNKNOWN}/messages", None, 404, "NOT_FOUND"),
                ("GET", f"/api/v1/tasks/{UNKNOWN}/sessions", None, 404, "NOT_FOUND"),
                ("GET", f"/api/v1/tasks/{UNKNOWN}/boot", None, 404, "NOT_FOUND"),
                ("GET", f"/api/v1/task-sessions/{sid}/messages?limit=abc", None, 422,
                 "VALIDATION_ERROR"),
                ("GET", f"/api/v1/task-sessions/{sid}/messages?limit=0", None, 422,
                 "VALIDATION_ERROR"),
                ("GET", f"/api/v1/task-sessions/{sid}/messages?limit=99999", None, 422,
                 "VALIDATION_ERROR"),
                ("GET", "/api/v1/no-such-route", None, 404, "NOT_FOUND"),
                ("DELETE", "/api/v1/tasks", None, 405, "BAD_REQUEST"),
            ]
            for method, path, body, status, code in cases:
                r = await h.request(method, path, content=body, headers=json_headers)
                assert r.status_code == status, (method, path, body and body[:40], r.text)
                assert r.headers["content-type"].startswith("application/json"), r.headers
                err = r.json()["error"]
                assert err["code"] == code, (method, path, r.text)
                assert err["message"]
                assert_no_traceback(r.text)
                if status == 413:
                    # Refused unread: the client must not reuse the connection.
                    assert r.headers["connection"] == "close"
                assert (await h.get("/api/v1/health")).status_code == 200, (method, path)
            # Boot of an unknown task (what its page's script asks): not found, no traceback.
            r = await h.get("/api/v1/boot", params={"task": UNKNOWN})
            assert r.status_code == 404
            assert_no_traceback(r.text)
            # Static files cannot leave their folder.
            r = await h.get("/static/../app.py")
            assert r.status_code == 404
            assert "create_app" not in r.text

            tasks = (await h.get("/api/v1/tasks")).json()["tasks"]
            assert [t["id"] for t in tasks] == [task_id]
            r = await h.get(f"/api/v1/task-sessions/{sid}/messages")
            assert r.json()["messages"] == before
            assert server.sup.orchestrator.operations_started == 0
