"""Holding Turnvisor's connections (issue 27, item 7), as an attacker on raw sockets would.

The attacks: send a request whose body the server refuses unread and then
reuse the connection (it hung, and the server's socket sat in CLOSE-WAIT);
ask for ``Connection: close`` (ignored); open connections and send nothing,
half a head, or half a body (never closed); open more connections than
anyone needs (no cap: now a bound on unauthenticated ones, which closes the
one idle the longest rather than refuse anyone; issue 40 item 7, and
test_connection_flood.py for the floods).  Against a real server with short
configured limits.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import httpx
import trio
from trio_websocket import open_websocket_url

from bench.lean_ws import client_frame
from supervisor.config import Limits
from tests.support.server import Server, running_server
from tests.support.ws import ws_client

IDLE_S = 0.5
CAP = 4


def port_of(srv: Server) -> int:
    return int(srv.url.rsplit(":", 1)[1])


async def connect(srv: Server) -> trio.SocketStream:
    return await trio.open_tcp_stream("127.0.0.1", port_of(srv))


async def read_to_eof(stream: trio.SocketStream, within_s: float) -> bytes:
    """Everything until the server closes; a hang fails the test."""
    data = b""
    with trio.fail_after(within_s):
        while True:
            try:
                chunk = await stream.receive_some(65536)
            except trio.BrokenResourceError:  # a reset is a close too
                return data
            if not chunk:
                return data
            data += chunk


def close_wait(port: int) -> int:
    """The server's sockets on ``port`` left in CLOSE-WAIT (peer gone, ours open)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            if int(local.rsplit(":", 1)[1], 16) == port and state == "08":
                count += 1
    return count


