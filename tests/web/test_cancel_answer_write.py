"""A cancel settled by its turn's close is answered with the close: the close's
notifications and the answer leave in one write, not frame by frame.

The cancelling connection here follows only its workspace (no session
subscription), so what it gets of the close is its ``session.changed`` and
the answer."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.support.server import running_server
from tests.support.ws import ws_client

from .support import (
    frames_until,
    new_task,
    running_session,
    send_request,
    spied_gateway,
    write_of,
    wrote,
)


async def test_the_answer_and_the_close_go_out_in_one_write(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as a:
            sid = await running_session(a, await new_task(a), "/delay 30000", "mock")
            async with spied_gateway(srv, await srv.sup.caller()) as (client, writes):
                await send_request(client, "c", "agent.cancel", {"session_id": sid})
                frames = await frames_until(client, "c")
    answer = frames[-1]
    assert answer["type"] == "response" and answer["payload"]["success"] is True
    (changed,) = [f for f in frames if f["action"] == "session.changed"
                  and f["payload"]["session"]["state"] == "WAITING_FOR_INPUT"]
    assert frames.index(changed) < len(frames) - 1
    assert wrote(write_of(writes, "c"), "WAITING_FOR_INPUT"), \
        "the close's notification and the cancel's answer went out in separate writes"
