"""Renaming, archiving and deleting tasks and sessions, and the workspace-wide
list notifications that keep every tab's lists live (issue: web UI)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from supervisor.models import SessionState
from tests.support.server import Server, running_server
from tests.support.ws import Predicate, RequestFailed, is_turn_completed, ws_client

from .support import http, launch, new_task, running_session

OTHER_TOKEN = "other-token-0123456789abcdef0123"


def _removed(action: str, key: str, value: str) -> Predicate:
    return lambda f: f.get("action") == action and f["payload"].get(key) == value


async def test_rename_and_archive_reach_every_connection(server: Server) -> None:
    with trio.fail_after(30):
        async with ws_client(server) as ws, ws_client(server) as other, http(server) as h:
            task_id = await new_task(ws, "before")
            # The other tab subscribed to nothing, yet hears of the new task.
            created = await other.wait_for(
                lambda f: f.get("action") == "task.changed"
                and f["payload"]["task"]["id"] == task_id)
            assert created["payload"]["task"]["title"] == "before"

            renamed = await ws.call("task.update", {"task_id": task_id, "title": "  after "})
            assert renamed["title"] == "after" and renamed["archived"] is False
            await other.wait_for(lambda f: f.get("action") == "task.changed"
                                 and f["payload"]["task"]["title"] == "after")
            r = await h.patch(f"/api/v1/tasks/{task_id}", json={"archived": True})
            assert r.status_code == 200 and r.json()["archived"] is True
            assert r.json()["title"] == "after"

            sid = await launch(ws, task_id)
            seen = await other.wait_for(lambda f: f.get("action") == "session.changed"
                                        and f["payload"]["session"]["id"] == sid)
            assert seen["payload"]["session"]["task_id"] == task_id
            dto = await ws.call("session.update", {"session_id": sid, "title": "Refactor"})
            assert dto["title"] == "Refactor" and dto["archived"] is False
            r = await h.patch(f"/api/v1/task-sessions/{sid}", json={"title": ""})
            assert r.status_code == 200 and r.json()["title"] is None  # cleared

            # The task list's live status: a running turn counts, in every tab.
            await ws.call("session.subscribe", {"session_id": sid})
            await ws.call("message.add", {"session_id": sid, "content": "/delay 300"})
            await other.wait_for(lambda f: f.get("action") == "session.changed"
                                 and f["payload"]["session"]["state"] == "RUNNING")
            listed = (await h.get("/api/v1/tasks")).json()["tasks"]
            assert listed[0]["session_count"] == 1 and listed[0]["running_count"] in (0, 1)
            await ws.wait_for(is_turn_completed(sid))
            listed = (await h.get("/api/v1/tasks")).json()["tasks"]
            assert listed[0]["running_count"] == 0


async def test_bad_updates_are_refused(server: Server) -> None:
    with trio.fail_after(30):
        async with ws_client(server) as ws, http(server) as h:
            task_id = await new_task(ws)
            for payload, code in (({"task_id": task_id}, "VALIDATION_ERROR"),
                                  ({"task_id": task_id, "title": " "}, "VALIDATION_ERROR"),
                                  ({"task_id": task_id, "archived": "yes"}, "VALIDATION_ERROR"),
                                  ({"task_id": "nope", "title": "x"}, "NOT_FOUND")):
                with pytest.raises(RequestFailed) as refused:
                    await ws.call("task.update", payload)
                assert refused.value.frame["payload"]["code"] == code, payload
            r = await h.patch(f"/api/v1/task-sessions/{'x' * 10}", json={"title": "y"})
            assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"
            r = await h.delete("/api/v1/tasks/unknown")
            assert r.status_code == 404
            assert (await h.get("/api/v1/tasks")).json()["tasks"][0]["title"] == "web test"


async def test_deleting_a_running_session_cancels_it_then_stops_its_agent(
        server: Server) -> None:
    with trio.fail_after(40):
        async with ws_client(server) as ws, ws_client(server) as other, http(server) as h:
            task_id = await new_task(ws)
            keep = await launch(ws, task_id)
            sid = await running_session(ws, task_id, "/delay 60000")
            ex = server.sup.lifecycle.executions[sid]
            agent = ex.adapter
            r = await h.delete(f"/api/v1/task-sessions/{sid}")
            assert r.status_code == 200, r.text
            assert (r.json()["success"], r.json()["session_id"]) == (True, sid)
            # The turn was cancelled as a user cancel (one status message was
            # written before the rows went), the agent is gone, the rows too.
            assert sid not in server.sup.lifecycle.executions
            assert agent is not None
            await other.wait_for(_removed("session.removed", "session_id", sid))
            assert server.sup.notify.projection.get(sid).pending is False
            assert await server.sup.store.get_session(sid) is None
            assert await server.sup.store.list_messages(sid) == []
            r = await h.get(f"/api/v1/task-sessions/{sid}")
            assert r.status_code == 404
            sessions = (await h.get(f"/api/v1/tasks/{task_id}/sessions")).json()["sessions"]
            assert [s["id"] for s in sessions] == [keep]
            # The session left alone still works.
            await ws.call("session.subscribe", {"session_id": keep})
            await ws.call("message.add", {"session_id": keep, "content": "still here"})
            await ws.wait_for(is_turn_completed(keep))


async def test_deleting_a_task_takes_its_sessions(server: Server) -> None:
    with trio.fail_after(40):
        async with ws_client(server) as ws, ws_client(server) as other:
            task_id = await new_task(ws)
            idle = await launch(ws, task_id, "mock-codex")
            busy = await running_session(ws, task_id, "/delay 60000")
            done = await ws.call("task.delete", {"task_id": task_id})
            assert done == {"success": True, "task_id": task_id}
            await other.wait_for(_removed("task.removed", "task_id", task_id))
            for sid in (idle, busy):
                assert sid not in server.sup.lifecycle.executions
                assert await server.sup.store.get_session(sid) is None
            assert await server.sup.store.get_task(task_id) is None
            assert (await ws.call("task.list"))["tasks"] == []
            with pytest.raises(RequestFailed) as refused:
                await ws.call("session.list", {"task_id": task_id})
            assert refused.value.frame["payload"]["code"] == "NOT_FOUND"
            groups = await server.sup.store.call(server.sup.store.db.agent_groups)
            assert groups == []


async def test_another_workspace_sees_and_changes_nothing(tmp_path: Path) -> None:
    with trio.fail_after(40):
        async with running_server(tmp_path / "data", workspaces={"b": OTHER_TOKEN}) as srv, \
                ws_client(srv) as ws, ws_client(srv, token=OTHER_TOKEN) as spy, \
                http(srv, OTHER_TOKEN) as h:
            task_id = await new_task(ws, "mine")
            sid = await launch(ws, task_id)
            await ws.call("task.update", {"task_id": task_id, "title": "still mine"})
            for method, path in (("PATCH", f"/api/v1/tasks/{task_id}"),
                                 ("DELETE", f"/api/v1/tasks/{task_id}"),
                                 ("PATCH", f"/api/v1/task-sessions/{sid}"),
                                 ("DELETE", f"/api/v1/task-sessions/{sid}")):
                r = await h.request(method, path, json={"title": "theirs"})
                assert r.status_code == 404, (method, path, r.text)
            session = await srv.sup.store.get_session(sid)
            assert session is not None and session.state is SessionState.WAITING_FOR_INPUT
            task = await srv.sup.store.get_task(task_id)
            assert task is not None and task.title == "still mine"
            # Not one frame about workspace A reached B's connection.
            await spy.call("task.list")
            assert [n for n in spy.notifications
                    if n.get("action") in ("task.changed", "session.changed")] == []
