"""REST equivalents of the queue actions (DESIGN.md §9), for non-WebSocket clients.

Under ``/api/v1/task-sessions/{session_id}/queue``; the app's ``before_request``
applies the same token and cross-site checks as to every API path.  Each route
builds the action's payload from the path and the JSON body and runs the very
handler the WebSocket gateway runs, so both answer alike.

| method and path                      | action             | body                  |
|--------------------------------------|--------------------|-----------------------|
| GET    .../queue                     | queue.list         |                       |
| POST   .../queue                     | message.add        | {content, delivery?}  |
| PATCH  .../queue/{entry_id}          | queue.update       | {content}             |
| DELETE .../queue/{entry_id}          | queue.remove       |                       |
| POST   .../queue/{entry_id}/move     | queue.move         | {position}            |
| POST   .../queue/{entry_id}/send_now | queue.send_now     |                       |
| POST   .../queue/auto_run            | queue.set_auto_run | {auto_run}            |

``POST .../queue`` defaults ``delivery`` to ``"queue"`` (the same as ``auto``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from quart import Response
from quart_trio import QuartTrio

from supervisor.orchestrator import Caller
from supervisor.root import Supervisor

from .actions import ACTIONS

__all__ = ["add_queue_routes"]

_BASE = "/api/v1/task-sessions/<session_id>/queue"


def add_queue_routes(app: QuartTrio, sup: Supervisor, me: Callable[[], Awaitable[Caller]],
                     body: Callable[[], Awaitable[dict[str, Any]]]) -> None:
    async def run(action: str, payload: dict[str, Any], status: int = 200) -> Response:
        caller = await me()
        # The session first: another workspace's (or no) session is not found
        # whatever the body says, so the answer tells nothing about its ids.
        await sup.orchestrator.session(caller, str(payload["session_id"]))
        result = await ACTIONS[action](sup, caller, payload)
        return Response(json.dumps(result), status=status, content_type="application/json")

    @app.get(_BASE)
    async def queue_list(session_id: str) -> Response:
        return await run("queue.list", {"session_id": session_id})

    @app.post(_BASE)
    async def queue_add(session_id: str) -> Response:
        data = await body()
        return await run("message.add", {"delivery": "queue", **data,
                                         "session_id": session_id})

    @app.post(_BASE + "/auto_run")
    async def queue_auto_run(session_id: str) -> Response:
        data = await body()
        return await run("queue.set_auto_run", {**data, "session_id": session_id})

    @app.patch(_BASE + "/<entry_id>")
    async def queue_update(session_id: str, entry_id: str) -> Response:
        data = await body()
        return await run("queue.update", {**data, "session_id": session_id,
                                          "entry_id": entry_id})

    @app.delete(_BASE + "/<entry_id>")
    async def queue_remove(session_id: str, entry_id: str) -> Response:
        return await run("queue.remove", {"session_id": session_id, "entry_id": entry_id})

    @app.post(_BASE + "/<entry_id>/move")
    async def queue_move(session_id: str, entry_id: str) -> Response:
        data = await body()
        return await run("queue.move", {**data, "session_id": session_id,
                                        "entry_id": entry_id})

    @app.post(_BASE + "/<entry_id>/send_now")
    async def queue_send_now(session_id: str, entry_id: str) -> Response:
        return await run("queue.send_now", {"session_id": session_id, "entry_id": entry_id})
