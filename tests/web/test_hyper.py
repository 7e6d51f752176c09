"""web.hyper against the installed Hypercorn: each piece the listener drives.

These run a bare ASGI app (no Quart) through ``web.listener.serve_listener``
on a real socket, so what fails here is Hypercorn's side: its lifespan, its
one-connection ``TCPServer``, the HTTP/1.1 state ``answering`` reads, the
ASGI ``websocket`` scope an upgrade is claimed from.  A Hypercorn release that
moves one of them fails here first (the version is pinned in pyproject.toml).
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import h11
import trio

from web.hyper import Config, upgrade_head
from web.listener import ConnLimits, Handover, Takes, serve_listener

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_hypercorn_is_the_pinned_one() -> None:
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [p for p in pins if p.startswith("hypercorn")]
    installed = importlib.metadata.version("hypercorn")
    low, high = (part.lstrip("<>=") for part in pin.removeprefix("hypercorn").split(","))
    as_tuple = lambda v: tuple(int(x) for x in v.split(".")[:2])  # noqa: E731
    assert as_tuple(low) <= as_tuple(installed) < as_tuple(high), (pin, installed)


class App:
    """A bare ASGI app: ``/slow`` answers after ``slow_s`` unless the client is
    disconnected first; a WebSocket is accepted."""

    def __init__(self, slow_s: float = 0.0) -> None:
        self.slow_s = slow_s
        self.websockets = 0
        self.started = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self.started = True
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] == "websocket":
            self.websockets += 1
            await receive()  # websocket.connect
            await send({"type": "websocket.accept"})
            await receive()
            return
        if scope["path"] == "/slow":
            await receive()  # the (empty) body
            with trio.move_on_after(self.slow_s):
                await receive()  # the disconnect, if Hypercorn gives up on the client
                return  # as a framework does (quart-trio cancels the handler)
        body = scope["path"].encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


Take = Callable[[Handover], Awaitable[None]]


@asynccontextmanager
async def listening(app: App, limits: ConnLimits, take: Take | None = None,
                    path: str = "/sock") -> AsyncIterator[str]:
    """The listener on an ephemeral port; with ``take``: the WebSocket upgrades
    to ``path`` it hands over, each given to ``take`` in a task of its own."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 0.5
    stop = trio.Event()
    send, receive = trio.open_memory_channel[Handover](0)
    takes = Takes(path, send) if take is not None else None

    async def taking(nursery: trio.Nursery) -> None:
        async for handover in receive:
            nursery.start_soon(_taken, handover)

    async def _taken(handover: Handover) -> None:
        assert take is not None
        try:
            await take(handover)
        finally:
            handover.done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(taking, nursery)
        binds = await nursery.start(partial(serve_listener, app, config, limits, takes=takes,
                                            shutdown_trigger=stop.wait))
        try:
            yield binds[0].removeprefix("http://")
        finally:
            stop.set()
            await send.aclose()


async def _open(address: str) -> trio.SocketStream:
    host, port = address.rsplit(":", 1)
    return await trio.open_tcp_stream(host, int(port))


async def _responses(stream: trio.SocketStream, n: int, within_s: float = 10) -> list[Any]:
    """The next ``n`` whole responses on the connection, parsed by h11."""
    client = h11.Connection(h11.CLIENT)
    # h11 answers only what it was asked: tell it of the requests sent.
    out: list[Any] = []
    with trio.fail_after(within_s):
        for _ in range(n):
            client.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
            client.send(h11.EndOfMessage())
            response: Any = None
            body = b""
            while True:
                event = client.next_event()
                if event is h11.NEED_DATA:
                    client.receive_data(await stream.receive_some(65536))
                elif isinstance(event, h11.Response):
                    response = event
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    raise AssertionError("closed before a whole response")
            out.append((response.status_code, body))
            client.start_next_cycle()
    return out


def _get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


