"""``GET /api/v1/schema`` and ``GET /api/v1/info`` (DESIGN.md §14), behind the
same token as every API path (the app's ``before_request``)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from quart import Response
from quart_trio import QuartTrio

from supervisor.orchestrator import Caller
from supervisor.root import Supervisor

from .actions import server_info
from .contract.schema import schema_json

__all__ = ["add_contract_routes"]


def add_contract_routes(app: QuartTrio, sup: Supervisor,
                        me: Callable[[], Awaitable[Caller]]) -> None:
    @app.get("/api/v1/schema")
    async def schema() -> Response:
        await me()
        return Response(schema_json(), content_type="application/schema+json")

    @app.get("/api/v1/info")
    async def info() -> Response:
        await me()
        return Response(json.dumps(await server_info(sup)), content_type="application/json")
