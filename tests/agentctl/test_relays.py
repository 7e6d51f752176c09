"""What agentctl relays to its agent beside a prompt's text (DESIGN.md §19, §20), through a
real agentctl process with the mock agent behind it: a prompt's images and mentions
(``parts``), the session's MCP servers (``mcp_servers``), an option set
(``POST /api/v1/session/option``); each reaches the agent (the mock says what it got), and
bad input is a 422 naming the field, with no turn started."""

from __future__ import annotations

import base64
import dataclasses
import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from agentctl_support import TOKEN, Agentctl, AgentctlFactory, mock_profile, next_frame
from trio_websocket import WebSocketConnection

from supervisor.executors.agentctl import spawn_agentctl

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3
IMAGE = {"type": "image", "name": "shot.png", "mime": "image/png",
         "data": base64.b64encode(PNG).decode()}
MENTION = {"type": "mention", "path": "/w/src/a.py", "name": "src/a.py",
           "mime": "text/x-python", "text": "print(1)\n"}
SLEEP = shutil.which("sleep") or "/bin/sleep"


async def _said(ctl: Agentctl, ws: WebSocketConnection, body: dict[str, Any]) -> str:
    """A prompt's turn run to its end; the agent's text."""
    resp = await ctl.post("/api/v1/prompt", body)
    assert resp.status_code == 202, resp.text
    turn = resp.json()["turn_id"]
    seen: list[dict[str, Any]] = []
    ended = await next_frame(ws, lambda f: f.get("type") == "TurnEnded"
                             and f.get("turn") == turn, seen=seen)
    assert ended["stop_reason"] == "end_turn", ended
    return "".join(f["text"] for f in seen
                   if f.get("type") == "MessageChunk" and f.get("turn") == turn)


async def _session(ctl: Agentctl, **extra: Any) -> dict[str, Any]:
    resp = await ctl.post("/api/v1/session", {"owner": "me", **extra})
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


@pytest.mark.parametrize("protocol", ["acp", "codex"])
async def test_parts_reach_the_agent_and_bad_ones_are_refused(
        agentctl: AgentctlFactory, protocol: str) -> None:
    with trio.fail_after(60):
        async with agentctl(protocol) as ctl, ctl.events() as ws:
            session = await _session(ctl)
            caps = session["prompt_capabilities"]
            if protocol == "acp":
                assert caps == {"image": True, "embeddedContext": True}, caps
            else:
                assert caps is None
            said = await _said(ctl, ws, {"text": "/attachments",
                                         "parts": [IMAGE, MENTION]})
            if protocol == "acp":
                assert said == (f"attachments: image image/png {len(PNG)}; "
                                "resource text/x-python 9 file:///w/src/a.py")
            else:
                assert said == f"attachments: mention /w/src/a.py; image image/png {len(PNG)}"

            # A large one: agentctl writes it to its agent's stdin as it encodes it.
            big = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 1200
            said = await _said(ctl, ws, {"text": "/attachments", "parts": [
                {**IMAGE, "data": base64.b64encode(big).decode()}]})
            assert said == f"attachments: image image/png {len(big)}", said

            bad: list[tuple[Any, str]] = [
                ("no", "parts must be a list of objects"),
                ([{"type": "video", "name": "a", "mime": "video/mp4"}], "parts[0].type"),
                ([{**IMAGE, "data": "not base64!"}], "parts[0].data must be base64"),
                ([{**IMAGE, "mime": "text/plain"}], "an image's mime must be image/*"),
                ([{**IMAGE, "name": ""}], "parts[0].name"),
                ([IMAGE, {**MENTION, "path": "src/a.py"}], "parts[1].path must be absolute"),
                ([IMAGE] * 65, "at most 64"),
            ]
            if protocol == "codex":  # Codex takes no attached file: the agent's own refusal
                bad.append(([{"type": "file", "name": "a.pdf", "mime": "application/pdf",
                              "data": ""}], "not attached files"))
            before = (await ctl.status())["seq"]
            for parts, error in bad:
                resp = await ctl.post("/api/v1/prompt", {"text": "/attachments",
                                                          "parts": parts})
                assert resp.status_code == 422, (parts, resp.text)
                assert error in resp.json()["error"], (error, resp.json())
            status = await ctl.status()
            assert status["turn"] is None and status["seq"] == before  # no turn, no event


async def _status_for_length(ctl: Agentctl, path: str, length: int) -> int:
    """The status agentctl answers a POST announcing a body of ``length`` bytes, from
    the request's head alone (a cap is checked before the body is read)."""
    host, port = ctl.url.removeprefix("http://").rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        await stream.send_all((f"POST {path} HTTP/1.1\r\nHost: {host}\r\n"
                               f"Authorization: Bearer {ctl.token}\r\n"
                               "Content-Type: application/json\r\n"
                               f"Content-Length: {length}\r\n\r\n").encode())
        head = b""
        while b"\r\n" not in head:
            chunk = await stream.receive_some(4096)
            assert chunk, head
            head += chunk
    return int(head.split(b" ", 2)[1])


