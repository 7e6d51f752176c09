"""The agentctl API itself: a real agentctl process on loopback, the mock agent behind it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio
from agentctl_support import (
    AgentctlFactory,
    environ,
    group_pids,
    next_frame,
    wait_group_gone,
)

from web.agentctl.host import EventLog
from web.cli import main


def _is(kind: str, turn: str | None = None) -> Any:
    return lambda f: f.get("type") == kind and (turn is None or f.get("turn") == turn)


async def test_auth(agentctl: AgentctlFactory) -> None:
    with trio.fail_after(30):
        async with agentctl() as ctl:
            health = await ctl.http.get("/api/v1/health")
            assert (health.status_code, health.json()) == (200, {"status": "ok"})
            for headers in ({}, {"Authorization": "Bearer wrong-token"},
                            {"Authorization": f"Basic {ctl.token}"}):
                for method, path in (("GET", "/api/v1/status"), ("POST", "/api/v1/acp/cancel"),
                                     ("POST", "/api/v1/acp/subagent_cancel"),
                                     ("POST", "/api/v1/prompt"), ("POST", "/api/v1/session")):
                    resp = await ctl.http.request(method, path, headers=headers)
                    assert resp.status_code == 401, (method, path, headers)
                    assert resp.json()["success"] is False
            # The event stream's handshake, refused (a raw upgrade request).
            upgrade = {"Connection": "Upgrade", "Upgrade": "websocket",
                       "Sec-WebSocket-Version": "13",
                       "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
            for extra, code in (({}, 401), ({"Authorization": "Bearer wrong-token"}, 401),
                                ({**ctl.auth, "Origin": "http://evil.example"}, 403)):
                # A connection each: Hypercorn does not keep one alive after a refusal.
                async with httpx.AsyncClient(base_url=ctl.url) as fresh:
                    resp = await fresh.get("/api/v1/events", headers={**upgrade, **extra})
                assert resp.status_code == code, (extra, resp.status_code)
            # Nothing was started by the refused calls.
            status = await ctl.status()
            assert status["session_id"] is None and status["turn"] is None


async def test_cancel_success_and_event_stream(agentctl: AgentctlFactory) -> None:
    with trio.fail_after(30):
        async with agentctl() as ctl, ctl.events() as ws:
            hello = json.loads(await ws.get_message())
            assert hello["type"] == "Hello"
            session = await ctl.post("/api/v1/session", {"owner": "me"})
            assert session.status_code == 200, session.text
            sid = session.json()["session_id"]
            resp = await ctl.post("/api/v1/prompt", {"text": "/delay 5000", "session_id": sid})
            assert resp.status_code == 202, resp.text
            turn = resp.json()["turn_id"]
            seen: list[dict[str, Any]] = []
            await next_frame(ws, _is("MessageChunk", turn), seen=seen)
            started = trio.current_time()
            cancel = await ctl.post("/api/v1/acp/cancel", {"session_id": sid})
            took = trio.current_time() - started
            body = cancel.json()
            assert cancel.status_code == 200, body
            assert body["success"] is True and body["acknowledged"] is True
            assert body["stop_reason"] == "cancelled" and body["turn_id"] == turn
            assert took < 1.0, f"cancel through agentctl took {took:.3f}s"
            ended = await next_frame(ws, _is("TurnEnded", turn), seen=seen)
            assert ended["stop_reason"] == "cancelled"
            # Ordered and numbered without holes.
            numbered = [f["seq"] for f in seen if "seq" in f]
            assert numbered == list(range(numbered[0], numbered[0] + len(numbered)))
            # Idle: a cancel is a no-op success; the next prompt works.
            idle = await ctl.post("/api/v1/acp/cancel")
            assert idle.json() == {"success": True, "turn_running": False}
            again = await ctl.post("/api/v1/prompt", {"text": "hello again"})
            assert again.status_code == 202
            done = await next_frame(ws, _is("TurnEnded", again.json()["turn_id"]))
            assert done["stop_reason"] == "end_turn"
            # A session that is not the agent's: 404, as the spec's "session not found".
            other = await ctl.post("/api/v1/acp/cancel", {"session_id": "nope"})
            assert other.status_code == 404
            assert other.json()["error"] == "session not found"


async def test_not_acknowledged(agentctl: AgentctlFactory) -> None:
    with trio.fail_after(30):
        async with agentctl("acp", "--cancel-join", "0.3") as ctl, ctl.events() as ws:
            await ctl.post("/api/v1/session")
            turn = (await ctl.post("/api/v1/prompt", {"text": "/slow 3000"})).json()["turn_id"]
            await next_frame(ws, _is("MessageChunk", turn))
            started = trio.current_time()
            cancel = await ctl.post("/api/v1/acp/cancel")
            took = trio.current_time() - started
            body = cancel.json()
            assert cancel.status_code == 202, body
            assert body["success"] is False and body["not_acknowledged"] is True
            assert body["error"] and body["turn_id"] == turn
            assert 0.3 <= took < 1.5
            # A running turn refuses a second prompt; the cancel stays in flight and
            # the agent ends the turn once its /slow time has passed.
            busy = await ctl.post("/api/v1/prompt", {"text": "x"})
            assert busy.status_code == 409
            ended = await next_frame(ws, _is("TurnEnded", turn), timeout=10)
            assert ended["stop_reason"] == "cancelled"
            # join_s from the request wins over the default; 0 = just send it.
            turn2 = (await ctl.post("/api/v1/prompt", {"text": "/slow 1000"})).json()["turn_id"]
            await next_frame(ws, _is("MessageChunk", turn2))
            sent = await ctl.post("/api/v1/acp/cancel", {"join_s": 0})
            assert sent.status_code == 200
            assert sent.json()["success"] is True and sent.json()["acknowledged"] is False
            bad = await ctl.post("/api/v1/acp/cancel", {"join_s": -1})
            assert bad.status_code == 422


async def test_no_agent_is_503_and_a_session_restarts_it(agentctl: AgentctlFactory) -> None:
    with trio.fail_after(30):
        async with agentctl() as ctl, ctl.events() as ws:
            await ctl.post("/api/v1/session")
            pgid = (await ctl.status())["agent"]["pid"]
            turn = (await ctl.post("/api/v1/prompt", {"text": "/crash"})).json()["turn_id"]
            ended = await next_frame(ws, _is("TurnEnded", turn))
            assert ended["stop_reason"] == "error"
            exited = await next_frame(ws, _is("AgentExited"))
            assert exited["returncode"] == 1
            await wait_group_gone(pgid)
            for path, body in (("/api/v1/acp/cancel", {}), ("/api/v1/prompt", {"text": "x"}),
                               ("/api/v1/permission", {"request_id": "r", "option_id": None})):
                resp = await ctl.post(path, body)
                assert resp.status_code == 503, path
                assert resp.json()["success"] is False
                assert resp.json()["error"] == "agent not running"
            status = await ctl.status()
            assert status["agent"]["state"] == "exited"
            # A new session starts a new agent (still exactly one).
            session = await ctl.post("/api/v1/session")
            assert session.status_code == 200, session.text
            status = await ctl.status()
            assert status["agents_started"] == 2 and status["agent"]["state"] == "ready"
            turn = (await ctl.post("/api/v1/prompt", {"text": "hi"})).json()["turn_id"]
            assert (await next_frame(ws, _is("TurnEnded", turn)))["stop_reason"] == "end_turn"


async def test_session_owner_attach_conflict_and_takeover(agentctl: AgentctlFactory) -> None:
    with trio.fail_after(30):
        async with agentctl("codex") as ctl:
            first = (await ctl.post("/api/v1/session", {"owner": "a"})).json()
            again = (await ctl.post("/api/v1/session", {"owner": "a"})).json()
            assert again["attached"] is True and again["session_id"] == first["session_id"]
            async with ctl.events(owner="a"):
                # "a" is connected: another owner (or none) is refused.
                for body in ({"owner": "b"}, {}):
                    other = await ctl.post("/api/v1/session", body)
                    assert other.status_code == 409 and other.json()["owner"] == "a"
            # "a" went away: "b" takes the agent over, with a fresh agent and session.
            taken = await ctl.post("/api/v1/session", {"owner": "b"})
            assert taken.status_code == 200 and taken.json()["attached"] is False
            assert taken.json()["session_id"] != first["session_id"]
            replaced = await ctl.post("/api/v1/session", {"owner": "b", "replace": True})
            assert replaced.status_code == 200
            assert replaced.json()["session_id"] != taken.json()["session_id"]
            assert (await ctl.status())["agents_started"] == 3


async def test_reconnect_replays_from_seq(agentctl: AgentctlFactory) -> None:
    with trio.fail_after(30):
        async with agentctl() as ctl:
            await ctl.post("/api/v1/session")
            async with ctl.events() as ws:
                hello = json.loads(await ws.get_message())
                turn = (await ctl.post("/api/v1/prompt", {"text": "one two three"})).json()
                live: list[dict[str, Any]] = []
                await next_frame(ws, _is("TurnEnded", turn["turn_id"]), seen=live)
            mark = hello["last_seq"]
            async with ctl.events(after=mark) as ws:
                assert json.loads(await ws.get_message())["type"] == "Hello"
                replayed = [json.loads(await ws.get_message()) for _ in live]
            assert replayed == live
            assert replayed[0]["seq"] == mark + 1


async def test_agent_group_gone_after_agentctl_exits(agentctl: AgentctlFactory) -> None:
    with trio.fail_after(30):
        async with agentctl() as ctl:
            await ctl.post("/api/v1/session")
            graceful = (await ctl.status())["agent"]["pid"]
            await ctl.post("/api/v1/prompt", {"text": "/delay 5000"})
            # The launcher and the agent, and neither holds agentctl's token.
            pids = group_pids(graceful)
            assert graceful in pids and len(pids) >= 2
            for pid in pids:
                env = environ(pid)
                assert ctl.token.encode() not in env
                assert b"TURNVISOR_AGENTCTL_TOKEN=" not in env
        # agentctl got SIGTERM (the fixture's teardown): it stopped its agent.
        await wait_group_gone(graceful, timeout=5)
        async with agentctl() as ctl:
            await ctl.post("/api/v1/session")
            killed = (await ctl.status())["agent"]["pid"]
            await ctl.post("/api/v1/prompt", {"text": "/hang"})
            ctl.kill()
            # SIGKILL: nothing in agentctl runs; the launcher's lifeline kills the group.
            await wait_group_gone(killed, timeout=5)


def test_event_log_bounded_fan_out_and_replay() -> None:
    log = EventLog(buffer=3, replay=5)
    fast, _, _ = log.subscribe(None)
    slow, _, _ = log.subscribe(None)
    for i in range(4):
        log.publish({"type": "AgentNotice", "message": str(i)}, turn=None)
        if i < 3:
            fast.receive.receive_nowait()
    # The slow one had room for 3: dropped at the 4th, with a reason naming its last seq.
    assert slow.dropped is not None and "?after=3" in slow.dropped
    assert slow not in log.subscribers and fast in log.subscribers
    assert [json.loads(slow.receive.receive_nowait())["seq"] for _ in range(3)] == [1, 2, 3]
    with pytest.raises(trio.EndOfChannel):
        slow.receive.receive_nowait()
    for i in range(4, 8):
        log.publish({"type": "AgentNotice", "message": str(i)}, turn=None)
    # Replay keeps 5 (seq 4..8): asking for after=1 reports 2..3 as gone.
    _, backlog, gap = log.subscribe(1)
    assert gap == (2, 3)
    assert [json.loads(d)["seq"] for d in backlog] == [4, 5, 6, 7, 8]
    _, backlog, gap = log.subscribe(8)
    assert (backlog, gap) == ([], None)


async def _raw(url: str) -> trio.SocketStream:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return await trio.open_tcp_stream(host, int(port))


async def _to_eof(stream: trio.SocketStream, within_s: float = 5) -> bytes:
    data = b""
    with trio.fail_after(within_s):  # a hang fails
        while chunk := await stream.receive_some(65536):
            data += chunk
    return data


async def test_connections_are_held_to_limits(agentctl: AgentctlFactory) -> None:
    """Issue 27: a refused request's connection closes; an idle connection is
    closed; one address holds at most the bound of connections without the
    token, a new one closing the one idle the longest (issue 40, item 7); the
    event stream, idle for longer than the timeout, stays (it is fed
    heartbeats)."""
    with trio.fail_after(40):
        async with agentctl("acp", "--idle-timeout", "0.5",
                            "--max-connections-per-peer", "3") as ctl, \
                ctl.events() as ws:
            await ws.get_message()  # Hello
            host = ctl.url.removeprefix("http://")
            refused = await _raw(ctl.url)
            await refused.send_all(f"POST /api/v1/prompt HTTP/1.1\r\nHost: {host}\r\n"
                                   "Content-Length: 1000\r\n\r\n{".encode())
            reply = await _to_eof(refused)
            assert reply.startswith(b"HTTP/1.1 401") and b"connection: close" in reply.lower()
            await refused.aclose()
            silent = await _raw(ctl.url)
            assert await _to_eof(silent) == b""
            await silent.aclose()
            # Three connections without the token fill the bound (the event
            # stream carries it: not counted); a fourth is not refused, the one
            # idle the longest is closed (without a word; the others, kept,
            # end with the 408 of their half head).
            await trio.sleep(0.3)  # the fixture's own keep-alive connection timed out
            held = []
            for _ in range(3):
                held.append(await _raw(ctl.url))
                await held[-1].send_all(b"GET /api/v1/health HTTP/1.1\r\n")
                await trio.sleep(0.02)
            over = await _raw(ctl.url)
            await over.send_all(f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n"
                                "Connection: close\r\n\r\n".encode())
            assert (await _to_eof(over)).startswith(b"HTTP/1.1 200")
            assert await _to_eof(held[0]) == b""
            for kept in held[1:]:
                assert (await _to_eof(kept)).startswith(b"HTTP/1.1 408")
            for stream in (over, *held):
                await stream.aclose()
            # Idle well past the timeout, the event stream is alive.
            await trio.sleep(1.0)
            session = await ctl.post("/api/v1/session", {})
            assert session.status_code == 200, session.text
            # ... and still carries the agent's events.
            assert "seq" in await next_frame(ws, lambda f: "seq" in f)


@pytest.mark.parametrize("argv", [
    ["agentctl", "--listen", "127.0.0.1:0"],                      # no agent named
    ["agentctl", "--profile", "mock", "--", "cat"],                # both
    ["agentctl", "--listen", "nope", "--", "cat"],                 # not HOST:PORT
    ["agentctl", "--token", "short", "--", "cat"],                 # token too short
    ["agentctl", "--cwd", "/nonexistent/dir", "--", "cat"],
])
def test_cli_refuses_bad_arguments(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "turnvisor agentctl:" in capsys.readouterr().err


async def test_subagent_cancel_validates_and_says_what_it_sent(agentctl: AgentctlFactory) -> None:
    """``POST /api/v1/acp/subagent_cancel``: a missing id is 422; an unknown child is
    answered with nothing sent (the backend then says why to its client)."""
    with trio.fail_after(30):
        async with agentctl("acp") as ctl:
            await ctl.post("/api/v1/session")
            bad = await ctl.post("/api/v1/acp/subagent_cancel", {})
            assert bad.status_code == 422
            unknown = await ctl.post("/api/v1/acp/subagent_cancel", {"subagent_id": "nope"})
            assert unknown.status_code == 200
            assert unknown.json() == {"success": True, "sent": False, "state": None}
