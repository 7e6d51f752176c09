"""An agentctl whose event stream reads no frames (an older one: its ``Hello``
has no ``accepts``) is cancelled over HTTP (``POST /api/v1/acp/cancel``).

A real ``turnvisor serve`` reaches a real agentctl (and its mock agent)
through a small proxy that passes every byte as it is but the ``Hello`` on the
event stream, which it sends without ``accepts``, and that records the
requests the backend makes.  The person's cancel then goes as the HTTP
request, and the turn ends cancelled.
"""

from __future__ import annotations

import json
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio
from agentctl_support import AgentctlFactory, agent_streaming, remote_toml

from tests.support.serverproc import server_process
from tests.support.ws import ws_client
from tests.web.support import launch, new_task


@dataclass
class OldAgentctl:
    """The proxy's address, and what the backend sent through it."""

    url: str
    sent: bytearray = field(default_factory=bytearray)
    hellos: list[dict[str, Any]] = field(default_factory=list)


async def _verbatim(src: trio.abc.ReceiveStream, dst: trio.abc.SendStream,
                    record: bytearray | None = None) -> None:
    while data := await src.receive_some(65536):
        if record is not None:
            record += data
        await dst.send_all(data)


async def _exactly(src: trio.abc.ReceiveStream, buf: bytearray, n: int) -> bool:
    while len(buf) < n:
        data = await src.receive_some(65536)
        if not data:
            return False
        buf += data
    return True


async def _down(up: trio.abc.ReceiveStream, client: trio.abc.SendStream,
                old: OldAgentctl) -> None:
    """agentctl → backend: an HTTP response as it is; after a WebSocket's 101,
    its first frame (the Hello) without ``accepts``, then the rest as it is."""
    buf = bytearray()
    while b"\r\n\r\n" not in buf:
        data = await up.receive_some(65536)
        if not data:
            return
        buf += data
    head_end = buf.index(b"\r\n\r\n") + 4
    head = bytes(buf[:head_end])
    if not head.startswith(b"HTTP/1.1 101"):
        await client.send_all(bytes(buf))
        await _verbatim(up, client)
        return
    assert b"sec-websocket-extensions" not in head.lower(), head  # plain frames
    await client.send_all(head)
    rest = buf[head_end:]
    if not await _exactly(up, rest, 2):
        return
    opcode_byte, length = rest[0], rest[1] & 0x7F
    assert rest[1] & 0x80 == 0 and opcode_byte == 0x81, rest[:2]  # unmasked, final text
    start = 2 + {126: 2, 127: 8}.get(length, 0)
    if not await _exactly(up, rest, start):
        return
    if length == 126:
        length = struct.unpack("!H", rest[2:4])[0]
    elif length == 127:
        length = struct.unpack("!Q", rest[2:10])[0]
    if not await _exactly(up, rest, start + length):
        return
    hello = json.loads(rest[start:start + length])
    assert hello["type"] == "Hello", hello
    hello.pop("accepts", None)
    old.hellos.append(hello)
    payload = json.dumps(hello).encode()
    size = (bytes([len(payload)]) if len(payload) < 126
            else bytes([126]) + struct.pack("!H", len(payload)) if len(payload) < 65536
            else bytes([127]) + struct.pack("!Q", len(payload)))
    await client.send_all(bytes([0x81]) + size + payload + bytes(rest[start + length:]))
    await _verbatim(up, client)


@asynccontextmanager
async def old_agentctl(target: str) -> AsyncIterator[OldAgentctl]:
    parts = urlsplit(target)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    old = OldAgentctl(f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}")

    async def relay(client: trio.SocketStream) -> None:
        try:
            up = await trio.open_tcp_stream(host, port)
        except OSError:
            await client.aclose()
            return
        async with client, up, trio.open_nursery() as nursery:
            async def upward() -> None:
                await _verbatim(client, up, old.sent)
                nursery.cancel_scope.cancel()
            nursery.start_soon(upward)
            await _down(up, client, old)
            nursery.cancel_scope.cancel()

    async def serve(client: trio.SocketStream) -> None:
        try:
            await relay(client)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # one side went away: so does the relay

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, serve, listeners)
        yield old
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("protocol", ["acp", "codex"])
async def test_an_agentctl_that_reads_no_frames_is_cancelled_over_http(
        tmp_path: Path, agentctl: AgentctlFactory, protocol: str) -> None:
    with trio.fail_after(90):
        async with agentctl(protocol) as ctl, old_agentctl(ctl.url) as old, \
                server_process(tmp_path / "data", toml=remote_toml(old.url, protocol)) as srv, \
                ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, "remote")
            await ws.call("session.subscribe", {"session_id": sid})
            msg = await ws.call("message.add", {"session_id": sid, "content": "/delay 30000"})
            await agent_streaming(ws, sid, msg["turn_id"])
            assert old.hellos and all("accepts" not in h for h in old.hellos)
            assert b"/api/v1/acp/cancel" not in old.sent
            answer = await ws.call("agent.cancel", {"session_id": sid}, timeout=30)
            assert answer["outcome"] == "cancelled", answer
            assert answer["turn_id"] == msg["turn_id"]
            assert b"POST /api/v1/acp/cancel " in old.sent
            # agentctl's turn ended too (cancelled there, not only in the backend).
            assert not (await ctl.status()).get("turn")