async def test_a_prompt_over_the_cap_is_413(agentctl: AgentctlFactory) -> None:
    from protocols.agentctl_parts import MAX_PROMPT_BYTES

    with trio.fail_after(60):
        async with agentctl() as ctl:
            await _session(ctl)
            assert await _status_for_length(ctl, "/api/v1/prompt", MAX_PROMPT_BYTES + 1) == 413
            # Other routes keep their own, smaller cap.
            assert await _status_for_length(ctl, "/api/v1/session/option",
                                            5 * 1024 * 1024) == 413
            # A 5 MB image is under the prompt's cap (the answer: no session named so).
            big = {**IMAGE, "data": base64.b64encode(b"\x89PNG" + bytes(5 * 1024 * 1024))
                   .decode()}
            resp = await ctl.post("/api/v1/prompt", {"text": "/attachments", "parts": [big],
                                                     "session_id": "nope"})
            assert resp.status_code == 404, resp.text[:200]


@asynccontextmanager
async def _no_images(tmp_path: Path) -> AsyncIterator[Agentctl]:
    """agentctl running the mock with ``--no-images`` (its stderr left to the pipe)."""
    base = mock_profile("acp")
    profile = dataclasses.replace(base, command=(*base.command, "--no-images"))
    async with spawn_agentctl(profile, str(tmp_path), TOKEN, start_s=30,
                              term_grace_s=2) as (proc, url), \
            httpx.AsyncClient(base_url=url) as http:
        yield Agentctl(url=url, token=TOKEN, process=proc, http=http)


async def test_an_agent_without_image_prompts_refuses_an_image(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with _no_images(tmp_path) as ctl, ctl.events() as ws:
            session = await _session(ctl)
            assert session["prompt_capabilities"] == {"image": False, "embeddedContext": True}
            resp = await ctl.post("/api/v1/prompt", {"text": "/attachments", "parts": [IMAGE]})
            assert resp.status_code == 422
            assert "does not take images" in resp.json()["error"]
            assert await _said(ctl, ws, {"text": "/attachments", "parts": [MENTION]}) == (
                "attachments: resource text/x-python 9 file:///w/src/a.py")


@pytest.mark.parametrize("protocol", ["acp", "codex"])
async def test_mcp_servers_reach_the_session(agentctl: AgentctlFactory, protocol: str) -> None:
    servers = [{"name": "tools", "kind": "stdio", "command": SLEEP, "args": ["300"],
                "env": {"A": "1"}},
               {"name": "docs", "kind": "http", "url": "http://127.0.0.1:9/mcp",
                "headers": {"X-Token": "t"}}]
    with trio.fail_after(60):
        async with agentctl(protocol) as ctl, ctl.events() as ws:
            for bad, error in [
                ([{"name": "x", "kind": "stdio", "command": "sleep"}], "absolute path"),
                ([{"name": "x", "kind": "ws", "url": "ws://a"}], "mcp_servers[0].kind"),
                ([{"name": "x", "kind": "http", "url": "file:///etc"}], "http(s) URL"),
                ([{"name": "x", "kind": "http", "url": "http://a", "headers": {"a": 1}}],
                 "headers must be an object of strings"),
                ([servers[1], servers[1]], "each name once"),
            ]:
                resp = await ctl.post("/api/v1/session", {"owner": "me",
                                                          "mcp_servers": bad})
                assert resp.status_code == 422, (bad, resp.text)
                assert error in resp.json()["error"], (error, resp.json())
            # A kind the agent does not take: the agent's own refusal, nothing sent.
            sse = [{"name": "old", "kind": "sse", "url": "http://127.0.0.1:9/sse"}]
            resp = await ctl.post("/api/v1/session", {"owner": "me", "mcp_servers": sse})
            assert resp.status_code == 422, resp.text
            assert "'old' is sse" in resp.json()["error"], resp.json()

            await _session(ctl, mcp_servers=servers)
            said = await _said(ctl, ws, {"text": "/mcp"})
            assert f"tools stdio {SLEEP} 300 (pid " in said, said
            assert "docs http http://127.0.0.1:9/mcp" in said, said


async def test_an_option_is_set_through_agentctl(agentctl: AgentctlFactory) -> None:
    with trio.fail_after(60):
        async with agentctl("acp") as ctl, ctl.events() as ws:
            sid = (await _session(ctl))["session_id"]
            for body, status, error in [
                ({"option_id": "mode"}, 422, "value is required"),
                ({"value": "plan"}, 422, "option_id is required"),
                ({"option_id": "mode", "value": "plan", "session_id": "nope"}, 404,
                 "session not found"),
            ]:
                resp = await ctl.post("/api/v1/session/option", body)
                assert resp.status_code == status, (body, resp.text)
                assert error in resp.json()["error"]
            # One the agent does not offer: the agent's adapter refuses it, nothing sent.
            resp = await ctl.post("/api/v1/session/option",
                                  {"option_id": "mode", "value": "warp"})
            assert resp.status_code == 422, resp.text
            resp = await ctl.post("/api/v1/session/option",
                                  {"option_id": "mode", "value": "plan", "session_id": sid})
            assert resp.status_code == 200, resp.text
            assert resp.json() == {"success": True, "option_id": "mode", "value": "plan",
                                   "applied": "now"}
            # The session's offer came first (mode default); the change follows it.
            seen: list[dict[str, Any]] = []
            await next_frame(ws, lambda f: f.get("type") == "OptionsChanged" and any(
                o["id"] == "mode" and o["current"] == "plan" for o in f["options"]),
                seen=seen)
            offers = [f for f in seen if f.get("type") == "OptionsChanged"]
            assert len(offers) == 2, json.dumps(offers)[:800]
            assert "mode=plan" in await _said(ctl, ws, {"text": "/options"})
