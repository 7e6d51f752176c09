"""Page routes answer people in HTML (issue 16): a 404 page for unknown pages, the app's shell
for its own (its script tells an unknown task or a missing token: tests/browser); /api keeps its
JSON errors. Plus which agent profiles can start
(the picker's availability) and the tool-call fields kept for the cards."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

from supervisor.profiles import AgentProfile
from supervisor.turn.tool_details import MAX_FIELD_CHARS, finished_stamp, tool_details
from tests.support.server import running_server
from web.pages import agent_availability

from .support import assert_no_traceback, http


async def test_unknown_pages_get_an_html_404_and_the_api_keeps_json(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv, http(srv) as h:
        for path in ("/no-such-page", "/tasks/unknown/more"):
            r = await h.get(path)
            assert r.status_code == 404, path
            assert r.headers["content-type"].startswith("text/html"), path
            assert "Page not found" in r.text and 'href="/"' in r.text
            assert "unknown" not in r.text.replace("<!doctype", "")  # nothing echoed
            assert_no_traceback(r.text)
        for path in ("/api/v1/tasks/unknown/boot", "/api/v1/boot?task=unknown"):
            r = await h.get(path)
            assert r.status_code == 404
            assert r.json()["error"]["code"] == "NOT_FOUND"
        r = await h.get("/api/v1/nothing-here")
        assert r.headers["content-type"].startswith("application/json")


async def test_pages_are_a_shell_without_a_token(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv, \
            httpx.AsyncClient(base_url=srv.url, timeout=15) as anon:
        shells = set()
        for path in ("/", "/tasks/whatever", "/?token=wrong-token-0123456789"):
            r = await anon.get(path)
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/html")
            assert '<script type="module" src="/static/app.js">' in r.text
            assert "set-cookie" not in r.headers
            csp = r.headers["content-security-policy"]
            for part in ("script-src 'self'", "object-src 'none'", "base-uri 'none'",
                         "form-action 'none'", "frame-ancestors 'none'"):
                assert part in csp, (part, csp)
            shells.add(r.text)
        assert len(shells) == 1  # the same bytes whatever the address: no data in it
        r = await anon.get("/api/v1/tasks")
        assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHORIZED"
        r = await anon.get("/static/favicon.svg")
        assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg")


def test_agent_availability_follows_the_program_on_path(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "fake-agent"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    profiles = {
        "here": AgentProfile(name="here", protocol="acp", command=("fake-agent",)),
        "gone": AgentProfile(name="gone", protocol="acp", command=("no-such-agent-cli",)),
        "py": AgentProfile(name="py", protocol="acp", command=(sys.executable, "-m", "x")),
        "far": AgentProfile(name="far", protocol="acp", command=("nowhere",),
                            executor="agentctl", agentctl_url="http://127.0.0.1:1"),
    }
    got = agent_availability(profiles, {"PATH": str(tool.parent)})
    assert got["here"] == {"available": True, "reason": None}
    assert got["py"]["available"] is True
    assert got["far"]["available"] is True  # only the remote side knows
    assert got["gone"]["available"] is False
    assert "no-such-agent-cli" in got["gone"]["reason"]


def test_tool_details_keep_the_card_fields_bounded() -> None:
    acp = {"sessionUpdate": "tool_call", "toolCallId": "t", "title": "Edit", "kind": "edit",
           "status": "pending", "rawInput": {"file_path": "a.py"},
           "content": [{"type": "diff", "path": "a.py", "oldText": "x", "newText": "y"}],
           "locations": [{"path": "a.py", "line": 1}]}
    kept = tool_details(acp)
    assert set(kept) == {"rawInput", "content", "locations"}
    codex = {"type": "commandExecution", "id": "i", "command": "ls", "status": "completed",
             "aggregatedOutput": "x" * (MAX_FIELD_CHARS + 10), "exitCode": 0}
    kept = tool_details(codex)
    assert kept["command"] == "ls" and kept["exitCode"] == 0
    assert len(kept["aggregatedOutput"]) < MAX_FIELD_CHARS + 100
    assert kept["aggregatedOutput"].endswith("(truncated)")
    assert tool_details(None) == {}
    assert "finished_at" in finished_stamp({}, "completed")
    assert finished_stamp({"finished_at": "t"}, "completed") == {}
    assert finished_stamp({}, "in_progress") == {}
