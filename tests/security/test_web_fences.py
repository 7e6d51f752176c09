"""The web fences of issue 27 (items 4 and 6), each tried as the attack.

- DNS rebinding: a request naming another Host reaches nothing, page,
  unauthenticated routes and WebSocket (both of its paths) included;
- a file an agent drops into web/static after the start is not served, and
  every answer carries ``nosniff`` and a CSP;
- a peer that keeps guessing tokens is throttled (429, Retry-After) and
  logged without what it offered;
- a short token is refused at the start.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from pathlib import Path

import httpx
import pytest
import trio

from supervisor.config import Config, ConfigError, Limits
from tests.support.server import TOKEN, Server, running_server
from tests.support.serverproc import server_process
from web.app import WEB_DIR
from web.auth import bearer_subprotocol
from web.cli import main
from web.guard import FailureThrottle, HostCheck, host_name

EVIL = "evil.example"


def _upgrade(host: str, *, token: str = TOKEN) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Protocol: turnvisor, "
            f"{bearer_subprotocol(token)}\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n").encode()


async def _exchange(srv: Server, *requests: bytes) -> list[bytes]:
    """Each request on one connection in turn; the head (and a short body) of each answer."""
    stream = await trio.open_tcp_stream("127.0.0.1", int(srv.url.rsplit(":", 1)[1]))
    answers = []
    async with stream:
        for req in requests:
            await stream.send_all(req)
            data = b""
            with trio.fail_after(10):
                while b"\r\n\r\n" not in data:
                    chunk = await stream.receive_some(65536)
                    assert chunk, data
                    data += chunk
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(rest) < length:
                    rest += await stream.receive_some(65536)
            answers.append(head + b"\r\n\r\n" + rest)
    return answers


def test_host_names_and_the_allow_list() -> None:
    assert host_name("LocalHost:8080") == "localhost"
    assert host_name("[::1]:8080") == "::1"
    assert host_name("example.lan.") == "example.lan"
    assert host_name("") is None and host_name(None) is None
    check = HostCheck("127.0.0.1", ["turnvisor.lan"])
    for ok in ("127.0.0.1:1234", "localhost", "[::1]:80", "turnvisor.lan:9", "TURNVISOR.LAN"):
        assert check.refusal(ok) is None, ok
    for bad in (f"{EVIL}:8080", EVIL, "127.0.0.1.evil.example", "localhost.evil.example",
                "10.0.0.5:8080", "", None, "turnvisor.lan.evil.example"):
        refusal = check.refusal(bad)
        assert refusal is not None and "allowed_hosts" in refusal, bad
    # Bound to every interface: any address literal (no DNS, no rebinding), still no name.
    wide = HostCheck("0.0.0.0")
    assert wide.refusal("192.168.1.20:8080") is None and wide.refusal("[fe80::1]") is None
    assert wide.refusal(f"{EVIL}:8080") is not None


async def test_a_rebinding_host_reaches_nothing(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data", allowed_hosts=("turnvisor.lan",)) as srv:
        port = srv.url.rsplit(":", 1)[1]
        evil = f"{EVIL}:{port}"
        async with httpx.AsyncClient(base_url=srv.url, timeout=10) as h:
            for path in ("/", f"/?token={TOKEN}", "/tasks/x", "/api/v1/health",
                         "/static/app.js", "/api/v1/tasks", "/api/v1/boot", "/nothing"):
                r = await h.get(path, headers={"Host": evil, **srv.auth})
                assert r.status_code == 421, (path, r.status_code)
                assert "allowed_hosts" in r.text and TOKEN not in r.text
                assert r.headers["x-content-type-options"] == "nosniff"
            r = await h.post("/api/v1/tasks", json={"title": "x"}, headers={"Host": evil,
                                                                          **srv.auth})
            assert r.status_code == 421
            for good in (f"localhost:{port}", f"127.0.0.1:{port}", f"turnvisor.lan:{port}"):
                r = await h.get("/api/v1/health", headers={"Host": good})
                assert r.status_code == 200, good
            assert (await h.get("/api/v1/tasks", headers=srv.auth)).json()["tasks"] == []
        # The WebSocket, on a fresh connection (web.front) ...
        (answer,) = await _exchange(srv, _upgrade(evil))
        assert answer.startswith(b"HTTP/1.1 421"), answer
        # ... and on a reused one (claimed from Hypercorn: the same path).
        health = f"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        first, second = await _exchange(srv, health, _upgrade(evil))
        assert first.startswith(b"HTTP/1.1 200") and second.startswith(b"HTTP/1.1 421"), second
        # The right Host still upgrades on both.
        (answer,) = await _exchange(srv, _upgrade(f"127.0.0.1:{port}"))
        assert answer.startswith(b"HTTP/1.1 101"), answer
        first, second = await _exchange(srv, health, _upgrade(f"localhost:{port}"))
        assert second.startswith(b"HTTP/1.1 101"), second


async def test_a_file_dropped_into_static_after_the_start_is_not_served(tmp_path: Path) -> None:
    dropped = WEB_DIR / "static" / "dropped-by-an-agent.html"
    async with running_server(tmp_path / "data") as srv, \
            httpx.AsyncClient(base_url=srv.url, timeout=10) as h:
        try:
            dropped.write_text("<script>fetch('/api/v1/tasks')</script>")
            r = await h.get("/static/dropped-by-an-agent.html")
            assert r.status_code == 404, r.status_code
            assert "fetch" not in r.text
        finally:
            dropped.unlink(missing_ok=True)
        r = await h.get("/static/app.js")
        assert r.status_code == 200 and "javascript" in r.headers["content-type"]
        assert r.content == (WEB_DIR / "static" / "app.js").read_bytes()
        again = await h.get("/static/app.js", headers={"If-None-Match": r.headers["etag"]})
        assert again.status_code == 304 and again.content == b""


async def test_every_answer_has_nosniff_and_a_csp(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv, \
            httpx.AsyncClient(base_url=srv.url, timeout=10) as h:
        answers = [
            await h.get("/"), await h.get("/tasks/x"), await h.get("/static/app.js"),
            await h.get("/static/app.css"), await h.get("/static/favicon.svg"),
            await h.get("/static/nothing.js"), await h.get("/nothing"),
            await h.get("/api/v1/health"), await h.get("/api/v1/tasks"),
            await h.get("/api/v1/tasks", headers=srv.auth),
            await h.post("/api/v1/tasks", content=b"{bad", headers=srv.auth),
        ]
        for r in answers:
            where = (r.request.method, r.request.url.path, r.status_code)
            assert r.headers.get("x-content-type-options") == "nosniff", where
            csp = r.headers.get("content-security-policy", "")
            assert "frame-ancestors 'none'" in csp, where
            if not r.headers["content-type"].startswith("text/html"):
                assert csp.startswith("default-src 'none'"), where
        page = answers[0].headers["content-security-policy"]
        for part in ("object-src 'none'", "base-uri 'none'", "form-action 'none'",
                     "script-src 'self'"):
            assert part in page, page


def test_the_throttle_counts_per_peer_in_a_window_and_forgets() -> None:
    t = FailureThrottle(limit=3, window_s=60, max_peers=4)
    assert not t.failed("a", 0) and not t.failed("a", 1)
    assert t.retry_after("a", 1) is None
    assert t.failed("a", 2)  # the third: blocked from now on
    assert t.retry_after("a", 2) == 58
    assert t.retry_after("b", 2) is None  # another peer is not concerned
    assert t.retry_after("a", 60) is None  # the window is over
    assert not t.failed("a", 61)
    for i in range(10):
        t.failed(f"peer-{i}", 62)
    assert len(t) == 4  # bounded: the oldest are forgotten


async def test_a_guessing_peer_is_throttled_and_logged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """(The window's end: the throttle's own test, with the time given.)"""
    guess = "a-guessed-token-0123456789abcdef-0123456789"
    caplog.set_level(logging.WARNING, logger="web.app")
    async with running_server(tmp_path / "data", limits=Limits(auth_failures_per_peer=3),
                              timeouts={"auth_failure_window_s": 60}) as srv, \
            httpx.AsyncClient(base_url=srv.url, timeout=10) as h:
        bad = {"Authorization": f"Bearer {guess}"}
        for _ in range(3):
            assert (await h.get("/api/v1/tasks", headers=bad)).status_code == 401
        # Blocked now: every further wrong token, on both paths.
        r = await h.get("/api/v1/tasks", headers=bad)
        assert r.status_code == 429, r.text
        assert r.headers["retry-after"] == "60"
        (answer,) = await _exchange(srv, _upgrade(srv.url.removeprefix("http://"),
                                                  token=guess))
        assert answer.startswith(b"HTTP/1.1 429") and b"retry-after: 60" in answer.lower()
        # The right token still passes: whoever shares the user's address (a
        # page on another local port) cannot lock the user out by guessing.
        assert (await h.get("/api/v1/tasks", headers=srv.auth)).status_code == 200
        # The page and health need no token and are not throttled.
        assert (await h.get("/")).status_code == 200
        assert (await h.get("/api/v1/health")).status_code == 200
    failures = [r for r in caplog.records if r.name == "web.app"
                and r.levelno == logging.WARNING]
    assert len(failures) == 3, [r.getMessage() for r in failures]
    assert all("127.0.0.1" in r.getMessage() and "/api/v1/tasks" in r.getMessage()
               for r in failures)
    assert "too many" in failures[-1].getMessage()
    assert not any(guess in r.getMessage() or TOKEN in r.getMessage() for r in caplog.records)


def test_short_tokens_are_refused_at_the_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("TURNVISOR_TOKEN", "a")
    assert main(["serve", "--port", "0", "--data-dir", str(data)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "TURNVISOR_TOKEN" in err[0] and "32" in err[0], err
    monkeypatch.delenv("TURNVISOR_TOKEN")
    (data / "token").write_text("short\n")
    assert main(["serve", "--port", "0", "--data-dir", str(data)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "token" in err[0], err
    (data / "token").unlink()
    (data / "turnvisor.toml").write_text('[workspaces.b]\ntoken = "0123456789abcdef"\n')
    assert main(["serve", "--port", "0", "--data-dir", str(data)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[workspaces.b]" in err[0] and "32" in err[0], err
    with pytest.raises(ConfigError):
        Config.from_mapping(data, {"server": {"allowed_hosts": "not-a-list"}})
    with pytest.raises(ConfigError):
        Config.from_mapping(data, {"server": {"allowed": []}})


async def test_the_token_is_printed_to_no_pipe_and_the_data_dir_is_private(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    (data / "turnvisor.toml").write_text("")
    os.chmod(data / "turnvisor.toml", 0o644)
    # (server_process reads a pipe: it finds the token in server.json, the
    # line carrying none; tests/support/serverproc.parse_listening.)
    with trio.fail_after(40):
        async with server_process(data) as srv:
            async with httpx.AsyncClient(base_url=srv.url, headers=srv.auth) as h:
                assert (await h.post("/api/v1/tasks", json={"title": "t"})).status_code == 201
            info = json.loads((data / "server.json").read_text())
            assert info["url"] == srv.url and info["token"] == srv.token
            assert info["pid"] == srv.proc.pid
            assert (data.stat().st_mode & 0o777) == 0o700
            for name in ("server.json", "turnvisor.toml", "turnvisor.db", "turnvisor.db-wal",
                         "turnvisor.db-shm"):
                path = data / name
                assert path.exists(), name
                assert (path.stat().st_mode & 0o777) == 0o600, (name, oct(path.stat().st_mode))
