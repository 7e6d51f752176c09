"""A cancel settled by its turn's close is answered from that step: the close's
notifications and the answer leave in one write from the closing task, not at
the connection writer's next turn (a scheduler round later, on a cancel's
critical path).

The cancelling connection here follows only its workspace (no session
subscription), so its writer has nothing of the cancel's to hold when the turn
closes: what it gets is the close's ``session.changed`` and the answer."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
from wsproto.events import TextMessage

from tests.support.server import running_server
from tests.support.ws import ws_client
from web.gateway import Gateway

from .support import new_task, running_session
from .test_wsconn import Client, socket_pair


async def _frames(client: Client, until: str) -> list[dict[str, Any]]:
    """Frames read until the response with id ``until``."""
    out: list[dict[str, Any]] = []
    while not any(f.get("id") == until for f in out):
        for event in await client.events(1):
            assert isinstance(event, TextMessage)
            out.append(json.loads(event.data))
    return out


def _request(rid: str, action: str, payload: dict[str, Any]) -> str:
    return json.dumps({"id": rid, "type": "request", "action": action, "payload": payload})


async def test_the_answer_and_the_close_go_out_from_the_closing_step(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as a, \
                socket_pair() as (ws, client):
            sid = await running_session(a, await new_task(a), "/delay 30000", "mock")
            by_writer: list[Sequence[str | bytes]] = []
            send_many = ws.send_many

            async def spied(frames: Sequence[str | bytes]) -> None:
                by_writer.append(list(frames))
                await send_many(frames)

            ws.send_many = spied  # type: ignore[method-assign]
            caller = await srv.sup.caller()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(Gateway(srv.sup).serve, ws, caller)
                await client.send(TextMessage(_request("c", "agent.cancel",
                                                       {"session_id": sid})))
                frames = await _frames(client, "c")
                nursery.cancel_scope.cancel()
    answer = frames[-1]
    assert answer["type"] == "response" and answer["payload"]["success"] is True
    (changed,) = [f for f in frames if f["action"] == "session.changed"
                  and f["payload"]["session"]["state"] == "WAITING_FOR_INPUT"]
    assert frames.index(changed) < len(frames) - 1
    written = [f for batch in by_writer for f in batch]
    assert not any(isinstance(f, str) and '"id":"c"' in f for f in written), \
        "the cancel's answer waited for the connection's writer"
    assert not any(isinstance(f, str) and "WAITING_FOR_INPUT" in f for f in written)
