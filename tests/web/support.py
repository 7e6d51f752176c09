"""Shared pieces of the web tests: an httpx client on a running server, and
helpers that drive a session into a running turn and read its notifications."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from tests.support.server import Server
from tests.support.serverproc import ServerProcess
from tests.support.ws import WsClient, is_agent_output, is_state

#: Short cancel bounds: a `/slow` turn keeps its cancel operation pending for
#: about ``cancel_escalate_s`` (long enough to observe), then it is escalated.
SLOW_CANCEL = {"cancel_join_s": 0.3, "cancel_escalate_s": 1.5, "cancel_cleanup_s": 1.0}


@asynccontextmanager
async def http(server: Server | ServerProcess, token: str | None = None,
               **kwargs: Any) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {token or server.token}"}
    kwargs.setdefault("timeout", 15)
    async with httpx.AsyncClient(base_url=server.url, headers=headers, **kwargs) as client:
        yield client


def frame_ok(frame: dict[str, Any]) -> dict[str, Any]:
    assert frame["type"] == "response", frame
    return frame["payload"]


async def new_task(ws: WsClient, title: str = "web test") -> str:
    task = await ws.call("task.create", {"title": title})
    return str(task["id"])


async def launch(ws: WsClient, task_id: str, agent: str = "mock") -> str:
    session = await ws.call("session.launch", {"task_id": task_id, "agent": agent})
    assert session["state"] == "WAITING_FOR_INPUT", session
    return str(session["id"])


async def start_turn(ws: WsClient, session_id: str, prompt: str) -> None:
    """Send a prompt on a session ``ws`` is subscribed to and wait until the
    agent is streaming its answer (so the turn is really running).  Only frames
    after the prompt count: an earlier turn's, still kept, would match at once."""
    mark = len(ws.notifications)
    await ws.call("message.add", {"session_id": session_id, "content": prompt})
    await ws.wait_for(is_state(session_id, "RUNNING"), after=mark)
    await ws.wait_for(is_agent_output(session_id), after=mark)


async def running_session(ws: WsClient, task_id: str, prompt: str = "/delay 5000",
                          agent: str = "mock") -> str:
    sid = await launch(ws, task_id, agent)
    await ws.call("session.subscribe", {"session_id": sid})
    await start_turn(ws, sid, prompt)
    return sid


def cancellation_changes(ws: WsClient, session_id: str) -> list[tuple[bool, int]]:
    return [(p["cancellation_pending"], p["cancellation_revision"])
            for p in ws.of("session.cancellation_changed", session_id)]


def raw_request(action: str, payload: Any, rid: str = "raw-1") -> str:
    return json.dumps({"id": rid, "type": "request", "action": action, "payload": payload,
                       "timestamp": "2026-01-01T00:00:00Z"})


def assert_no_traceback(text: str) -> None:
    assert "Traceback" not in text, text[:2000]
    assert 'File "' not in text, text[:2000]


def is_revision(session_id: str, revision: int) -> Any:
    return lambda f: (f["action"] == "session.cancellation_changed"
                      and f["payload"]["session_id"] == session_id
                      and f["payload"]["cancellation_revision"] == revision)
