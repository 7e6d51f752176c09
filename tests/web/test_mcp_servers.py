"""``[mcp_servers]`` reach the real mock agent through a real server, in every dialect
(DESIGN.md §19): ``/mcp`` lists what the session was given, for a profile a server applies
to and not for another; the stdio server runs as the agent's own child and is stopped with
it; an SSE server (which the mock does not advertise) fails the session's launch with one
line naming it."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
import trio

from supervisor.mcp_servers import parse_mcp_servers
from supervisor.profiles import BUILTIN_PROFILES
from tests.support.server import running_server
from tests.support.ws import WsClient, ws_client

from .support import launch, new_task

DIALECTS = ["mock", "mock-codex", "mock-acp2"]
SLEEP = shutil.which("sleep") or "/bin/sleep"


async def _turn_text(ws: WsClient, sid: str, prompt: str) -> str:
    answer = await ws.call("message.add", {"session_id": sid, "content": prompt})
    turn_id = answer["turn_id"]
    await ws.wait_for(lambda f: f["action"] == "session.turn.completed"
                      and f["payload"]["turn_id"] == turn_id)
    msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
    return "".join(m["content"] for m in msgs if m["turn_id"] == turn_id and m["role"] == "agent")


def _running(argv: list[str]) -> list[int]:
    """The host's live processes running ``argv`` (the pid the mock says is its sandbox's
    pid namespace's, not the host's): found by their command line."""
    want = "\0".join(argv).encode() + b"\0"
    pids: list[int] = []
    for proc in Path("/proc").iterdir():
        try:
            if (proc / "cmdline").read_bytes() != want:
                continue
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone meanwhile, or not a process
        if state != "Z":  # a zombie has ended too
            pids.append(int(proc.name))
    return pids


@pytest.mark.parametrize("agent", DIALECTS)
async def test_mcp_lists_the_servers_of_its_profile(tmp_path: Path, agent: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    other = "mock" if agent != "mock" else "mock-acp2"
    # A duration no other process has: the server is found by its command line.
    argv = [SLEEP, f"300.{uuid.uuid4().int % 10**9}"]
    servers = parse_mcp_servers({
        "tools": {"command": argv, "profiles": [agent]},
        "docs": {"type": "http", "url": "http://127.0.0.1:9/mcp", "profiles": [agent],
                 "headers": {"X-Token": "t"}},
    }, data, BUILTIN_PROFILES)
    with trio.fail_after(60):
        async with running_server(data, mcp_servers=servers) as srv, ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, agent)
            await ws.call("session.subscribe", {"session_id": sid})
            said = await _turn_text(ws, sid, "/mcp")
            assert f"tools stdio {' '.join(argv)} (pid " in said, said
            assert "docs http http://127.0.0.1:9/mcp" in said, said
            # The agent started it, as its own child: it runs while the agent does.
            assert len(_running(argv)) == 1
            # Another profile's session gets none of them.
            sid2 = await launch(ws, task_id, other)
            await ws.call("session.subscribe", {"session_id": sid2})
            assert await _turn_text(ws, sid2, "/mcp") == "mcp: none"
        # The server stopped, its agents with it: the MCP server went with its agent.
        with trio.fail_after(10):
            while _running(argv):
                await trio.sleep(0.05)


@pytest.mark.parametrize("agent", DIALECTS)
async def test_an_sse_server_fails_the_launch_naming_it(tmp_path: Path, agent: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    servers = parse_mcp_servers({
        "events": {"type": "sse", "url": "http://127.0.0.1:9/sse", "profiles": [agent]},
    }, data, BUILTIN_PROFILES)
    with trio.fail_after(40):
        async with running_server(data, mcp_servers=servers) as srv, ws_client(srv) as ws:
            task_id = await new_task(ws)
            err = await ws.request("session.launch", {"task_id": task_id, "agent": agent})
            assert err["type"] == "error", err
            message = err["payload"]["message"]
            assert "MCP server 'events' is sse, which" in message, message
            assert "does not take" in message and "\n" not in message, message
