"""Auth and workspace scoping (DESIGN.md §7) against a real server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import open_websocket_url

from tests.support.server import OTHER_TOKEN, Server, running_server
from tests.support.ws import is_cancellation, is_state, ws_client
from web.auth import bearer_subprotocol

from .support import assert_no_traceback, http, new_task, running_session

BAD_TOKEN = "not-the-token-0123456789abcdef-0123456789"


def api_routes(task_id: str, sid: str) -> list[tuple[str, str]]:
    return [
        ("GET", "/api/v1/tasks"),
        ("POST", "/api/v1/tasks"),
        ("GET", f"/api/v1/tasks/{task_id}/sessions"),
        ("GET", f"/api/v1/tasks/{task_id}/boot"),
        ("GET", "/api/v1/boot"),
        ("GET", f"/api/v1/boot?task={task_id}"),
        ("GET", f"/api/v1/task-sessions/{sid}"),
        ("GET", f"/api/v1/task-sessions/{sid}/messages"),
        ("POST", f"/api/v1/task-sessions/{sid}/cancel"),
        ("GET", f"/api/v1/debug/cancel-stages?session_id={sid}"),
    ]


async def ws_rejected(server: Server, headers: list[tuple[str, str]],
                      url: str | None = None) -> int:
    """Status of a WebSocket upgrade the server refuses.

    A raw upgrade request over httpx: trio-websocket leaks its socket when a
    handshake is rejected (ResourceWarning), so it is used only for upgrades
    that succeed."""
    upgrade = [("Connection", "Upgrade"), ("Upgrade", "websocket"),
               ("Sec-WebSocket-Version", "13"),
               ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")]
    async with httpx.AsyncClient() as h:
        r = await h.get((url or server.ws_url).replace("ws://", "http://"),
                        headers=[*upgrade, *headers])
    assert r.status_code != 101, r
    assert_no_traceback(r.text)
    return r.status_code


@pytest.mark.parametrize("token", [None, BAD_TOKEN])
async def test_no_or_wrong_token_is_refused(server: Server, token: str | None) -> None:
    with trio.fail_after(20):
        async with ws_client(server) as ws:
            task_id = await new_task(ws)
            sid = (await ws.call("session.launch", {"task_id": task_id}))["id"]
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(base_url=server.url, headers=headers) as h:
            for method, path in api_routes(task_id, sid):
                r = await h.request(method, path, json={"title": "x"})
                assert r.status_code == 401, (method, path, r.text)
                assert r.json()["error"]["code"] == "UNAUTHORIZED"
                assert BAD_TOKEN not in r.text
            # Pages are the shell, with nothing of the workspace in it.
            for path in ("/", f"/tasks/{task_id}", f"/?token={BAD_TOKEN}"):
                r = await h.get(path)
                assert r.status_code == 200
                assert task_id not in r.text and "web test" not in r.text
                assert "set-cookie" not in r.headers
            # Health needs no token.
            r = await h.get("/api/v1/health")
            assert r.status_code == 200
            assert r.json() == {"status": "ok"}
        hdrs = [("Authorization", f"Bearer {token}")] if token else []
        assert await ws_rejected(server, hdrs) == 401
        assert await ws_rejected(server, [], server.ws_url + f"?token={BAD_TOKEN}") == 401
        assert await ws_rejected(server, [("Cookie", f"turnvisor_token={BAD_TOKEN}")]) == 401
        assert await ws_rejected(server, [(
            "Sec-WebSocket-Protocol", f"turnvisor, {bearer_subprotocol(BAD_TOKEN)}")]) == 401
        # Nothing was created by the refused requests.
        async with http(server) as h:
            titles = [t["title"] for t in (await h.get("/api/v1/tasks")).json()["tasks"]]
            assert titles == ["web test"]


async def test_origin_check_on_websocket_upgrade(server: Server) -> None:
    host = server.url.removeprefix("http://")
    auth = ("Authorization", f"Bearer {server.token}")
    with trio.fail_after(20):
        for origin in ("http://evil.example", f"http://{host}.evil.example", "null",
                       "http://localhost:1"):
            assert await ws_rejected(server, [auth, ("Origin", origin)]) == 403, origin
        # Same origin: accepted and usable.
        async with ws_client(server, headers=[("Origin", f"http://{host}")]) as ws:
            assert (await ws.call("task.list"))["tasks"] == []
        # No Origin at all (a non-browser client): accepted.
        async with ws_client(server) as ws:
            assert (await ws.call("task.list"))["tasks"] == []


async def test_only_headers_the_client_sets_carry_the_token(server: Server) -> None:
    """The right token as a cookie or a ``?token=`` opens nothing (a browser
    sends both for any page that points at us); ``Authorization: Bearer`` and
    the WebSocket's bearer subprotocol do, and no answer sets a cookie."""
    with trio.fail_after(20):
        async with httpx.AsyncClient(base_url=server.url) as h:
            r = await h.get("/", params={"token": server.token})
            assert r.status_code == 200 and "set-cookie" not in r.headers
            assert server.token not in r.text
            for headers, query in (({"Cookie": f"turnvisor_token={server.token}"}, ""),
                                   ({}, f"?token={server.token}")):
                r = await h.get("/api/v1/tasks" + query, headers=headers)
                assert r.status_code == 401, (headers, query)
            r = await h.get("/api/v1/tasks", headers={"Authorization": f"Bearer {server.token}"})
            assert r.status_code == 200 and "set-cookie" not in r.headers
        assert await ws_rejected(server, [], server.ws_url + f"?token={server.token}") == 401
        assert await ws_rejected(server, [("Cookie", f"turnvisor_token={server.token}")]) == 401
        # The browser's way: the token in a subprotocol; the plain one is selected.
        async with trio.open_nursery() as nursery, open_websocket_url(
            server.ws_url, subprotocols=["turnvisor", bearer_subprotocol(server.token)]
        ) as conn:
            assert conn.subprotocol == "turnvisor"
            await conn.send_message(json.dumps({"id": "1", "type": "request",
                                                "action": "task.list", "payload": {}}))
            reply = json.loads(await conn.get_message())
            assert reply["type"] == "response", reply
            nursery.cancel_scope.cancel()


