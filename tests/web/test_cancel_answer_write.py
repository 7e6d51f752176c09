"""A cancel settled by its turn's close is answered with the close: the close's
notifications and the answer leave in one write, not frame by frame.

The cancelling connection here follows only its workspace (no session
subscription), so what it gets of the close is its ``session.changed`` and
the answer."""

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


async def test_the_answer_and_the_close_go_out_in_one_write(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as a, \
                socket_pair() as (ws, client):
            sid = await running_session(a, await new_task(a), "/delay 30000", "mock")
            writes: list[list[str | bytes]] = []
            write_now, send_many = ws.write_now, ws.send_many

            def spied_now(frames: Sequence[str | bytes]) -> bytes | None:
                rest = write_now(frames)
                if rest is not None:
                    writes.append(list(frames))
                return rest

            async def spied_many(frames: Sequence[str | bytes]) -> None:
                writes.append(list(frames))
                await send_many(frames)

            ws.write_now = spied_now  # type: ignore[method-assign]
            ws.send_many = spied_many  # type: ignore[method-assign]
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
    (one,) = [w for w in writes if any(isinstance(f, str) and '"id":"c"' in f for f in w)]
    assert any(isinstance(f, str) and "WAITING_FOR_INPUT" in f for f in one), \
        "the close's notification and the cancel's answer went out in separate writes"
