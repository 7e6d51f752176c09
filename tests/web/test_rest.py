"""REST under /api/v1 and the pages' boot state (DESIGN.md §5, §8)."""

from __future__ import annotations

from typing import Any

import trio

from tests.support.server import Server
from tests.support.ws import is_turn_completed, ws_client

from .support import http, launch, new_task

BOOT_KEYS = {"page", "task", "sessions", "selected_session_id", "messages", "agents",
             "default_agent", "agent_sandbox", "sandbox_warning", "queue", "queue_revision",
             "cancel_timeouts", "project_is_git"}


async def test_rest_boot_and_page_agree(server: Server) -> None:
    title = "</script><script>alert(1)</script> & <b>"
    with trio.fail_after(30):
        async with ws_client(server) as ws, http(server) as h:
            r = await h.post("/api/v1/tasks", json={"title": title})
            assert r.status_code == 201
            task = r.json()
            assert set(task) == {"id", "workspace_id", "title", "created_at", "updated_at",
                                 "archived", "session_count", "running_count",
                                 "project_dir", "approval_count", "cancelling_count", "active_at",
                                 "failed_count", "attention_sessions"}
            assert task["project_dir"] is None
            task_id = task["id"]
            first = await launch(ws, task_id)
            second = await launch(ws, task_id, "mock-codex")
            for sid, text in ((first, "one two"), (second, "three four")):
                await ws.call("session.subscribe", {"session_id": sid})
                await ws.call("message.add", {"session_id": sid, "content": text})
                await ws.wait_for(is_turn_completed(sid))

            listed = (await h.get("/api/v1/tasks")).json()["tasks"]
            assert [t["id"] for t in listed] == [task_id]
            sessions = (await h.get(f"/api/v1/tasks/{task_id}/sessions")).json()["sessions"]
            assert [s["id"] for s in sessions] == [first, second]
            assert [s["agent"] for s in sessions] == ["mock", "mock-codex"]
            ws_sessions = (await ws.call("session.list", {"task_id": task_id}))["sessions"]
            assert ws_sessions == sessions
            for s in sessions:
                assert (await h.get(f"/api/v1/task-sessions/{s['id']}")).json() == s
                assert s["state"] == "WAITING_FOR_INPUT"

            # Boot: the most recently updated session is selected by default.
            boot = (await h.get(f"/api/v1/tasks/{task_id}/boot")).json()
            assert set(boot) == BOOT_KEYS
            assert boot["page"] == "task"
            assert boot["task"] == listed[0]
            assert boot["sessions"] == sessions
            assert boot["selected_session_id"] == second
            assert boot["default_agent"] == "mock"
            assert {"mock", "mock-codex"} <= set(boot["agents"])
            # The agent picker's sandbox information (bwrap runs here: no warning).
            assert boot["agent_sandbox"] == {a: "bwrap" for a in boot["agents"]}
            assert boot["sandbox_warning"] is None
            msgs = (await h.get(f"/api/v1/task-sessions/{second}/messages")).json()["messages"]
            assert boot["messages"] == msgs
            assert [m["role"] for m in msgs] == ["user", "agent"]
            assert msgs[0]["content"] == "three four"

            chosen = (await h.get(f"/api/v1/tasks/{task_id}/boot",
                                  params={"session": first})).json()
            assert chosen["selected_session_id"] == first
            assert chosen["messages"][0]["content"] == "one two"

            # The page is a shell; its script fetches the same boot state from /api/v1/boot.
            page = await h.get(f"/tasks/{task_id}", params={"session": first})
            assert page.status_code == 200
            assert page.headers["content-type"].startswith("text/html")
            assert "<script>alert(1)" not in page.text and title not in page.text
            embedded = (await h.get("/api/v1/boot",
                                    params={"task": task_id, "session": first})).json()
            # The page adds which agent profiles can start here (the picker's; web/pages.py).
            availability = embedded.pop("agent_availability")
            assert availability["mock"] == {"available": True, "reason": None}
            assert embedded == chosen
            tasks_boot = (await h.get("/api/v1/boot")).json()
            assert tasks_boot["page"] == "tasks"
            assert [t["title"] for t in tasks_boot["tasks"]] == [title]
            assert tasks_boot["agent_sandbox"] == boot["agent_sandbox"]
            assert tasks_boot["sandbox_warning"] is None


async def test_message_paging(server: Server) -> None:
    with trio.fail_after(30):
        async with ws_client(server) as ws, http(server) as h:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id)
            await ws.call("session.subscribe", {"session_id": sid})
            for n in range(3):
                await ws.call("message.add", {"session_id": sid, "content": f"m{n}"})
                def completed(f: dict[str, Any], n: int = n) -> bool:
                    return is_turn_completed(sid)(f) and len(
                        ws.of("session.turn.completed", sid)) == n + 1

                await ws.wait_for(completed)
            url = f"/api/v1/task-sessions/{sid}/messages"
            everything = (await h.get(url)).json()["messages"]
            assert [m["content"] for m in everything if m["role"] == "user"] == ["m0", "m1", "m2"]
            last_two = (await h.get(url, params={"limit": 2})).json()["messages"]
            assert last_two == everything[-2:]
            older = (await h.get(url, params={"limit": 2, "before": last_two[0]["id"]})).json()
            assert older["messages"] == everything[-4:-2]
            via_ws = await ws.call("message.list", {"session_id": sid, "limit": 2,
                                                    "before": last_two[0]["id"]})
            assert via_ws == older
