"""The queue over the WebSocket gateway and REST (DESIGN.md §9): every action,
its notifications and DTO fields, bad input, another workspace's queue, a
burst of 100 messages to one busy session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import trio

from tests.support.server import Server, running_server
from tests.support.ws import WsClient, is_turn_completed, ws_client

from .support import http, launch, new_task, running_session

OTHER_TOKEN = "workspace-b-token-0123456789-0123456789"


def is_queue(session_id: str, revision: int | None = None) -> Any:
    return lambda f: (f["action"] == "session.queue.changed"
                      and f["payload"]["session_id"] == session_id
                      and (revision is None or f["payload"]["queue_revision"] == revision))


async def _queue(ws: WsClient, sid: str, *texts: str) -> list[dict[str, Any]]:
    entries = []
    for text in texts:
        reply = await ws.call("message.add", {"session_id": sid, "content": text})
        assert reply["delivery"] == "queued", reply
        entries.append(reply["entry"])
    return entries


async def test_every_queue_action_and_its_notifications(server: Server) -> None:
    with trio.fail_after(40):
        async with ws_client(server) as ws:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id)
            await ws.call("session.subscribe", {"session_id": sid})
            # Once right after the subscribe snapshot.
            first = await ws.wait_for(is_queue(sid))
            assert first["payload"] == {"session_id": sid, "entries": [], "auto_run": True,
                                        "queue_revision": 0}
            started = await ws.call("message.add", {"session_id": sid,
                                                    "content": "/delay 20000"})
            assert started["delivery"] == "started" and started["content"] == "/delay 20000"
            a, b, c = await _queue(ws, sid, "a", "b", "c")
            assert [e["position"] for e in (a, b, c)] == [0, 1, 2]
            assert set(a) == {"id", "session_id", "content", "created_at", "position",
                              "client_message_id", "attachments", "mentions"}
            assert (a["attachments"], a["mentions"]) == ([], [])

            listed = await ws.call("queue.list", {"session_id": sid})
            assert [e["content"] for e in listed["entries"]] == ["a", "b", "c"]
            assert listed["auto_run"] is True and listed["queue_revision"] == 3

            moved = await ws.call("queue.move", {"session_id": sid, "entry_id": c["id"],
                                                 "position": 0})
            assert [e["content"] for e in moved["entries"]] == ["c", "a", "b"]
            assert [e["position"] for e in moved["entries"]] == [0, 1, 2]
            edited = await ws.call("queue.update", {"session_id": sid, "entry_id": a["id"],
                                                    "content": "a, edited"})
            assert [e["content"] for e in edited["entries"]] == ["c", "a, edited", "b"]
            removed = await ws.call("queue.remove", {"session_id": sid, "entry_id": b["id"]})
            assert [e["content"] for e in removed["entries"]] == ["c", "a, edited"]
            parked = await ws.call("queue.set_auto_run", {"session_id": sid, "auto_run": False})
            assert parked["auto_run"] is False
            # Every change was announced, revisions in order.
            await ws.wait_for(is_queue(sid, parked["queue_revision"]))
            revisions = [p["queue_revision"] for p in ws.of("session.queue.changed")]
            assert revisions == sorted(revisions) and revisions[-1] == 7

            # The DTOs carry the queue's count and flag.
            [dto] = (await ws.call("session.list", {"task_id": task_id}))["sessions"]
            assert (dto["queued_count"], dto["auto_run"]) == (2, False)
            async with http(server) as h:
                rest = (await h.get(f"/api/v1/task-sessions/{sid}")).json()
                assert (rest["queued_count"], rest["auto_run"]) == (2, False)
                boot = (await h.get(f"/api/v1/tasks/{task_id}/boot")).json()
                assert [e["content"] for e in boot["queue"]] == ["c", "a, edited"]
                assert boot["sessions"][0]["queued_count"] == 2

            # Send now with an entry: the running turn is interrupted, the entry
            # runs next; the queue stays parked (auto_run off), so "c" waits.
            mark = len(ws.notifications)
            now = await ws.call("queue.send_now", {"session_id": sid, "entry_id": a["id"]})
            assert now["delivery"] == "interrupting" and now["entry"]["id"] == a["id"]
            status = await ws.wait_for(
                lambda f: f["action"] == "session.message.added"
                and f["payload"]["message"]["kind"] == "status", after=mark)
            assert status["payload"]["message"]["content"] == "Turn interrupted by a new message"
            assert status["payload"]["message"]["metadata"] == {"interrupted": True,
                                                                "variant": "info"}
            await ws.wait_for(lambda f: is_turn_completed(sid)(f)
                              and len(ws.of("session.turn.completed", sid)) == 2)
            listed = await ws.call("queue.list", {"session_id": sid})
            assert [e["content"] for e in listed["entries"]] == ["c"]
            # Resumed while idle: "c" starts at once.
            await ws.call("queue.set_auto_run", {"session_id": sid, "auto_run": True})
            await ws.wait_for(lambda f: is_turn_completed(sid)(f)
                              and len(ws.of("session.turn.completed", sid)) == 3)
            msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
            assert [m["content"] for m in msgs if m["role"] == "user"] == [
                "/delay 20000", "a, edited", "c"]


async def test_send_now_while_idle_starts_the_entry(server: Server) -> None:
    with trio.fail_after(30):
        async with ws_client(server) as ws:
            sid = await running_session(ws, await new_task(ws), "/delay 20000")
            [entry] = await _queue(ws, sid, "idle later")
            assert (await ws.call("agent.cancel", {"session_id": sid}))["success"] is True
            await ws.wait_for(lambda f: is_queue(sid)(f) and f["payload"]["auto_run"] is False)
            started = await ws.call("queue.send_now", {"session_id": sid,
                                                       "entry_id": entry["id"]})
            assert started["delivery"] == "started" and started["content"] == "idle later"
            listed = await ws.call("queue.list", {"session_id": sid})
            assert listed["entries"] == [] and listed["auto_run"] is False


async def test_bad_input_and_unknown_entries(server: Server) -> None:
    with trio.fail_after(30):
        async with ws_client(server) as ws:
            sid = await running_session(ws, await new_task(ws), "/delay 20000")
            [entry] = await _queue(ws, sid, "x")
            eid = entry["id"]
            unknown = "00000000-0000-0000-0000-000000000000"
            cases: list[tuple[str, dict[str, Any], str]] = [
                ("message.add", {"session_id": sid, "content": "x", "delivery": "later"},
                 "VALIDATION_ERROR"),
                ("message.add", {"session_id": sid, "content": "x", "delivery": 3},
                 "VALIDATION_ERROR"),
                ("queue.list", {}, "VALIDATION_ERROR"),
                ("queue.list", {"session_id": unknown}, "NOT_FOUND"),
                ("queue.update", {"session_id": sid, "entry_id": unknown, "content": "y"},
                 "NOT_FOUND"),
                ("queue.update", {"session_id": sid, "entry_id": eid, "content": "  "},
                 "VALIDATION_ERROR"),
                ("queue.update", {"session_id": sid, "entry_id": eid}, "VALIDATION_ERROR"),
                ("queue.remove", {"session_id": sid, "entry_id": unknown}, "NOT_FOUND"),
                ("queue.remove", {"session_id": sid}, "VALIDATION_ERROR"),
                ("queue.move", {"session_id": sid, "entry_id": unknown, "position": 0},
                 "NOT_FOUND"),
                ("queue.move", {"session_id": sid, "entry_id": eid, "position": -1},
                 "VALIDATION_ERROR"),
                ("queue.move", {"session_id": sid, "entry_id": eid, "position": "0"},
                 "VALIDATION_ERROR"),
                ("queue.move", {"session_id": sid, "entry_id": eid}, "VALIDATION_ERROR"),
                ("queue.send_now", {"session_id": sid, "entry_id": unknown}, "NOT_FOUND"),
                ("queue.set_auto_run", {"session_id": sid, "auto_run": "yes"},
                 "VALIDATION_ERROR"),
                ("queue.set_auto_run", {"session_id": sid}, "VALIDATION_ERROR"),
            ]
            for action, payload, code in cases:
                reply = await ws.request(action, payload)
                assert reply["type"] == "error", (action, payload, reply)
                assert reply["payload"]["code"] == code, (action, payload, reply)
            # Nothing changed.
            listed = await ws.call("queue.list", {"session_id": sid})
            assert [e["content"] for e in listed["entries"]] == ["x"]
            assert listed["auto_run"] is True
            await ws.call("agent.cancel", {"session_id": sid})


async def test_a_burst_of_messages_to_a_busy_session_keeps_its_order(server: Server) -> None:
    """100 message.add frames sent back to back, none awaited: all queued, in
    the order sent, none lost; the 101st is refused."""
    with trio.fail_after(60):
        async with ws_client(server) as ws:
            sid = await running_session(ws, await new_task(ws), "/delay 30000")
            pending = [await ws.send("message.add", {"session_id": sid, "content": f"m{i:03}"})
                       for i in range(100)]
            replies = [await p.wait(30) for p in pending]
            assert all(r["type"] == "response" for r in replies), replies
            assert [r["payload"]["entry"]["position"] for r in replies] == list(range(100))
            listed = await ws.call("queue.list", {"session_id": sid})
            assert [e["content"] for e in listed["entries"]] == [f"m{i:03}" for i in range(100)]
            over = await ws.request("message.add", {"session_id": sid, "content": "m100"})
            assert over["type"] == "error" and over["payload"]["code"] == "VALIDATION_ERROR"
            await ws.call("agent.cancel", {"session_id": sid})


async def test_another_workspace_cannot_touch_the_queue(tmp_path: Path) -> None:
    with trio.fail_after(40):
        async with running_server(tmp_path / "data", workspaces={"b": OTHER_TOKEN}) as srv, \
                ws_client(srv) as a, ws_client(srv, token=OTHER_TOKEN) as b, \
                http(srv, token=OTHER_TOKEN) as hb:
            sid = await running_session(a, await new_task(a), "/delay 20000")
            [entry] = await _queue(a, sid, "A's secret")
            eid = entry["id"]
            for action, payload in [
                ("queue.list", {"session_id": sid}),
                ("queue.update", {"session_id": sid, "entry_id": eid, "content": "B"}),
                ("queue.remove", {"session_id": sid, "entry_id": eid}),
                ("queue.move", {"session_id": sid, "entry_id": eid, "position": 0}),
                ("queue.send_now", {"session_id": sid, "entry_id": eid}),
                ("queue.set_auto_run", {"session_id": sid, "auto_run": False}),
                ("message.add", {"session_id": sid, "content": "B", "delivery": "interrupt"}),
            ]:
                reply = await b.request(action, payload)
                assert reply["type"] == "error", (action, reply)
                assert reply["payload"]["code"] == "NOT_FOUND", (action, reply)
                assert "A's secret" not in str(reply)
            base = f"/api/v1/task-sessions/{sid}/queue"
            for method, path, body in [
                ("GET", base, None), ("POST", base, {"content": "B"}),
                ("PATCH", f"{base}/{eid}", {"content": "B"}), ("DELETE", f"{base}/{eid}", None),
                ("POST", f"{base}/{eid}/move", {"position": 0}),
                ("POST", f"{base}/{eid}/send_now", None),
                ("POST", f"{base}/auto_run", {"auto_run": False}),
            ]:
                r = await hb.request(method, path, json=body)
                assert r.status_code == 404, (method, path, r.text)
                assert r.json()["error"]["code"] == "NOT_FOUND"
            listed = await a.call("queue.list", {"session_id": sid})
            assert [e["content"] for e in listed["entries"]] == ["A's secret"]
            assert listed["auto_run"] is True
            assert srv.sup.orchestrator.operations_started == 0
            await a.call("agent.cancel", {"session_id": sid})


async def test_rest_queue_endpoints(server: Server) -> None:
    with trio.fail_after(40):
        async with ws_client(server) as ws, http(server) as h:
            sid = await running_session(ws, await new_task(ws), "/delay 20000")
            base = f"/api/v1/task-sessions/{sid}/queue"
            r = await h.post(base, json={"content": "one"})
            assert r.status_code == 200 and r.json()["delivery"] == "queued", r.text
            one = r.json()["entry"]["id"]
            two = (await h.post(base, json={"content": "two"})).json()["entry"]["id"]
            assert [e["content"] for e in (await h.get(base)).json()["entries"]] == ["one", "two"]
            r = await h.patch(f"{base}/{one}", json={"content": "one!"})
            assert r.status_code == 200 and r.json()["entries"][0]["content"] == "one!"
            r = await h.post(f"{base}/{two}/move", json={"position": 0})
            assert [e["content"] for e in r.json()["entries"]] == ["two", "one!"]
            r = await h.post(f"{base}/auto_run", json={"auto_run": False})
            assert r.json()["auto_run"] is False
            r = await h.delete(f"{base}/{two}")
            assert [e["content"] for e in r.json()["entries"]] == ["one!"]
            r = await h.delete(f"{base}/{two}")
            assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"
            r = await h.post(f"{base}/{one}/move", json={"position": "first"})
            assert r.status_code == 422
            r = await h.post(f"{base}/{one}/send_now")
            assert r.status_code == 200 and r.json()["delivery"] == "interrupting", r.text
            # A cross-site page holding a cookie with the token gets nothing done (no
            # cookie is a credential).
            async with httpx.AsyncClient(base_url=server.url, timeout=15,
                                         headers={"Origin": "https://evil.example"},
                                         cookies={"turnvisor_token": server.token}) as evil:
                r = await evil.post(f"{base}/auto_run", json={"auto_run": True})
                assert r.status_code == 401, r.text
                assert r.json()["error"]["code"] == "UNAUTHORIZED"
            assert (await h.get(base)).json()["auto_run"] is False
            await ws.wait_for(lambda f: is_turn_completed(sid)(f)
                              and len(ws.of("session.turn.completed", sid)) == 2, timeout=15)
