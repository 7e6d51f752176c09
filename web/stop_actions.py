"""DESIGN.md §18 over the wire: a stopped turn's receipt, the strays a stop left,
stop everything, and the routes that serve them over REST (the same answers
as the WebSocket actions)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from quart import Response
from quart_trio import QuartTrio

from supervisor.orchestrator import Caller
from supervisor.root import Supervisor

from .contract import requests as rq
from .contract.requests import parse

__all__ = ["STOP_ACTIONS", "add_stop_routes", "agent_profiles"]


async def turn_receipt(sup: Supervisor, caller: Caller, p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.TurnRef, p, sup.config.limits)
    return {"receipt": await sup.stops.receipt(caller, req.session_id, req.turn_id)}


async def session_kill_strays(sup: Supervisor, caller: Caller,
                              p: dict[str, Any]) -> dict[str, Any]:
    req = parse(rq.SessionRef, p, sup.config.limits)
    return await sup.stops.kill_strays(caller, req.session_id)


async def workspace_stop_all(sup: Supervisor, caller: Caller,
                             p: dict[str, Any]) -> dict[str, Any]:
    parse(rq.NoPayload, p, sup.config.limits)
    return {"sessions": await sup.stops.stop_all(caller)}


async def agent_profiles(sup: Supervisor) -> list[dict[str, Any]]:
    """``server.info``'s ``agent_profiles``: each profile's measured cancel figures."""
    return await sup.stops.figures(sorted(sup.config.profiles))


STOP_ACTIONS: dict[str, Callable[[Supervisor, Caller, dict[str, Any]],
                                 Awaitable[dict[str, Any]]]] = {
    "turn.receipt": turn_receipt,
    "session.kill_strays": session_kill_strays,
    "workspace.stop_all": workspace_stop_all,
}


def add_stop_routes(app: QuartTrio, sup: Supervisor,
                    me: Callable[[], Awaitable[Caller]]) -> None:
    def _json(data: dict[str, Any]) -> Response:
        return Response(json.dumps(data), content_type="application/json")

    @app.post("/api/v1/stop-all")
    async def stop_all() -> Response:
        return _json(await workspace_stop_all(sup, await me(), {}))

    @app.get("/api/v1/task-sessions/<session_id>/turns/<turn_id>/receipt")
    async def receipt(session_id: str, turn_id: str) -> Response:
        return _json(await turn_receipt(sup, await me(), {"session_id": session_id,
                                                          "turn_id": turn_id}))

    @app.post("/api/v1/task-sessions/<session_id>/kill-strays")
    async def kill_strays(session_id: str) -> Response:
        return _json(await session_kill_strays(sup, await me(), {"session_id": session_id}))