def refused_unread(srv: Server) -> dict[str, bytes]:
    """Requests answered before their body is read: the body never comes."""
    host = srv.url.removeprefix("http://")
    bearer = f"Authorization: Bearer {srv.token}\r\n"
    return {
        "401": (f"POST /api/v1/tasks HTTP/1.1\r\nHost: {host}\r\n"
                "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{").encode(),
        "413": (f"POST /api/v1/tasks HTTP/1.1\r\nHost: {host}\r\n{bearer}"
                "Content-Type: application/json\r\nContent-Length: 99999999\r\n\r\n").encode(),
        "404": (f"POST /api/v1/nothing-here HTTP/1.1\r\nHost: {host}\r\n{bearer}"
                "Content-Type: application/json\r\nContent-Length: 500\r\n\r\n").encode(),
        "chunked": (f"POST /api/v1/tasks HTTP/1.1\r\nHost: {host}\r\n"
                    "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "5\r\n{\"ti").encode(),
    }


async def test_a_request_refused_unread_closes_its_connection(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv:
        for name, request in refused_unread(srv).items():
            stream = await connect(srv)
            await stream.send_all(request)
            # The kept-alive client's next request, right behind: never a hang.
            host = srv.url.removeprefix("http://")
            try:
                await stream.send_all(f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n"
                                      .encode())
            except trio.BrokenResourceError:
                pass
            reply = await read_to_eof(stream, 5)
            await stream.aclose()
            if name == "chunked":
                # The next request is read as the body's next chunk: a protocol
                # error (400), or the refusal if the app answered first; or,
                # when Hypercorn hit the error first, a bare close.  Never a hang.
                assert reply == b"" or reply.startswith((b"HTTP/1.1 400", b"HTTP/1.1 401")), reply
                continue
            assert reply.startswith(f"HTTP/1.1 {name}".encode()), (name, reply[:200])
            assert b"connection: close" in reply.lower(), (name, reply[:300])
            # One answer, not a second one to the pipelined request.
            assert reply.count(b"HTTP/1.1 ") == 1, reply
        # Nothing of ours is left open on connections the clients closed.
        with trio.fail_after(5):
            while close_wait(port_of(srv)):
                await trio.sleep(0.05)


async def test_connection_close_is_honoured(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv:
        stream = await connect(srv)
        host = srv.url.removeprefix("http://")
        await stream.send_all(f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n"
                              "Connection: close\r\n\r\n".encode())
        # Closed right after the answer (the keep-alive timer is a minute).
        reply = await read_to_eof(stream, 2)
        assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b'{"status": "ok"}')
        await stream.aclose()


async def test_idle_connections_are_closed(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data",
                              limits=Limits(idle_connection_s=IDLE_S)) as srv:
        host = srv.url.removeprefix("http://")
        started = trio.current_time()
        silent = await connect(srv)
        assert await read_to_eof(silent, 5) == b""
        assert trio.current_time() - started >= IDLE_S * 0.9
        half_head = await connect(srv)
        await half_head.send_all(f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n".encode())
        assert (await read_to_eof(half_head, 5)).startswith(b"HTTP/1.1 408")
        kept_alive = await connect(srv)
        await kept_alive.send_all(f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        assert (await read_to_eof(kept_alive, 5)).startswith(b"HTTP/1.1 200")
        half_body = await connect(srv)
        await half_body.send_all(
            f"POST /api/v1/tasks HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {srv.token}"
            "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"ti".encode())
        await read_to_eof(half_body, 5)  # closed (no answer is owed to half a body)
        for stream in (silent, half_head, kept_alive, half_body):
            await stream.aclose()


async def test_a_request_answered_slowly_is_not_idle(tmp_path: Path) -> None:
    """The client waits, silent, for longer than the idle timeout: its answer comes."""
    async with running_server(tmp_path / "data",
                              limits=Limits(idle_connection_s=IDLE_S)) as srv, \
            ws_client(srv) as ws:
        task = await ws.call("task.create", {"title": "t"})
        sid = (await ws.call("session.launch", {"task_id": task["id"]}))["id"]
        # Ignores the cancel for 1.5 s: the cancel's answer takes that long.
        await ws.call("message.add", {"session_id": sid, "content": "/slow 1500"})
        async with httpx.AsyncClient(base_url=srv.url, headers=srv.auth, timeout=20) as http:
            started = trio.current_time()
            with trio.fail_after(20):
                answer = await http.post(f"/api/v1/task-sessions/{sid}/cancel", json={})
            assert trio.current_time() - started > IDLE_S * 2  # it did wait
            assert answer.status_code == 200, answer.text


async def test_an_idle_websocket_that_answers_pings_stays(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data",
                              limits=Limits(idle_connection_s=IDLE_S)) as srv, \
            open_websocket_url(srv.ws_url, extra_headers=[
                (b"Authorization", f"Bearer {srv.token}".encode())]) as ws:
        await trio.sleep(IDLE_S * 5)  # pinged several times; the client answered
        await ws.send_message('{"id":"1","type":"request","action":"task.list","payload":{}}')
        with trio.fail_after(5):
            assert '"task.list"' in str(await ws.get_message())


async def test_a_websocket_upgraded_on_a_kept_alive_connection_is_not_timed_out(
        tmp_path: Path) -> None:
    """That one is claimed from Hypercorn for Turnvisor's own WebSocket: no HTTP
    read bound after its 101; pinged when idle, as a fresh one, and kept while
    it answers the pings."""
    async with running_server(tmp_path / "data",
                              limits=Limits(idle_connection_s=IDLE_S)) as srv:
        stream = await connect(srv)
        host = srv.url.removeprefix("http://")
        await stream.send_all(f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        first = b""
        with trio.fail_after(5):
            while not first.endswith(b"}"):
                first += await stream.receive_some(65536)
        assert first.startswith(b"HTTP/1.1 200")
        key = base64.b64encode(os.urandom(16)).decode()
        await stream.send_all(
            f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            f"Authorization: Bearer {srv.token}\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode())
        with trio.fail_after(5):
            upgraded = await stream.receive_some(65536)
            assert upgraded.startswith(b"HTTP/1.1 101"), upgraded
        pings = 0
        buffer = upgraded.partition(b"\r\n\r\n")[2]
        with trio.move_on_after(IDLE_S * 4):
            while True:
                # Server frames are unmasked; these are short (length < 126).
                while len(buffer) >= 2 and len(buffer) >= 2 + buffer[1]:
                    opcode, n = buffer[0] & 0x0F, buffer[1]
                    payload, buffer = buffer[2:2 + n], buffer[2 + n:]
                    assert opcode != 0x8, "closed"
                    if opcode == 0x9:
                        pings += 1
                        await stream.send_all(client_frame(payload, opcode=0xA))
                data = await stream.receive_some(65536)
                assert data, "closed"
                buffer += data
        assert pings >= 2
        # Still the gateway's: a request is answered.
        await stream.send_all(client_frame(
            b'{"id":"q","type":"request","action":"task.list","payload":{}}'))
        with trio.fail_after(5):
            while b'"task.list"' not in buffer:
                data = await stream.receive_some(65536)
                assert data, "closed"
                buffer += data
        await stream.aclose()


async def test_a_websocket_that_answers_nothing_is_closed(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data",
                              limits=Limits(idle_connection_s=IDLE_S)) as srv:
        stream = await connect(srv)
        key = base64.b64encode(os.urandom(16)).decode()
        host = srv.url.removeprefix("http://")
        await stream.send_all(
            f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            f"Authorization: Bearer {srv.token}\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode())
        # Never a byte back (no pong): a ping (0x89), then a close 1001 (0x88, 0x03e9).
        data = await read_to_eof(stream, IDLE_S * 2 + 5)
        assert data.startswith(b"HTTP/1.1 101")
        frames = data.split(b"\r\n\r\n", 1)[1]
        assert frames.startswith(b"\x89") and b"\x88" in frames
        close = frames[frames.index(b"\x88"):]
        assert close[2:4] == (1001).to_bytes(2, "big"), close
        await stream.aclose()


async def _still_open(stream: trio.SocketStream, srv: Server, *, started: bool = False) -> bool:
    """Whether ``stream`` is still served: silent so far (or ``started``: its
    request line sent), it completes a request and gets the answer."""
    host = srv.url.removeprefix("http://")
    line = "" if started else "GET /api/v1/health HTTP/1.1\r\n"
    try:
        await stream.send_all(f"{line}Host: {host}\r\nConnection: close\r\n\r\n".encode())
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return False
    return (await read_to_eof(stream, 5)).startswith(b"HTTP/1.1 200")


async def test_a_connection_over_the_bound_closes_the_one_idle_longest(tmp_path: Path) -> None:
    """Not a 503 for the newcomer (a local program holding the slots would
    lock the person out): the connection on which nothing moved for the
    longest goes instead."""
    async with running_server(tmp_path / "data",
                              limits=Limits(max_connections_per_peer=CAP)) as srv:
        held = [await connect(srv) for _ in range(CAP)]
        await trio.sleep(0.1)  # every one admitted
        # The oldest moves a byte (the start of a request head): now it is the
        # most recently active, and the second oldest is idle the longest.
        await held[0].send_all(b"GET /api/v1/health HTTP/1.1\r\n")
        await trio.sleep(0.1)
        over = await connect(srv)
        host = srv.url.removeprefix("http://")
        await over.send_all(f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n"
                            "Connection: close\r\n\r\n".encode())
        assert (await read_to_eof(over, 5)).startswith(b"HTTP/1.1 200")
        assert await read_to_eof(held[1], 5) == b""  # closed, without a word
        # Still the bound: the newest took the slot of the one closed.
        assert await _still_open(held[0], srv, started=True)
        for stream in (over, *held):
            await stream.aclose()


async def test_authenticated_connections_are_not_counted(tmp_path: Path) -> None:
    """WebSockets and kept-alive REST connections with the token are out of
    the bound: silent connections fill it, and the next one closes a silent
    one, never an authenticated one."""
    async with running_server(tmp_path / "data",
                              limits=Limits(max_connections_per_peer=CAP)) as srv, \
            trio.open_nursery() as nursery:
        sockets = [await nursery.start(_hold_websocket, srv) for _ in range(CAP)]
        host = srv.url.removeprefix("http://")
        rest = await connect(srv)  # its first request anonymous, its second with the token
        for bearer in ("", f"Authorization: Bearer {srv.token}\r\n"):
            await rest.send_all(f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n{bearer}\r\n"
                                .encode())
            reply = b""
            with trio.fail_after(5):
                while not reply.endswith(b'{"status": "ok"}'):
                    reply += await rest.receive_some(65536)
        silent = [await connect(srv) for _ in range(CAP)]
        await trio.sleep(0.1)
        over = await connect(srv)
        assert await read_to_eof(silent[0], 5) == b""  # the one idle the longest
        assert await _still_open(over, srv)
        assert await _still_open(rest, srv)
        for ws in sockets:  # each one still the gateway's
            await ws.send_all(client_frame(
                b'{"id":"q","type":"request","action":"task.list","payload":{}}'))
            with trio.fail_after(5):
                answer = b""
                while b'"task.list"' not in answer:
                    data = await ws.receive_some(65536)
                    assert data, "closed"
                    answer += data
        for stream in (*sockets, *silent, over, rest):
            await stream.aclose()
        nursery.cancel_scope.cancel()


async def _hold_websocket(srv: Server, *, task_status: trio.TaskStatus[trio.SocketStream]
                          = trio.TASK_STATUS_IGNORED) -> None:
    """A raw WebSocket connection, upgraded, handed back open."""
    stream = await connect(srv)
    key = base64.b64encode(os.urandom(16)).decode()
    host = srv.url.removeprefix("http://")
    await stream.send_all(
        f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            f"Authorization: Bearer {srv.token}\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        .encode())
    reply = b""
    with trio.fail_after(5):
        while b"\r\n\r\n" not in reply:
            reply += await stream.receive_some(65536)
    assert reply.startswith(b"HTTP/1.1 101"), reply
    task_status.started(stream)
