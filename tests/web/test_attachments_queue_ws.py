"""A queued message's images and mentions (DESIGN.md §19) over the WS API: checked at
``message.add`` against the running agent, as its turn's start would check them (refused then
with the same line, nothing queued), and listed by the queue entry's DTO (the answer,
``queue.list``) as its message will list them."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from supervisor.profiles import BUILTIN_PROFILES
from tests.support.server import running_server
from tests.support.ws import RequestFailed, ws_client

from .support import launch, new_task, start_turn
from .test_attachments_ws import NOIMG, SOURCE, _cwd, _turn_text, _upload


async def test_a_queued_message_lists_its_parts_and_bad_ones_are_not_queued(
        tmp_path: Path) -> None:
    profiles = {**BUILTIN_PROFILES, "mock-noimg": NOIMG}
    with trio.fail_after(90):
        async with running_server(tmp_path / "data", profiles=profiles) as srv, \
                ws_client(srv) as ws:
            att = await _upload(srv)
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, "mock")
            await ws.call("session.subscribe", {"session_id": sid})
            cwd = await _cwd(srv, ws, task_id, sid)
            cwd.mkdir(parents=True, exist_ok=True)
            (cwd / "a.py").write_text(SOURCE)
            await start_turn(ws, sid, "/delay 3000")

            queued = await ws.call("message.add", {
                "session_id": sid, "content": "/attachments",
                "attachments": [att["attachment_id"]], "mentions": ["a.py"]})
            assert queued["delivery"] == "queued", queued
            entry = queued["entry"]
            assert (entry["attachments"], entry["mentions"]) == ([att], ["a.py"])
            [listed] = (await ws.call("queue.list", {"session_id": sid}))["entries"]
            assert (listed["attachments"], listed["mentions"]) == ([att], ["a.py"])

            # A mention that is not a file there: the turn's start would refuse it; so
            # does message.add, and nothing more is queued.
            with pytest.raises(RequestFailed) as err:
                await ws.call("message.add", {"session_id": sid, "content": "x",
                                              "mentions": ["gone.py"]})
            assert err.value.frame["payload"]["code"] == "VALIDATION_ERROR"
            assert len((await ws.call("queue.list", {"session_id": sid}))["entries"]) == 1

            # An image to an agent without image prompts, while its turn runs.
            sid2 = await launch(ws, task_id, "mock-noimg")
            await ws.call("session.subscribe", {"session_id": sid2})
            await start_turn(ws, sid2, "/delay 3000")
            with pytest.raises(RequestFailed) as err:
                await ws.call("message.add", {"session_id": sid2, "content": "/attachments",
                                              "attachments": [att["attachment_id"]]})
            assert err.value.frame["payload"]["code"] == "VALIDATION_ERROR"
            assert "does not take images" in str(err.value)
            assert (await ws.call("queue.list", {"session_id": sid2}))["entries"] == []

            # The queued one still runs with its parts when the turn ends.
            frame = await ws.wait_for(
                lambda f: f["action"] == "session.message.added"
                and f["payload"]["session_id"] == sid
                and f["payload"]["message"]["role"] == "user"
                and f["payload"]["message"]["content"] == "/attachments", timeout=30)
            said = await _turn_text(ws, sid, frame["payload"]["message"]["turn_id"])
            assert said.startswith(f"attachments: image image/png {att['size']}; "), said
