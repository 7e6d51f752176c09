"""web.front: which connections reach the gateway's own WebSocket, which Hypercorn."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import trio

from bench.lean_ws import client_frame
from tests.support.server import Server, running_server
from web.auth import bearer_subprotocol
from web.listener import _asks_for


def _upgrade(srv: Server, path: str = "/ws", host: str | None = None) -> bytes:
    """An upgrade authenticated as a browser does it: the token in a subprotocol."""
    key = base64.b64encode(os.urandom(16)).decode()
    host = host or srv.url.removeprefix("http://")
    return (f"GET {path} HTTP/1.1\r\nHost: {host}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Protocol: turnvisor, {bearer_subprotocol(srv.token)}\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()


def _selected(reply: bytes) -> list[str]:
    """The Sec-WebSocket-Protocol values of a handshake's answer."""
    head = reply.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    return [line.split(":", 1)[1].strip() for line in head.split("\r\n")[1:]
            if line.lower().startswith("sec-websocket-protocol:")]


async def _connect(srv: Server) -> tuple[trio.SocketStream, str]:
    """A raw connection to the server, and the Host it is known by."""
    stream = await trio.open_tcp_stream("127.0.0.1", int(srv.url.rsplit(":", 1)[1]))
    return stream, srv.url.removeprefix("http://")


async def _read_until(stream: trio.SocketStream, marker: bytes) -> bytes:
    data = b""
    with trio.fail_after(10):
        while marker not in data:
            chunk = await stream.receive_some(65536)
            assert chunk, f"closed before {marker!r}: {data!r}"
            data += chunk
    return data


def test_only_a_complete_get_of_the_path_with_an_upgrade_is_taken() -> None:
    head = b"GET /ws?token=x HTTP/1.1\r\nHost: h\r\nUpgrade: WebSocket\r\n\r\n"
    assert _asks_for(head, "/ws")
    assert not _asks_for(head[:-2], "/ws")  # incomplete: Hypercorn's
    assert not _asks_for(head.replace(b"GET", b"POST"), "/ws")
    assert not _asks_for(head.replace(b"/ws?", b"/wsx?"), "/ws")
    assert not _asks_for(b"GET /ws HTTP/1.1\r\nHost: h\r\n\r\n", "/ws")


async def test_a_head_sent_in_pieces_is_still_upgraded(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv:
        stream, _ = await _connect(srv)
        async with stream:
            request = _upgrade(srv)
            for i in range(0, len(request), 7):
                await stream.send_all(request[i:i + 7])
                await trio.sleep(0.001)
            reply = await _read_until(stream, b"\r\n\r\n")
            assert reply.startswith(b"HTTP/1.1 101")
            # The plain subprotocol is selected; the token's is never echoed.
            assert _selected(reply) == ["turnvisor"]
            assert srv.token.encode() not in reply


async def _speaks_the_gateway(stream: trio.SocketStream, srv: Server) -> None:
    """The upgraded connection answers a request as the gateway does, and its
    server frames are wsconn's (no permessage-deflate: Hypercorn's stack
    negotiated it; wsconn never does)."""
    await stream.send_all(client_frame(json.dumps(
        {"id": "r1", "type": "request", "action": "no.such.action", "payload": {}}).encode()))
    with trio.fail_after(10):
        while True:
            chunk = await stream.receive_some(65536)
            assert chunk, "closed before an answer"
            # A server frame: FIN + text opcode, never the RSV1 bit of a deflated one.
            assert chunk[0] == 0x81, chunk[:2]
            if b'"r1"' in chunk:
                assert b"UNKNOWN_ACTION" in chunk
                return


def _accepted(reply: bytes) -> bool:
    head = reply.split(b"\r\n\r\n", 1)[0].lower()
    return head.startswith(b"http/1.1 101") and b"permessage-deflate" not in head


async def test_an_upgrade_on_a_reused_connection_goes_to_the_same_websocket(
        tmp_path: Path) -> None:
    """A client may ask for /ws after a request on the same keep-alive
    connection: Hypercorn serves that connection, and hands the upgrade over
    (web.hyper) to the WebSocket a fresh connection gets."""
    async with running_server(tmp_path / "data") as srv:
        stream, host = await _connect(srv)
        async with stream:
            await stream.send_all(f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            first = await _read_until(stream, b"}")
            assert first.startswith(b"HTTP/1.1 200")
            await stream.send_all(_upgrade(srv).replace(
                b"\r\n\r\n", b"\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n"))
            reply = await _read_until(stream, b"\r\n\r\n")
            assert _accepted(reply), reply
            assert _selected(reply) == ["turnvisor"]
            await _speaks_the_gateway(stream, srv)


async def test_an_upgrade_pipelined_behind_a_request_goes_there_too(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv:
        stream, host = await _connect(srv)
        async with stream:
            await stream.send_all(
                f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode() + _upgrade(srv))
            data = await _read_until(stream, b"HTTP/1.1 101")
            data += await _read_until(stream, b"\r\n\r\n") if not data.endswith(b"\r\n\r\n") \
                else b""
            first, _, rest = data.partition(b"}")
            assert first.startswith(b"HTTP/1.1 200")
            assert _accepted(rest), rest
            await _speaks_the_gateway(stream, srv)


async def test_a_fresh_upgrade_negotiates_no_compression_either(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv:
        stream, _ = await _connect(srv)
        async with stream:
            await stream.send_all(_upgrade(srv).replace(
                b"\r\n\r\n", b"\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n"))
            reply = await _read_until(stream, b"\r\n\r\n")
            assert _accepted(reply), reply
            await _speaks_the_gateway(stream, srv)


async def test_an_upgrade_to_another_path_on_a_reused_connection_is_refused(
        tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv:
        stream, host = await _connect(srv)
        async with stream:
            await stream.send_all(f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            await _read_until(stream, b"}")
            await stream.send_all(_upgrade(srv, path="/elsewhere"))
            reply = await _read_until(stream, b"\r\n\r\n")
            assert reply.startswith(b"HTTP/1.1 404"), reply


async def test_a_plain_request_to_the_path_goes_to_hypercorn(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv:
        stream, host = await _connect(srv)
        async with stream:
            await stream.send_all(f"GET /ws HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            reply = await _read_until(stream, b"\r\n\r\n")
            # Not a WebSocket request: Quart answers it as HTTP (no 101).
            assert reply.startswith(b"HTTP/1.1 ") and not reply.startswith(b"HTTP/1.1 101")
