"""Every WebSocket ``agent.cancel`` is answered the one way (issue 45, item 3):
by its operation's settle, in the batch of what settled it — also when the
backend had to read the session from the store first (a session it has not
read since it started, as after a restart), which used to be answered by a
task waiting for the operation, in a write of its own.  REST's cancel, whose
answer is an HTTP response of its own, still waits for the settle; it is
answered the same."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.support.server import Server, running_server
from tests.support.ws import ws_client

from .support import (
    frames_until,
    http,
    new_task,
    running_session,
    send_request,
    spied_gateway,
    write_of,
    wrote,
)


def _forget_owner(srv: Server, session_id: str) -> None:
    """The backend forgets who owns the session, as one that has not read it
    since it started: its next cancel reads the session from the store.

    Private, for want of a public way: only a fresh backend does not know a
    session's owner, and the subscription this connection needs (for the
    cancel's pending frames) reads the session, teaching the owner, before any
    cancel of it can be admitted."""
    srv.sup.orchestrator._owners.pop(session_id, None)


async def test_a_cancel_after_a_store_read_is_answered_in_the_closes_write(
        tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as a:
            sid = await running_session(a, await new_task(a), "/delay 30000", "mock")
            async with spied_gateway(srv, await srv.sup.caller()) as (client, writes):
                await send_request(client, "s", "session.subscribe", {"session_id": sid})
                await frames_until(client, "s")
                _forget_owner(srv, sid)
                await send_request(client, "c", "agent.cancel", {"session_id": sid})
                frames = await frames_until(client, "c")
                # The owner was read: a second cancel is admitted with no read (nothing runs).
                await send_request(client, "d", "agent.cancel", {"session_id": sid})
                again = await frames_until(client, "d")
    answer = frames[-1]
    assert answer["type"] == "response", answer
    assert answer["payload"]["outcome"] == "cancelled"
    (changed,) = [f for f in frames if f["action"] == "session.changed"
                  and f["payload"]["session"]["state"] == "WAITING_FOR_INPUT"]
    assert frames.index(changed) < len(frames) - 1
    one = write_of(writes, "c")
    assert wrote(one, "WAITING_FOR_INPUT"), \
        "the close's notification and the cancel's answer went out in separate writes"
    # pending=true, then pending=false in the answer's write, before it.
    pending = [(f["payload"]["cancellation_pending"], frames.index(f)) for f in frames
               if f["action"] == "session.cancellation_changed"]
    assert [p for p, _ in pending] == [True, False], pending
    assert wrote(one, '"cancellation_pending":false'), \
        "pending=false and the cancel's answer went out in separate writes"
    assert again[-1]["type"] == "response"
    assert again[-1]["payload"]["outcome"] == "nothing_running"


async def test_a_store_read_cancel_of_a_session_not_the_callers_is_not_found(
        tmp_path: Path) -> None:
    # Another workspace's caller is never admitted on the known owner
    # (``admit_known`` answers None), so its cancel always reads the session
    # from the store, which does not find it for that workspace.
    with trio.fail_after(60):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as a:
            sid = await running_session(a, await new_task(a), "/delay 30000", "mock")
            async with spied_gateway(srv, await srv.sup.caller("elsewhere")) as (client, _):
                await send_request(client, "x", "agent.cancel", {"session_id": sid})
                (refused,) = await frames_until(client, "x")
            # Nothing was cancelled: the turn ran on, and its owner's cancel
            # (REST's, which waits for the settle) stops it.
            async with http(srv) as h:
                r = await h.post(f"/api/v1/task-sessions/{sid}/cancel", json={})
    assert refused["type"] == "error" and refused["payload"]["code"] == "NOT_FOUND", refused
    assert r.status_code == 200 and r.json()["outcome"] == "cancelled", r.text
