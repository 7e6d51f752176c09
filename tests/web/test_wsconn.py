"""web.wsconn against a wsproto client over an in-memory stream (no sockets)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
import trio
import trio.testing
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    Pong,
    Request,
    TextMessage,
)

from web.wsconn import ServerWebSocket, WebSocketClosed, frame_text


@dataclass
class Client:
    """The client's end: a wsproto connection and the stream under it."""

    stream: trio.abc.Stream
    conn: WSConnection
    writes: list[bytes] = field(default_factory=list)

    async def send(self, event: Event) -> None:
        await self.stream.send_all(self.conn.send(event))

    async def events(self, n: int) -> list[Event]:
        out: list[Event] = []
        with trio.fail_after(5):
            while len(out) < n:
                out.extend(self.conn.events())
                if len(out) >= n:
                    break
                data = bytes(await self.stream.receive_some(65536))
                self.writes.append(data)
                self.conn.receive_data(data or None)
        return out


def handshake() -> tuple[WSConnection, WSConnection]:
    """A client and a server connection past the opening handshake."""
    client = WSConnection(ConnectionType.CLIENT)
    server = WSConnection(ConnectionType.SERVER)
    server.receive_data(client.send(Request(host="localhost", target="/ws")))
    assert any(isinstance(e, Request) for e in server.events())
    client.receive_data(server.send(AcceptConnection()))
    assert any(isinstance(e, AcceptConnection) for e in client.events())
    assert client.state is ConnectionState.OPEN
    return client, server


@asynccontextmanager
async def pair(max_message: int = 1 << 20) -> AsyncIterator[tuple[ServerWebSocket, Client]]:
    client_stream, server_stream = trio.testing.memory_stream_pair()
    client, server = handshake()
    ws = ServerWebSocket(server_stream, server, max_message=max_message)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ws.run_reader)
        yield ws, Client(client_stream, client)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("size", [0, 125, 126, 65535, 65536, 70000])
def test_frames_every_length_encoding(size: int) -> None:
    client, _ = handshake()
    text = "é" * (size // 2) + "x" * (size % 2)  # multi-byte: lengths are of the UTF-8
    client.receive_data(frame_text(text))
    (event,) = list(client.events())
    assert isinstance(event, TextMessage) and event.data == text and event.message_finished


async def test_every_queued_frame_goes_out_in_one_write() -> None:
    async with pair() as (ws, client):
        await ws.send_many(["one", "two", "three"])
        events = await client.events(3)
        assert [e.data for e in events if isinstance(e, TextMessage)] == ["one", "two", "three"]
        assert len(client.writes) == 1


async def test_fragments_are_joined_and_pings_answered() -> None:
    async with pair() as (ws, client):
        await client.send(TextMessage(data='{"a":', message_finished=False))
        await client.send(Ping(payload=b"hi"))  # a control frame between fragments
        await client.send(TextMessage(data=' 1}', message_finished=True))
        await client.send(BytesMessage(data=b"\x00\x01"))
        with trio.fail_after(5):
            assert await ws.receive() == '{"a": 1}'
            assert await ws.receive() == b"\x00\x01"
        (pong,) = await client.events(1)
        assert isinstance(pong, Pong) and pong.payload == b"hi"


async def test_a_message_above_the_limit_closes_with_1009_after_reading_it() -> None:
    async with pair(max_message=1000) as (ws, client):
        # The client is still writing when the server closes: it is read on
        # (and dropped), so the client's send completes and it sees the close.
        await client.send(TextMessage(data="x" * 50_000))
        (close,) = await client.events(1)
        assert isinstance(close, CloseConnection) and close.code == 1009
        await client.send(close.response())
        with trio.fail_after(5):
            await ws.closed.wait()
            with pytest.raises(WebSocketClosed):
                await ws.receive()


async def test_a_protocol_error_closes_with_its_code() -> None:
    async with pair() as (ws, client):
        # Invalid UTF-8 in a text frame: 1007.
        await client.stream.send_all(b"\x81\x82\x00\x00\x00\x00\xff\xfe")
        (close,) = await client.events(1)
        assert isinstance(close, CloseConnection) and close.code == 1007
        with trio.fail_after(5):
            await ws.closed.wait()


async def test_the_client_closing_ends_receive_and_gets_its_reply() -> None:
    async with pair() as (ws, client):
        await client.send(CloseConnection(code=1000, reason="bye"))
        (reply,) = await client.events(1)
        assert isinstance(reply, CloseConnection) and reply.code == 1000
        with trio.fail_after(5), pytest.raises(WebSocketClosed):
            await ws.receive()
        with pytest.raises(WebSocketClosed):
            await ws.send_many(["late"])


async def test_our_close_waits_for_the_reply_then_hangs_up() -> None:
    async with pair() as (ws, client):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ws.close, 1001, "server shutting down")
            (close,) = await client.events(1)
            assert isinstance(close, CloseConnection) and close.code == 1001
            await client.send(close.response())
        assert ws.closed.is_set()


@asynccontextmanager
async def socket_pair() -> AsyncIterator[tuple[ServerWebSocket, Client]]:
    """As ``pair``, over a real socket pair (``write_now`` needs a descriptor)."""
    a, b = trio.socket.socketpair()
    client_stream, server_stream = trio.SocketStream(a), trio.SocketStream(b)
    client, server = handshake()
    ws = ServerWebSocket(server_stream, server, max_message=1 << 20)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ws.run_reader)
            yield ws, Client(client_stream, client)
            nursery.cancel_scope.cancel()
    finally:
        await client_stream.aclose()
        await server_stream.aclose()


async def test_write_now_writes_at_once_and_hands_back_what_the_socket_left() -> None:
    async with socket_pair() as (ws, client):
        assert ws.write_now(("at once",)) == b""
        (event,) = await client.events(1)
        assert isinstance(event, TextMessage) and event.data == "at once"
        # Fill the socket until it takes only part of a frame: the tail comes back,
        # and written first by the writer the stream stays whole.
        big = "y" * 200_000
        tails: list[bytes] = []
        sent = 0
        while not tails:
            tail = ws.write_now((big,))
            assert tail is not None
            sent += 1
            if tail:
                tails.append(tail)
        assert ws.write_now(("blocked",)) is None  # nothing at all fits now
        texts: list[str] = []
        part = ""
        async with trio.open_nursery() as nursery:
            batch: list[str | bytes] = [tails[0], "after"]
            nursery.start_soon(ws.send_many, batch)
            while len(texts) < sent + 1:
                for event in await client.events(1):  # (a big message comes in pieces)
                    assert isinstance(event, TextMessage)
                    part += event.data
                    if event.message_finished:
                        texts.append(part)
                        part = ""
        assert texts == [big] * sent + ["after"]


async def test_write_now_never_interleaves_with_a_write_in_progress() -> None:
    async with socket_pair() as (ws, _client), ws._write_lock:
        assert ws.write_now(("not now",)) is None


async def test_without_a_socket_write_now_declines() -> None:
    async with pair() as (ws, _client):
        assert ws.write_now(("x",)) is None
