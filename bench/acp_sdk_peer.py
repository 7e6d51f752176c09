"""The side-by-side peer: the official ACP Python SDK (``acp``, asyncio).

Benchmark only: the product never runs asyncio.  This module is imported only
by ``python -m bench.floors --impl acp-sdk``, a process of its own, and runs
under ``asyncio.run``, never inside trio.  It drives the same mock agent the
same way as ``bench.floors.AdapterFloor``: prompt ``/delay 30000``, wait for
the first chunk, then time cancel → the prompt returning ``cancelled``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from acp import PROTOCOL_VERSION, text_block
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse
from acp.stdio import spawn_agent_process

__all__ = ["run_samples"]

DELAY_PROMPT = "/delay 30000"


class _Client:
    """The minimal ACP client side: it watches the stream for the first chunk."""

    def __init__(self) -> None:
        self.first_chunk = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if getattr(update, "session_update", None) == "agent_message_chunk":
            self.first_chunk.set()

    async def request_permission(self, options: Any, session_id: str, tool_call: Any,
                                 **kwargs: Any) -> RequestPermissionResponse:
        outcome: AllowedOutcome | DeniedOutcome = DeniedOutcome(outcome="cancelled")
        return RequestPermissionResponse(outcome=outcome)


async def _samples(command: list[str], cwd: str, n: int, warmup: int) -> list[float]:
    client = _Client()
    out: list[float] = []
    # Only the two methods the mock agent calls are implemented; the SDK routes by name.
    to_client: Any = client
    async with spawn_agent_process(to_client, command[0], *command[1:], cwd=cwd) as (conn, _):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        sid = session.session_id
        for _ in range(n + warmup):
            client.first_chunk = asyncio.Event()
            ended_at: list[float] = []

            async def prompt(ended_at: list[float] = ended_at) -> str:
                resp = await conn.prompt(session_id=sid, prompt=[text_block(DELAY_PROMPT)])
                ended_at.append(time.perf_counter())
                return str(resp.stop_reason)

            task = asyncio.create_task(prompt())
            await asyncio.wait_for(client.first_chunk.wait(), 10)
            t0 = time.perf_counter()
            await conn.cancel(session_id=sid)
            stop = await asyncio.wait_for(task, 10)
            if stop != "cancelled":
                raise RuntimeError(f"the turn ended with {stop!r}, not cancelled")
            out.append((ended_at[0] - t0) * 1000)
    return out[warmup:]


def run_samples(command: list[str], cwd: str, n: int, warmup: int = 3) -> list[float]:
    return asyncio.run(_samples(command, cwd, n, warmup))
