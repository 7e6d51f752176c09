"""A WebSocket client connection for ``tests.support.ws.WsClient`` over a raw socket.

The bench's requesting connections (latency, floor (b), busy, burst, queued,
restored) are ``WsClient``s: requests answered by id, notifications parsed
(``json.loads`` each, as any client must) and watched.  Under trio-websocket
each frame also went through wsproto, a reader task and a memory channel:
110-160 µs of the bench's CPU per frame on this machine, and a cancel's
response is the ninth frame the client reads.  This connection parses the
server's frames from the socket's bytes itself (they are unmasked, unfragmented
text frames) and masks what it sends; ``WsClient`` is unchanged on top of it.
``--client trio-websocket`` measures with trio-websocket as before.
"""

from __future__ import annotations

from collections import deque
from typing import cast

import trio
from trio_websocket import WebSocketConnection

from tests.support.ws import WsClient

from .lean_ws import client_frame, upgrade

__all__ = ["LeanWebSocket", "open_lean_client"]

_OP_TEXT, _OP_CLOSE, _OP_PING, _OP_PONG = 0x1, 0x8, 0x9, 0xA


class LeanWebSocket:
    """``get_message``, ``send_message`` and ``aclose`` of a trio-websocket
    connection (what ``WsClient`` uses), on an upgraded socket."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream  # (``_close_stream`` closes it by this name)
        self._buffer = b""
        self._messages: deque[str] = deque()
        # Several tasks send on one connection (as trio-websocket allows): one at a time.
        self._sending = trio.Lock()

    async def get_message(self) -> str:
        while not self._messages:
            data = await self._stream.receive_some(65536)
            if not data:
                raise trio.ClosedResourceError("the server closed the connection")
            self._buffer += data
            await self._parse()
        return self._messages.popleft()

    async def _parse(self) -> None:
        buf = self._buffer
        while len(buf) >= 2:
            opcode, n, start = buf[0] & 0x0F, buf[1] & 0x7F, 2
            if n == 126:
                n, start = int.from_bytes(buf[2:4], "big"), 4
            elif n == 127:
                n, start = int.from_bytes(buf[2:10], "big"), 10
            if len(buf) < start + n:
                break
            payload, buf = buf[start:start + n], buf[start + n:]
            if opcode == _OP_TEXT:
                self._messages.append(payload.decode())
            elif opcode == _OP_PING:
                async with self._sending:
                    await self._stream.send_all(client_frame(payload, _OP_PONG))
            elif opcode == _OP_CLOSE:
                self._buffer = b""
                raise trio.ClosedResourceError("the server closed the WebSocket")
        self._buffer = buf

    async def send_message(self, message: str | bytes) -> None:
        data = message.encode() if isinstance(message, str) else message
        async with self._sending:
            await self._stream.send_all(client_frame(data))

    async def aclose(self) -> None:
        await self._stream.aclose()


async def open_lean_client(nursery: trio.Nursery, host: str, port: int, token: str, *,
                           keep: bool = True) -> WsClient:
    """A ``WsClient`` on a lean connection; its reader runs in ``nursery``."""
    stream = await upgrade(host, port, token)
    # WsClient is typed for trio-websocket's connection; this one has what it uses.
    client = WsClient(cast(WebSocketConnection, LeanWebSocket(stream)), keep=keep)
    nursery.start_soon(client.reader)
    return client