_UPGRADE = (b"GET /sock?a=1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: one, two\r\n\r\n")


async def test_the_lifespan_runs_and_requests_are_served_on_a_kept_connection() -> None:
    app = App()
    async with listening(app, ConnLimits(idle_s=5)) as address:
        assert app.started
        stream = await _open(address)
        async with stream:
            await stream.send_all(_get("/one"))
            await stream.send_all(_get("/two"))
            assert await _responses(stream, 2) == [(200, b"/one"), (200, b"/two")]


async def test_an_answer_slower_than_the_idle_bound_is_waited_for() -> None:
    """``answering``: the client is silent, but a request is being answered."""
    app = App(slow_s=0.6)
    async with listening(app, ConnLimits(idle_s=0.2)) as address:
        stream = await _open(address)
        async with stream:
            await stream.send_all(_get("/one"))
            assert await _responses(stream, 1) == [(200, b"/one")]
            await stream.send_all(_get("/slow"))
            assert await _responses(stream, 1) == [(200, b"/slow")]
            # Idle now: the connection is closed within about the bound.
            with trio.fail_after(5):
                while await stream.receive_some(65536):
                    pass


async def test_an_upgrade_on_a_kept_connection_is_claimed_before_hypercorn_answers() -> None:
    app = App()
    heads: list[bytes] = []

    async def take(handover: Handover) -> None:
        heads.append(handover.head)
        await handover.stream.send_all(b"TAKEN")

    async with listening(app, ConnLimits(idle_s=5), take=take) as address:
        stream = await _open(address)
        async with stream:
            await stream.send_all(_get("/one"))
            assert await _responses(stream, 1) == [(200, b"/one")]
            await stream.send_all(_UPGRADE)
            got = b""
            with trio.fail_after(10):
                while b"TAKEN" not in got:
                    chunk = await stream.receive_some(65536)
                    assert chunk, got
                    got += chunk
            # Nothing of Hypercorn's (its 500 for an app that did not accept) came first.
            assert got == b"TAKEN"
    assert app.websockets == 0
    (head,) = heads
    # The head as sent: request line, every header (names in h11's lower case), in order.
    assert head.startswith(b"GET /sock?a=1 HTTP/1.1\r\n") and head.endswith(b"\r\n\r\n")
    assert head.lower() == _UPGRADE.lower()


async def test_an_upgrade_to_another_path_gets_a_404() -> None:
    async def take(handover: Handover) -> None:
        raise AssertionError("handed over an upgrade to another path")

    async with listening(App(), ConnLimits(idle_s=5), take=take, path="/elsewhere") as address:
        stream = await _open(address)
        async with stream:
            await stream.send_all(_get("/one") + _UPGRADE)
            got = b""
            with trio.fail_after(10):
                while b"HTTP/1.1 404" not in got:
                    chunk = await stream.receive_some(65536)
                    assert chunk, got
                    got += chunk


async def test_without_a_take_hypercorn_serves_the_upgrade_itself() -> None:
    """agentctl's listener: its WebSocket is Hypercorn's."""
    app = App()
    async with listening(app, ConnLimits(idle_s=5)) as address:
        stream = await _open(address)
        async with stream:
            await stream.send_all(_get("/one") + _UPGRADE)
            got = b""
            with trio.fail_after(10):
                while b"HTTP/1.1 101" not in got:
                    chunk = await stream.receive_some(65536)
                    assert chunk, got
                    got += chunk
    assert app.websockets == 1


def test_an_upgrade_head_is_rebuilt_from_its_scope() -> None:
    scope: Any = {"type": "websocket", "path": "/w s", "raw_path": b"/w%20s",
                  "query_string": b"t=1", "headers": [(b"host", b"h"), (b"upgrade", b"x")]}
    assert upgrade_head(scope) == b"GET /w%20s?t=1 HTTP/1.1\r\nhost: h\r\nupgrade: x\r\n\r\n"
