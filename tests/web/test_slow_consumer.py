"""A WebSocket client that stops reading is dropped; it never slows the other
clients, the cancel path, or the server's shutdown (issue 4, item 2)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, wrap_client_stream

import web.server
from supervisor.bus import EventBus
from supervisor.config import Limits
from tests.support.server import Server, running_server
from tests.support.ws import WsClient, is_turn_completed, ws_client

from .support import cancellation_changes, launch, new_task, raw_request, start_turn

QUEUE = 16
STALL_S = 1.0



@pytest.fixture(autouse=True)
def fast_stall_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel drops a peer that takes no data after this (production: 10 s)."""
    monkeypatch.setattr(web.server, "STALLED_PEER_TIMEOUT_S", STALL_S)


@asynccontextmanager
async def stalled_client(server: Server) -> AsyncIterator[WebSocketConnection]:
    """A WebSocket client that reads nothing after the handshake: a tiny kernel
    receive buffer and a one-message client queue, so the server's writes back
    up after a few frames and its TCP window stays at zero."""
    parts = urlsplit(server.url)
    assert parts.hostname is not None and parts.port is not None
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await sock.connect((parts.hostname, parts.port))
    stream = trio.SocketStream(sock)
    try:
        async with trio.open_nursery() as nursery:
            conn = await wrap_client_stream(
                nursery, stream, f"{parts.hostname}:{parts.port}", "/ws",
                extra_headers=[(b"Authorization", f"Bearer {server.token}".encode())],
                message_queue_size=1, max_message_size=64 * 1024 * 1024,
                receive_buffer_size=4096)
            try:
                yield conn
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


def big_prompt(n: int) -> str:
    # Many words: the mock echoes each one as a chunk, so the answer is
    # re-published many times as it grows.
    return f"turn{n} " + " ".join(f"w{i}-" + "y" * 2000 for i in range(40))


async def fill_until_dropped(fast: WsClient, bus: EventBus, sid: str) -> None:
    """Big turns on a session the stalled client is subscribed to, until the bus
    drops it; the fast client gets every turn promptly meanwhile."""
    turns = 0
    while bus.dropped_subscribers == 0:
        turns += 1
        assert turns <= 20, "the stalled client was never dropped"
        started = trio.current_time()
        await fast.call("message.add", {"session_id": sid, "content": big_prompt(turns)})

        def completed(f: dict[str, Any], n: int = turns) -> bool:
            return is_turn_completed(sid)(f) and len(fast.of("session.turn.completed", sid)) >= n

        await fast.wait_for(completed)
        assert trio.current_time() - started < 5


async def drain(conn: WebSocketConnection) -> None:
    while True:
        await conn.get_message()


async def subscribers_become(bus: EventBus, sid: str, n: int, timeout: float) -> None:
    # The bus has no event for this; a short poll, bounded.
    with trio.fail_after(timeout):
        while bus.subscriber_count(sid) != n:
            await trio.sleep(0.02)


async def test_slow_consumer_is_dropped_without_hurting_anyone(tmp_path: Path) -> None:
    with trio.fail_after(45):
        async with running_server(tmp_path / "data", limits=Limits(ws_send_queue=QUEUE)) as srv, \
                ws_client(srv) as fast:
            bus = srv.sup.bus
            task_id = await new_task(fast)
            sid = await launch(fast, task_id)
            await fast.call("session.subscribe", {"session_id": sid})

            async with stalled_client(srv) as slow:
                await slow.send_message(raw_request("session.subscribe", {"session_id": sid}))
                await subscribers_become(bus, sid, 2, 5)
                await fill_until_dropped(fast, bus, sid)
                # Dropped: the server closes its connection (and unsubscribes it)
                # although the client still reads nothing.
                await subscribers_become(bus, sid, 1, STALL_S + 5)

                # The cancel path is not slowed: a cancel completes promptly.
                await start_turn(fast, sid, "/delay 5000")
                started = trio.current_time()
                assert (await fast.call("agent.cancel", {"session_id": sid}))["success"] is True
                assert trio.current_time() - started < 2
                assert cancellation_changes(fast, sid)[-1][0] is False

                # The slow client, reading at last, finds its connection closed.
                with trio.fail_after(10), pytest.raises(ConnectionClosed):
                    await drain(slow)

            # The server is fine: new connections work, the session is usable.
            async with ws_client(srv) as again:
                await again.call("session.subscribe", {"session_id": sid})
                await again.call("message.add", {"session_id": sid, "content": "still fine"})
                await again.wait_for(is_turn_completed(sid))
            assert (await fast.call("task.list"))["tasks"]


async def test_shutdown_is_not_held_up_by_a_stalled_client(tmp_path: Path) -> None:
    """A client that stops reading (its TCP window at zero, the server's writer
    blocked on it) must not keep the server from stopping."""

    async def hold(srv: Server, release: trio.Event,
                   task_status: trio.TaskStatus[WebSocketConnection]) -> None:
        async with stalled_client(srv) as slow:
            task_status.started(slow)
            await release.wait()

    release = trio.Event()
    with trio.fail_after(45):
        async with trio.open_nursery() as outer:
            async with running_server(tmp_path / "data",
                                      limits=Limits(ws_send_queue=QUEUE)) as srv, \
                    ws_client(srv) as fast:
                task_id = await new_task(fast)
                sid = await launch(fast, task_id)
                await fast.call("session.subscribe", {"session_id": sid})
                slow = await outer.start(hold, srv, release)
                await slow.send_message(raw_request("session.subscribe", {"session_id": sid}))
                await subscribers_become(srv.sup.bus, sid, 2, 5)
                await fill_until_dropped(fast, srv.sup.bus, sid)
                stopping = trio.current_time()
            # The server has stopped while the stalled client is still connected.
            assert trio.current_time() - stopping < STALL_S + 4
            release.set()
