"""Driving the hostile agent (tests/security/hostile_agent.py) over the WebSocket API:
launch a session of it, and run a shell command inside its sandbox."""

from __future__ import annotations

import json
from typing import Any

from tests.faults.support import wait_turn_end
from tests.support.ws import WsClient

__all__ = ["launch", "shell"]


async def launch(ws: WsClient, agent: str = "hostile", title: str = "hostile") -> str:
    """A new task's session of ``agent``, subscribed; its id."""
    task = await ws.call("task.create", {"title": title})
    session = await ws.call("session.launch", {"task_id": task["id"], "agent": agent})
    sid = str(session["id"])
    await ws.call("session.subscribe", {"session_id": sid})
    return sid


async def shell(ws: WsClient, sid: str, command: str) -> dict[str, Any]:
    """What the agent's shell answers to ``command`` (``rc``, ``out``), with the
    turn's id under ``turn_id``."""
    mark = len(ws.notifications)
    await ws.call("message.add", {"session_id": sid, "content": f"/sh {command}"})
    end = await wait_turn_end(ws, sid, after=mark, timeout=60)
    assert end["stop_reason"] == "end_turn", end
    messages = (await ws.call("message.list", {"session_id": sid}))["messages"]
    text = "".join(m["content"] for m in messages
                   if m["role"] == "agent" and m["turn_id"] == end["turn_id"])
    answer: dict[str, Any] = json.loads(text)
    answer["turn_id"] = end["turn_id"]
    return answer
