"""What a profile with ``executor = "agentctl"`` gets beside a prompt's text, through the
WebSocket API of a real server (DESIGN.md §19, §20): the backend spawns a local agentctl per
session, and its MCP servers, a message's image and mention, and ``session.option.set`` reach
the mock agent behind it as they reach a local one (the mock says what it got); an agent
without image prompts refuses an image before anything is stored or sent; an MCP server of a
kind the agent does not take fails the launch with one line naming it."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.mcp_servers import parse_mcp_servers
from supervisor.profiles import BUILTIN_PROFILES, AgentProfile
from tests.support.server import running_server
from tests.support.ws import RequestFailed, WsClient, ws_client
from tests.web.support import http, launch, new_task
from tests.web.test_attachments_ws import PNG, SOURCE, _cwd, _turn_text

SLEEP = shutil.which("sleep") or "/bin/sleep"
AGENTS = ["mock", "mock-codex"]


def _profiles() -> dict[str, AgentProfile]:
    base = BUILTIN_PROFILES["mock"]
    noimg = dataclasses.replace(base, name="mock-noimg",
                                command=(*base.command, "--no-images"))
    return {**BUILTIN_PROFILES, "mock-noimg": noimg, **{
        name: dataclasses.replace(p, executor="agentctl")
        for name, p in {**BUILTIN_PROFILES, "mock-noimg": noimg}.items()
        if name in (*AGENTS, "mock-noimg")}}


async def _said(ws: WsClient, sid: str, text: str, **extra: Any) -> str:
    answer = await ws.call("message.add", {"session_id": sid, "content": text, **extra})
    assert answer["delivery"] == "started", answer
    return await _turn_text(ws, sid, answer["turn_id"])


@pytest.mark.parametrize("agent", AGENTS)
async def test_mcp_parts_and_options_reach_the_agent_behind_agentctl(
        tmp_path: Path, agent: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    profiles = _profiles()
    servers = parse_mcp_servers({
        "tools": {"command": [SLEEP, "300"], "profiles": [agent]},
        "docs": {"type": "http", "url": "http://127.0.0.1:9/mcp", "profiles": [agent]},
    }, data, profiles)
    with trio.fail_after(90):
        async with running_server(data, profiles=profiles, mcp_servers=servers) as srv, \
                ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, agent)
            assert srv.sup.lifecycle.executions[sid].adapter.__class__.__name__ == (
                "AgentctlAdapter")
            await ws.call("session.subscribe", {"session_id": sid})
            said = await _said(ws, sid, "/mcp")
            assert f"tools stdio {SLEEP} 300 (pid " in said, said
            assert "docs http http://127.0.0.1:9/mcp" in said, said

            async with http(srv) as h:
                r = await h.post("/api/v1/attachments", params={"name": "shot.png"},
                                 content=PNG, headers={"Content-Type": "image/png"})
                assert r.status_code == 201, r.text
                att = r.json()
            cwd = await _cwd(srv, ws, task_id, sid)
            (cwd / "a.py").write_text(SOURCE)
            said = await _said(ws, sid, "/attachments", attachments=[att["attachment_id"]],
                               mentions=["a.py"])
            if agent == "mock-codex":
                assert said == f"attachments: mention {cwd}/a.py; image image/png {len(PNG)}"
            else:
                assert said == (f"attachments: image image/png {len(PNG)}; "
                                f"resource text/x-python {len(SOURCE)} file://{cwd}/a.py")

            # An option: ACP applies it now; Codex with its next turn.
            option_id, value = ("mode", "plan") if agent == "mock" else ("model", None)
            options = {o["id"]: o for o in (await ws.call("session.list", {
                "task_id": task_id}))["sessions"][0]["options"]}
            offered = options[option_id]
            if value is None:
                value = next(str(c["value"]) for c in offered["choices"]
                             if c["value"] != offered["current"])
            answer = await ws.call("session.option.set", {
                "session_id": sid, "option_id": option_id, "value": value})
            assert answer["applied"] == ("now" if agent == "mock" else "next_turn"), answer
            # (The mock says the options in effect; Codex's, those its turn/start carried.)
            assert f"{option_id}={value}" in (await _said(ws, sid, "/options")).split()
            with pytest.raises(RequestFailed) as err:
                await ws.call("session.option.set", {"session_id": sid,
                                                     "option_id": option_id,
                                                     "value": "no-such-value"})
            assert err.value.frame["payload"]["code"] == "VALIDATION_ERROR"


async def test_an_image_to_an_agent_without_image_prompts_is_refused(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_server(tmp_path / "data", profiles=_profiles()) as srv, \
                ws_client(srv) as ws:
            async with http(srv) as h:
                r = await h.post("/api/v1/attachments", params={"name": "shot.png"},
                                 content=PNG, headers={"Content-Type": "image/png"})
                att = r.json()
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, "mock-noimg")
            await ws.call("session.subscribe", {"session_id": sid})
            with pytest.raises(RequestFailed) as err:
                await ws.call("message.add", {"session_id": sid, "content": "/attachments",
                                              "attachments": [att["attachment_id"]]})
            assert err.value.frame["payload"]["code"] == "VALIDATION_ERROR"
            assert "does not take images" in str(err.value)
            assert (await ws.call("message.list", {"session_id": sid}))["messages"] == []
            assert await _said(ws, sid, "/attachments") == "attachments: none"


async def test_an_sse_server_fails_the_launch_behind_agentctl(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    profiles = _profiles()
    servers = parse_mcp_servers({
        "events": {"type": "sse", "url": "http://127.0.0.1:9/sse", "profiles": ["mock"]},
    }, data, profiles)
    with trio.fail_after(60):
        async with running_server(data, profiles=profiles, mcp_servers=servers) as srv, \
                ws_client(srv) as ws:
            task_id = await new_task(ws)
            err = await ws.request("session.launch", {"task_id": task_id, "agent": "mock"})
            assert err["type"] == "error", err
            message = err["payload"]["message"]
            assert "MCP server 'events' is sse" in message, message
            assert "\n" not in message, message


async def test_a_large_image_reaches_the_agent_behind_agentctl_whole(tmp_path: Path) -> None:
    """Its base64 streamed in the prompt's body to agentctl (not held whole), then to the
    agent's stdin the same way: the mock decodes all of it."""
    from tests.web.test_large_attachment_ws import IMAGE

    with trio.fail_after(60):
        async with running_server(tmp_path / "data", profiles=_profiles()) as srv, \
                ws_client(srv) as ws:
            async with http(srv) as h:
                r = await h.post("/api/v1/attachments", params={"name": "big.png"},
                                 content=IMAGE, headers={"Content-Type": "image/png"})
                assert r.status_code == 201, r.text
            sid = await launch(ws, await new_task(ws), "mock")
            await ws.call("session.subscribe", {"session_id": sid})
            said = await _said(ws, sid, "/attachments", attachments=[r.json()["attachment_id"]])
            assert said == f"attachments: image image/png {len(IMAGE)}"
            assert await _said(ws, sid, "hello") == "hello"
