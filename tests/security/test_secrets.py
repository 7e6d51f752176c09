"""The token stays secret (issue 8, item 3): never in a log record, an error
message or a response body, never in an agent's environment; no cookie is
ever set, and the ``?token=`` the page's script takes leaves the URL
at once."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import trio

from supervisor.profiles import BUILTIN_PROFILES, AgentProfile
from tests.support.server import OTHER_TOKEN, TOKEN, running_server
from tests.support.ws import ws_client

WEIRD_AGENT = Path(__file__).resolve().parents[1] / "faults" / "weird_agent.py"
CLIENT_LOGGERS = {"httpx", "httpcore", "trio-websocket", "trio_websocket"}
WRONG = ["wrong-token-0123456789abcdef", TOKEN[:-2] + "zz", TOKEN + "-suffix"]


class _Everything(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.split(".")[0] in CLIENT_LOGGERS:
            return  # the test's own HTTP/WebSocket clients, which do log URLs
        self.lines.append(self.format(record))  # includes exc_info / stack when present


@contextmanager
def all_logs() -> Iterator[_Everything]:
    """Every record of every logger at DEBUG, the server's and Hypercorn's included."""
    handler = _Everything()
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(old)


async def test_the_token_is_in_no_log_and_no_answer(tmp_path: Path) -> None:
    """A busy session that exercises every logging path we have — page login
    with ``?token=``, wrong tokens everywhere, bad input, an agent that floods
    stderr, crashes, hangs and is escalated, a client that vanishes — and then
    not one log line, response or frame holds the token or a wrong one."""
    answers: list[str] = []
    with trio.fail_after(90), all_logs() as logs:
        async with running_server(tmp_path / "data", workspaces={"b": OTHER_TOKEN},
                                  timeouts={"cancel_join_s": 0.3, "cancel_escalate_s": 1.0,
                                            "term_grace_s": 0.3}) as srv:
            async with httpx.AsyncClient(base_url=srv.url) as h:
                r = await h.get("/", params={"token": TOKEN, "x": "1"})
                answers.append(r.text + json.dumps(dict(r.headers)))
                for bad in WRONG:
                    for path, headers in (
                            (f"/?token={bad}", {}),
                            ("/api/v1/tasks", {"Authorization": f"Bearer {bad}"}),
                            ("/api/v1/tasks", {"Cookie": f"turnvisor_token={bad}"}),
                            (f"/ws?token={bad}", {})):
                        r = await h.get(path, headers=headers)
                        answers.append(r.text + json.dumps(dict(r.headers)))
                r = await h.post("/api/v1/tasks", content=b"{bad",
                                 headers={"Authorization": f"Bearer {TOKEN}"})
                answers.append(r.text)
            async with ws_client(srv) as ws:
                task = (await ws.call("task.create", {"title": "logs"}))["id"]
                sid = (await ws.call("session.launch", {"task_id": task}))["id"]
                await ws.call("session.subscribe", {"session_id": sid})
                for prompt in ("/stderr 64", "/garbage", "/crash", "/hang"):
                    await ws.call("message.add", {"session_id": sid, "content": prompt})
                    await trio.sleep(0.3)
                    await ws.request("agent.cancel", {"session_id": sid})
                await ws.send_raw("{not json")
                await ws.request("agent.cancel", {"session_id": TOKEN})
                await ws.request("task.create", {"title": "x" * 600})
                await trio.sleep(0.2)
                answers += [json.dumps(f) for f in ws.notifications]
    text = "\n".join(logs.lines)
    assert len(logs.lines) > 10, "the capture saw nothing: is it wired?"
    assert "escalating cancel" in text, "the hang was not escalated: a log path not taken"
    for secret in (TOKEN, OTHER_TOKEN, *WRONG):
        assert secret not in text, [line for line in logs.lines if secret in line][:3]
    for answer in answers:
        for secret in (OTHER_TOKEN, *WRONG):
            assert secret not in answer, answer[:300]
        # The real token may appear only where the client itself put it.
        assert TOKEN not in answer.replace(f'"session_id": "{TOKEN}"', ""), answer[:300]


async def test_agents_do_not_inherit_the_token(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``turnvisor serve`` reads TURNVISOR_TOKEN from its environment; an agent
    (which runs shell commands for a model provider) must not see it."""
    monkeypatch.setenv("TURNVISOR_TOKEN", TOKEN)
    profiles = {**BUILTIN_PROFILES, "weird": AgentProfile(
        name="weird", protocol="acp",
        command=(sys.executable, str(WEIRD_AGENT), "--protocol", "acp")),
        "weird-env": AgentProfile(
        name="weird-env", protocol="acp", env={"EXTRA": "1"},
        command=(sys.executable, str(WEIRD_AGENT), "--protocol", "acp"))}
    with trio.fail_after(60):
        async with running_server(tmp_path / "data", profiles=profiles) as srv, \
                ws_client(srv) as ws:
            task = (await ws.call("task.create", {"title": "env"}))["id"]
            for agent in ("weird", "weird-env"):
                sid = (await ws.call("session.launch", {"task_id": task, "agent": agent}))["id"]
                await ws.call("session.subscribe", {"session_id": sid})
                for name in ("TURNVISOR_TOKEN", "PATH"):
                    mark = len(ws.notifications)
                    await ws.call("message.add", {"session_id": sid, "content": f"/env {name}"})
                    await ws.wait_for(lambda f: f["action"] == "session.turn.completed",
                                      after=mark)
                msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
                said = [m["content"] for m in msgs if m["role"] == "agent"]
                assert "TURNVISOR_TOKEN=<unset>" in said, said
                assert any(s.startswith("PATH=/") for s in said), said  # the rest is inherited
                assert all(TOKEN not in s for s in said)


async def test_no_cookie_is_set_and_the_page_holds_no_token(tmp_path: Path) -> None:
    """No answer sets a cookie (none would be a credential anyway), and the
    page, with or without ``?token=``, is the same shell without the token."""
    async with running_server(tmp_path / "data") as srv, \
            httpx.AsyncClient(base_url=srv.url) as h:
        for path in ("/", "/tasks/some-task"):
            r = await h.get(path, params={"token": TOKEN, "session": "s"})
            assert r.status_code == 200, r.status_code
            assert "set-cookie" not in r.headers
            assert TOKEN not in r.text, "the page must not embed the token"
            assert "no-store" in r.headers.get("cache-control", "")
        r = await h.get("/api/v1/tasks", headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200 and "set-cookie" not in r.headers