async def test_workspaces_are_isolated(tmp_path: Path) -> None:
    """Workspace B cannot read, list, subscribe to, cancel, message or hear
    about workspace A's session: everything is NOT_FOUND, and no frame of A's
    session ever reaches B's connection."""
    with trio.fail_after(30):
        async with running_server(tmp_path / "data", workspaces={"b": OTHER_TOKEN}) as srv, \
                ws_client(srv) as a, ws_client(srv, token=OTHER_TOKEN) as b, \
                http(srv, token=OTHER_TOKEN) as hb, http(srv) as ha:
            task_id = await new_task(a, "secret of A")
            sid = await running_session(a, task_id, "/delay 10000")
            own_task = await new_task(b, "B's own")

            # REST: not found everywhere (and no data of A in any answer).
            for method, path in api_routes(task_id, sid):
                if path in ("/api/v1/tasks", "/api/v1/boot"):
                    continue
                r = await hb.request(method, path)
                assert r.status_code == 404, (method, path, r.text)
                assert r.json()["error"]["code"] == "NOT_FOUND"
                assert "secret of A" not in r.text
            r = await hb.get("/api/v1/boot", params={"task": task_id})
            assert r.status_code == 404
            assert "secret of A" not in r.text
            r = await hb.get(f"/api/v1/tasks/{own_task}/boot", params={"session": sid})
            assert r.status_code == 200
            assert r.json()["selected_session_id"] is None
            assert r.json()["messages"] == []
            listed = (await hb.get("/api/v1/tasks")).json()["tasks"]
            assert [t["title"] for t in listed] == ["B's own"]

            # WebSocket: not found everywhere.
            attempts: list[tuple[str, dict[str, Any]]] = [
                ("session.subscribe", {"session_id": sid}),
                ("agent.cancel", {"session_id": sid}),
                ("agent.cancel", {"session_id": sid, "task_id": task_id}),
                ("message.add", {"session_id": sid, "content": "hi from B"}),
                ("message.list", {"session_id": sid}),
                ("session.list", {"task_id": task_id}),
                ("session.launch", {"task_id": task_id}),
                ("permission.respond", {"session_id": sid, "request_id": "r",
                                        "option_id": "allow"}),
            ]
            for action, payload in attempts:
                reply = await b.request(action, payload)
                assert reply["type"] == "error", (action, reply)
                assert reply["payload"]["code"] == "NOT_FOUND", (action, reply)
                assert "secret of A" not in json.dumps(reply)
            assert [t["title"] for t in (await b.call("task.list"))["tasks"]] == ["B's own"]
            # B's cancels never started an operation on A's session.
            assert srv.sup.orchestrator.operations_started == 0
            # ... and B's message never reached A's session.
            a_msgs = (await ha.get(f"/api/v1/task-sessions/{sid}/messages")).json()["messages"]
            assert all("hi from B" not in m["content"] for m in a_msgs)

            # A cancels; A hears it, B hears nothing of A's session.
            assert (await a.call("agent.cancel", {"session_id": sid}))["success"] is True
            await a.wait_for(is_cancellation(sid, False))
            await a.wait_for(is_state(sid, "WAITING_FOR_INPUT"))
            await b.call("task.list")  # a round trip: anything queued for B is here now
            for frame in b.notifications:
                text = json.dumps(frame)
                assert sid not in text and task_id not in text, frame
                assert_no_traceback(text)
            assert srv.sup.bus.subscriber_count(sid) == 1
