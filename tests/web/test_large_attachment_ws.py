"""A large image to the mock agent through the real server, in every dialect: written to
the agent's stdin piece by piece as it is encoded (protocols/prompt_parts.py ``streamed``),
it arrives whole (the mock decodes the base64 and says how many bytes it got), and the
session goes on: the next prompt is answered (its line was not torn)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from protocols.prompt_parts import SPLICE_CHUNK
from tests.support.server import running_server
from tests.support.ws import ws_client

from .support import http, launch, new_task
from .test_attachments_ws import DIALECTS, _turn_text

#: Several chunks and an odd tail (a base64 chunk boundary that is not the image's end).
IMAGE = b"\x89PNG\r\n\x1a\n" + os.urandom(20 * SPLICE_CHUNK + 5)


@pytest.mark.parametrize("agent", DIALECTS)
async def test_a_large_image_reaches_the_agent_whole(tmp_path: Path, agent: str) -> None:
    with trio.fail_after(90):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            async with http(srv) as h:
                r = await h.post("/api/v1/attachments", params={"name": "big.png"},
                                 content=IMAGE, headers={"Content-Type": "image/png"})
                assert r.status_code == 201, r.text
                att = r.json()
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, agent)
            await ws.call("session.subscribe", {"session_id": sid})
            for _ in range(2):
                answer = await ws.call("message.add", {
                    "session_id": sid, "content": "/attachments",
                    "attachments": [att["attachment_id"]]})
                said = await _turn_text(ws, sid, answer["turn_id"])
                assert said == f"attachments: image image/png {len(IMAGE)}"
            answer = await ws.call("message.add", {"session_id": sid,
                                                   "content": "/attachments"})
            assert await _turn_text(ws, sid, answer["turn_id"]) == "attachments: none"
