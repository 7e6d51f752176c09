"""Images and files to the agent over the WS API, in every dialect (DESIGN.md §19):
an uploaded image and a mentioned file of the session's cwd reach the mock agent
(its ``/attachments`` says what its prompt carried), the user message lists them, a
queued message keeps them; what is not the caller's or not inside the cwd is refused;
an agent without image prompts refuses an image before anything is sent (the mock
with ``--no-images``, as the profile ``mock-noimg``)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.profiles import BUILTIN_PROFILES
from tests.support.server import OTHER_TOKEN, Server, running_server
from tests.support.ws import RequestFailed, WsClient, ws_client

from .support import http, launch, new_task

DIALECTS = ["mock", "mock-codex", "mock-acp2"]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(200))
SOURCE = "print('hi')\n"
NOIMG = dataclasses.replace(BUILTIN_PROFILES["mock"], name="mock-noimg",
                            command=(*BUILTIN_PROFILES["mock"].command, "--no-images"))


async def _upload(srv: Server, token: str | None = None) -> dict[str, Any]:
    async with http(srv, token) as h:
        r = await h.post("/api/v1/attachments", params={"name": "shot.png"}, content=PNG,
                         headers={"Content-Type": "image/png"})
        assert r.status_code == 201, r.text
        return dict(r.json())


async def _cwd(srv: Server, ws: WsClient, task_id: str, sid: str) -> Path:
    sessions = (await ws.call("session.list", {"task_id": task_id}))["sessions"]
    [session] = [s for s in sessions if s["id"] == sid]
    if session.get("cwd"):
        return Path(session["cwd"])
    caller = await srv.sup.caller()
    return srv.sup.config.session_work_dir(caller.workspace_id, sid)


async def _turn_text(ws: WsClient, sid: str, turn_id: str) -> str:
    await ws.wait_for(lambda f: f["action"] == "session.turn.completed"
                      and f["payload"]["turn_id"] == turn_id)
    msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
    return "".join(m["content"] for m in msgs if m["turn_id"] == turn_id and m["role"] == "agent")


@pytest.mark.parametrize("agent", DIALECTS)
async def test_image_and_mention_reach_the_agent(tmp_path: Path, agent: str) -> None:
    with trio.fail_after(90):
        async with running_server(tmp_path / "data", workspaces={"b": OTHER_TOKEN}) as srv, \
                ws_client(srv) as ws:
            att = await _upload(srv)
            theirs = await _upload(srv, OTHER_TOKEN)
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, agent)
            await ws.call("session.subscribe", {"session_id": sid})
            cwd = await _cwd(srv, ws, task_id, sid)
            (cwd / "src").mkdir(parents=True, exist_ok=True)
            (cwd / "src" / "a.py").write_text(SOURCE)
            os.symlink("/etc/hostname", cwd / "out")
            (cwd / "src" / "up").symlink_to("..")

            answer = await ws.call("message.add", {
                "session_id": sid, "content": "/attachments",
                "attachments": [att["attachment_id"]], "mentions": ["src/a.py"]})
            assert answer["delivery"] == "started"
            assert answer["metadata"]["attachments"] == [att]
            assert answer["metadata"]["mentions"] == ["src/a.py"]
            said = await _turn_text(ws, sid, answer["turn_id"])
            path = f"{cwd}/src/a.py"
            if agent == "mock-codex":
                # (the mention is in the text, which comes first)
                want = f"attachments: mention {path}; image image/png {len(PNG)}"
            else:
                want = (f"attachments: image image/png {len(PNG)}; "
                        f"resource text/x-python {len(SOURCE)} file://{path}")
            assert said == want
            # The transcript keeps what the message carried.
            msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
            [user] = [m for m in msgs if m["role"] == "user"]
            assert user["metadata"]["attachments"] == [att]
            assert user["metadata"]["mentions"] == ["src/a.py"]

            # Refused, nothing sent: another workspace's upload, a path leaving the cwd
            # by name or by a link, a file that is not there.
            refusals: list[tuple[dict[str, Any], str]] = [
                ({"attachments": [theirs["attachment_id"]]}, "NOT_FOUND"),
                ({"mentions": ["../a.py"]}, "VALIDATION_ERROR"),
                ({"mentions": ["/etc/hostname"]}, "VALIDATION_ERROR"),
                ({"mentions": ["out"]}, "VALIDATION_ERROR"),
                ({"mentions": ["src/up/src/a.py"]}, "VALIDATION_ERROR"),
                ({"mentions": ["src/none.py"]}, "VALIDATION_ERROR"),
                ({"mentions": ["src"]}, "VALIDATION_ERROR"),
            ]
            for extra, code in refusals:
                with pytest.raises(RequestFailed) as err:
                    await ws.call("message.add", {"session_id": sid, "content": "/attachments",
                                                  **extra})
                assert err.value.frame["payload"]["code"] == code, (extra, err.value)
            msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
            assert len([m for m in msgs if m["role"] == "user"]) == 1

            # Queued behind a running turn, the message keeps its parts for its own turn.
            first = await ws.call("message.add", {"session_id": sid, "content": "/delay 300"})
            queued = await ws.call("message.add", {
                "session_id": sid, "content": "/attachments",
                "attachments": [att["attachment_id"]]})
            assert queued["delivery"] == "queued"
            await _turn_text(ws, sid, first["turn_id"])
            frame = await ws.wait_for(
                lambda f: f["action"] == "session.message.added"
                and f["payload"]["message"]["role"] == "user"
                and f["payload"]["message"]["content"] == "/attachments"
                and f["payload"]["message"]["turn_id"] != answer["turn_id"])
            msg = frame["payload"]["message"]
            assert msg["metadata"]["attachments"] == [att]
            said = await _turn_text(ws, sid, msg["turn_id"])
            assert said == f"attachments: image image/png {len(PNG)}"


async def test_agent_without_images_refuses_before_sending(tmp_path: Path) -> None:
    profiles = {**BUILTIN_PROFILES, "mock-noimg": NOIMG}
    with trio.fail_after(60):
        async with running_server(tmp_path / "data", profiles=profiles) as srv, \
                ws_client(srv) as ws:
            att = await _upload(srv)
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, "mock-noimg")
            await ws.call("session.subscribe", {"session_id": sid})
            with pytest.raises(RequestFailed) as err:
                await ws.call("message.add", {"session_id": sid, "content": "/attachments",
                                              "attachments": [att["attachment_id"]]})
            assert err.value.frame["payload"]["code"] == "VALIDATION_ERROR"
            assert "does not take images" in str(err.value)
            # Nothing stored, no turn: the next prompt is the agent's first.
            assert (await ws.call("message.list", {"session_id": sid}))["messages"] == []
            answer = await ws.call("message.add", {"session_id": sid,
                                                   "content": "/attachments"})
            assert await _turn_text(ws, sid, answer["turn_id"]) == "attachments: none"
