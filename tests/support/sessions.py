"""A session for a test, made the one way: a task, then the session launched in it.

Two levels, each its own function (they prove different things, so neither
stands in for the other):

- through the supervisor (``Supervisor``, as ``open_supervisor`` yields it):
  ``new_session``, ``new_sessions`` (several in one task), and
  ``new_agentctl_session`` (the same, checked to run on the agentctl executor);
- through the WebSocket API (``WsClient``): ``launch_subscribed`` launches a
  session in a task and subscribes to it, ``subscribe_snapshot`` subscribes to
  an existing one and returns the state snapshot the subscribe sends.
"""

from __future__ import annotations

from typing import Any

from supervisor.executors.agentctl_adapter import AgentctlAdapter
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor

from .ws import WsClient

__all__ = [
    "launch_subscribed",
    "new_agentctl_session",
    "new_session",
    "new_sessions",
    "subscribe_snapshot",
]


async def new_sessions(sup: Supervisor, agent: str = "mock", n: int = 1, *,
                       title: str = "t") -> tuple[Caller, list[str]]:
    """``n`` sessions of ``agent`` in one new task titled ``title``, for the
    default workspace's caller; that caller and the session ids, in launch order."""
    caller = await sup.caller()
    task = await sup.orchestrator.create_task(caller, title)
    sids = [str((await sup.orchestrator.launch_session(caller, task.id, agent))["id"])
            for _ in range(n)]
    return caller, sids


async def new_session(sup: Supervisor, agent: str = "mock", *,
                      title: str = "t") -> tuple[Caller, str]:
    """One session of ``agent`` in a new task (``new_sessions`` with ``n=1``)."""
    caller, [sid] = await new_sessions(sup, agent, title=title)
    return caller, sid


async def new_agentctl_session(sup: Supervisor, agent: str) -> tuple[Caller, str]:
    """``new_session``, for a profile on an agentctl executor (spawned, remote or
    container): asserts the session's execution really drives an agentctl."""
    caller, sid = await new_session(sup, agent)
    assert isinstance(sup.lifecycle.executions[sid].adapter, AgentctlAdapter)
    return caller, sid


async def launch_subscribed(ws: WsClient, task_id: str, agent: str = "mock",
                            **extra: Any) -> dict[str, Any]:
    """``session.launch`` of ``agent`` in ``task_id`` (``extra``: more launch
    fields, e.g. ``worktree=True``), then ``session.subscribe``; the launch's DTO."""
    session: dict[str, Any] = await ws.call("session.launch",
                                            {"task_id": task_id, "agent": agent, **extra})
    await ws.call("session.subscribe", {"session_id": session["id"]})
    return session


async def subscribe_snapshot(ws: WsClient, sid: str) -> dict[str, Any]:
    """Subscribe to the existing session ``sid`` (the subscribe must succeed);
    the payload of the ``session.state_changed`` snapshot it sends."""
    assert await ws.call("session.subscribe", {"session_id": sid}) == {"success": True}
    snap = await ws.wait_for(lambda f: f["action"] == "session.state_changed"
                             and f["payload"]["session_id"] == sid)
    return dict(snap["payload"])
