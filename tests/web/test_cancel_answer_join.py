"""Every WebSocket ``agent.cancel`` is answered the one way (issue 45, item 3):
by its operation's settle, in the batch of what settled it — also when the
backend had to read the session from the store first (a session it has not
read since it started, as after a restart), which used to be answered by a
task waiting for the operation, in a write of its own.  REST's cancel, whose
answer is an HTTP response of its own, still waits for the settle; it is
answered the same."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
from wsproto.events import TextMessage

from tests.support.server import Server, running_server
from tests.support.ws import ws_client
from web.gateway import Gateway

from .support import http, new_task, running_session
from .test_wsconn import Client, socket_pair


async def _frames(client: Client, until: str) -> list[dict[str, Any]]:
    """Frames read until the answer with id ``until``."""
    out: list[dict[str, Any]] = []
    while not any(f.get("id") == until for f in out):
        for event in await client.events(1):
            assert isinstance(event, TextMessage)
            out.append(json.loads(event.data))
    return out


def _request(rid: str, action: str, payload: dict[str, Any]) -> str:
    return json.dumps({"id": rid, "type": "request", "action": action, "payload": payload})


def _forget_owner(srv: Server, session_id: str) -> None:
    """The backend forgets who owns the session, as one that has not read it
    since it started: its next cancel reads the session from the store."""
    srv.sup.orchestrator._owners.pop(session_id, None)


async def test_a_cancel_after_a_store_read_is_answered_in_the_closes_write(
        tmp_path: Path) -> None:
    with trio.fail_after(60):
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
                await client.send(TextMessage(_request("s", "session.subscribe",
                                                       {"session_id": sid})))
                await _frames(client, "s")
                _forget_owner(srv, sid)
                await client.send(TextMessage(_request("c", "agent.cancel",
                                                       {"session_id": sid})))
                frames = await _frames(client, "c")
                # The owner was read: a second cancel is admitted with no read (nothing runs).
                await client.send(TextMessage(_request("d", "agent.cancel",
                                                       {"session_id": sid})))
                again = await _frames(client, "d")
                nursery.cancel_scope.cancel()
    answer = frames[-1]
    assert answer["type"] == "response", answer
    assert answer["payload"]["outcome"] == "cancelled"
    (changed,) = [f for f in frames if f["action"] == "session.changed"
                  and f["payload"]["session"]["state"] == "WAITING_FOR_INPUT"]
    assert frames.index(changed) < len(frames) - 1
    (one,) = [w for w in writes if any(isinstance(f, str) and '"id":"c"' in f for f in w)]
    assert any(isinstance(f, str) and "WAITING_FOR_INPUT" in f for f in one), \
        "the close's notification and the cancel's answer went out in separate writes"
    # pending=true, then pending=false in the answer's write, before it.
    pending = [(f["payload"]["cancellation_pending"], frames.index(f)) for f in frames
               if f["action"] == "session.cancellation_changed"]
    assert [p for p, _ in pending] == [True, False], pending
    assert any(isinstance(f, str) and '"cancellation_pending":false' in f for f in one), \
        "pending=false and the cancel's answer went out in separate writes"
    assert again[-1]["type"] == "response"
    assert again[-1]["payload"]["outcome"] == "nothing_running"


async def test_a_store_read_cancel_of_a_session_not_the_callers_is_not_found(
        tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as a, \
                socket_pair() as (ws, client):
            sid = await running_session(a, await new_task(a), "/delay 30000", "mock")
            _forget_owner(srv, sid)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(Gateway(srv.sup).serve, ws,
                                   await srv.sup.caller("elsewhere"))
                await client.send(TextMessage(_request("x", "agent.cancel",
                                                       {"session_id": sid})))
                (refused,) = await _frames(client, "x")
                nursery.cancel_scope.cancel()
            # Nothing was cancelled: the turn ran on, and its owner's cancel
            # (REST's, which waits for the settle) stops it.
            async with http(srv) as h:
                r = await h.post(f"/api/v1/task-sessions/{sid}/cancel", json={})
    assert refused["type"] == "error" and refused["payload"]["code"] == "NOT_FOUND", refused
    assert r.status_code == 200 and r.json()["outcome"] == "cancelled", r.text
