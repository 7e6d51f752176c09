"""The peer of ``peer_e2e``: what a user would build instead of Turnvisor, minimally.

Benchmark only (asyncio, like bench/acp_sdk_peer.py; the product never runs it):
one process with a WebSocket server (the ``websockets`` package) and one mock
agent driven through the official ACP SDK.  It speaks the envelope of DESIGN.md §4
and just enough of its actions for the bench client to measure a cancel exactly
as it does against Turnvisor::

    session.launch {}                       -> {id}          (an ACP session/new)
    session.subscribe {session_id}          -> {success}     (every frame goes to the one client)
    message.add {session_id, content}       -> {delivery:"started", session_id}; the prompt runs,
                                               each agent chunk is forwarded at once as a
                                               session.message.updated notification
    agent.cancel {session_id}               -> {success, session_id} once the SDK's prompt
                                               returned ``cancelled`` (an error frame otherwise)
    ping {}                                 -> {}

No store, no authorization, no fan-out, no second connection: the physical work
of a cancel and little else.  ``python -m bench.peer_ws_server`` prints
``listening <port>`` once it accepts connections on 127.0.0.1, serves one
connection, and exits when that connection closes (its agent with it).
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from typing import Any

from acp import PROTOCOL_VERSION, text_block
from acp.schema import DeniedOutcome, RequestPermissionResponse
from acp.stdio import spawn_agent_process
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from .floors import REPO_ROOT, mock_agent_command

__all__ = ["main"]

CANCEL_WAIT_S = 10.0


def _frame(kind: str, action: str, payload: dict[str, Any], rid: str = "") -> str:
    return json.dumps({"id": rid, "type": kind, "action": action, "payload": payload,
                       "timestamp": datetime.now(UTC).isoformat()})


class Peer:
    """The ACP client side (the SDK calls ``session_update``) and the request handlers."""

    def __init__(self) -> None:
        self.ws: ServerConnection | None = None
        self.conn: Any = None
        self.turns: dict[str, asyncio.Task[str]] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    # -- the ACP client methods the mock agent calls ------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if getattr(update, "session_update", None) != "agent_message_chunk" or self.ws is None:
            return
        text = getattr(getattr(update, "content", None), "text", "")
        await self.ws.send(_frame("notification", "session.message.updated", {
            "session_id": session_id, "message": {"role": "agent", "content": text}}))

    async def request_permission(self, options: Any, session_id: str, tool_call: Any,
                                 **kwargs: Any) -> RequestPermissionResponse:
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    # -- the WebSocket side -------------------------------------------------------

    async def serve_one(self, ws: ServerConnection, done: asyncio.Future[None]) -> None:
        self.ws = ws
        try:
            async for raw in ws:
                frame = json.loads(raw)
                # Each request in its own task: a cancel must not wait behind a prompt.
                task = asyncio.create_task(self.answer(ws, frame))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
        except ConnectionClosed:
            pass
        finally:
            if not done.done():
                done.set_result(None)

    async def answer(self, ws: ServerConnection, frame: dict[str, Any]) -> None:
        rid, action = str(frame.get("id", "")), str(frame.get("action", ""))
        payload = frame.get("payload") or {}
        try:
            result = await self.handle(action, payload)
        except Exception as exc:
            reply = _frame("error", action, {"code": "INTERNAL_ERROR", "message": str(exc)}, rid)
        else:
            reply = _frame("response", action, result, rid)
        try:
            await ws.send(reply)
        except ConnectionClosed:
            pass

    async def handle(self, action: str, p: dict[str, Any]) -> dict[str, Any]:
        if action == "ping":
            return {}
        if action == "session.launch":
            session = await self.conn.new_session(cwd=str(REPO_ROOT), mcp_servers=[])
            return {"id": session.session_id}
        if action == "session.subscribe":
            return {"success": True}
        sid = str(p["session_id"])
        if action == "message.add":
            self.turns[sid] = asyncio.create_task(self.prompt(sid, str(p["content"])))
            return {"delivery": "started", "session_id": sid}
        if action == "agent.cancel":
            turn = self.turns.pop(sid, None)
            await self.conn.cancel(session_id=sid)
            if turn is not None:
                stop = await asyncio.wait_for(turn, CANCEL_WAIT_S)
                if stop != "cancelled":
                    raise RuntimeError(f"the turn ended with {stop!r}, not cancelled")
            return {"success": True, "session_id": sid}
        raise ValueError(f"unknown action {action!r}")

    async def prompt(self, sid: str, content: str) -> str:
        resp = await self.conn.prompt(session_id=sid, prompt=[text_block(content)])
        return str(resp.stop_reason)


async def _main() -> None:
    peer = Peer()
    command = mock_agent_command("acp")
    # The SDK routes the agent's calls by method name to these two methods.
    to_client: Any = peer
    async with spawn_agent_process(to_client, command[0], *command[1:],
                                   cwd=str(REPO_ROOT)) as (conn, _):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        peer.conn = conn
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def handler(ws: ServerConnection) -> None:
            await peer.serve_one(ws, done)

        # No compression and no keepalive pings: neither is on Turnvisor's cancel path.
        async with serve(handler, "127.0.0.1", 0, compression=None,
                         ping_interval=None) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            print(f"listening {port}", flush=True)
            await done
        for turn in peer.turns.values():
            turn.cancel()


def main() -> int:
    asyncio.run(_main())
    return 0


if __name__ == "__main__":
    sys.exit(main())
