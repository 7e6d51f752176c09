"""web.outbox: a connection's frames, its writer and its write policy, over a
real socket pair (what the client reads is what the connection sent)."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import trio
import trio.testing
from wsproto.events import CloseConnection, TextMessage

from supervisor.bus import EventBus
from web.outbox import Outbox
from web.wsconn import ServerWebSocket

from .test_wsconn import Client, socket_pair


@dataclass
class Requests:
    count: int = 0


@dataclass
class Rig:
    ws: ServerWebSocket
    client: Client
    outbox: Outbox
    requests: Requests
    closing: trio.Event

    async def texts(self, n: int) -> list[str]:
        out: list[str] = []
        part = ""
        while len(out) < n:
            for event in await self.client.events(1):
                assert isinstance(event, TextMessage), event
                part += event.data
                if event.message_finished:
                    out.append(part)
                    part = ""
        return out

    def readable_now(self) -> bytes:
        """What the client's socket holds this very moment (no task has run),
        left there for ``texts``."""
        assert isinstance(self.client.stream, trio.SocketStream)
        with socket.socket(fileno=os.dup(self.client.stream.socket.fileno())) as peek:
            try:
                return peek.recv(1 << 20, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                return b""


@asynccontextmanager
async def rig(queue_size: int = 64, send_timeout_s: float = 10) -> AsyncIterator[Rig]:
    async with socket_pair() as (ws, client):
        requests, closing = Requests(), trio.Event()
        outbox = Outbox(ws, queue_size=queue_size, requests=requests, closing=closing,
                        send_timeout_s=send_timeout_s)
        yield Rig(ws, client, outbox, requests, closing)


async def test_an_idle_connection_is_written_from_the_offering_task() -> None:
    async with rig() as r:
        # No writer task at all: the offer itself wrote the frame.
        assert r.outbox.offer("now")
        assert b"now" in r.readable_now()


async def test_with_a_request_in_flight_the_writer_sends_the_frames_together() -> None:
    async with rig() as r, trio.open_nursery() as nursery:
        nursery.start_soon(r.outbox.run)
        await trio.testing.wait_all_tasks_blocked()
        r.requests.count = 1
        for name in ("one", "two", "three"):
            assert r.outbox.offer(name)
        assert r.readable_now() == b""  # not from here: the writer's, after its rounds
        r.requests.count = 0
        assert await r.texts(3) == ["one", "two", "three"]
        assert len(r.client.writes) == 1  # one write (one read here) for the three
        nursery.cancel_scope.cancel()


async def test_batched_frames_wait_for_the_writer_or_a_flush() -> None:
    async with rig() as r:
        assert r.outbox.offer("a", batched=True)
        assert r.outbox.offer("b", batched=True)
        assert r.readable_now() == b""
        # A settled cancel's answer: queued behind them, and all of it written
        # at once from here, with no writer task to wait for.
        assert r.outbox.offer("answer")
        r.outbox.flush()
        assert await r.texts(3) == ["a", "b", "answer"]
        assert len(r.client.writes) == 1


async def test_a_flush_declines_while_a_request_is_in_flight_or_the_server_closes() -> None:
    async with rig() as r:
        r.requests.count = 1
        assert r.outbox.offer("x")
        r.outbox.flush()
        assert r.readable_now() == b""
        r.requests.count = 0
        r.closing.set()
        r.outbox.flush()
        assert r.readable_now() == b""


async def test_what_the_socket_does_not_take_goes_first_and_whole() -> None:
    big = "y" * 300_000
    async with rig() as r, trio.open_nursery() as nursery:
        nursery.start_soon(r.outbox.run)
        # The socket takes part of the first at once; the rest of it, and
        # what is offered after it, follow in order, every frame whole.
        for i in range(4):
            assert r.outbox.offer(f"{i}{big}")
        assert r.outbox.offer("last")
        texts = await r.texts(5)
        assert texts == [f"{i}{big}" for i in range(4)] + ["last"]
        nursery.cancel_scope.cancel()


async def test_a_client_that_falls_behind_is_dropped_with_1013() -> None:
    async with rig(queue_size=3) as r:
        r.requests.count = 1  # nothing written from here: everything queues
        assert all(r.outbox.offer(str(i)) for i in range(3))
        assert not r.outbox.offer("3")
        assert r.outbox.overflowed
        with trio.fail_after(5):
            await r.outbox.run()
        events = await r.client.events(1)
        assert isinstance(events[-1], CloseConnection) and events[-1].code == 1013


async def test_a_client_that_reads_nothing_is_dropped_after_the_send_timeout(
        autojump_clock: trio.testing.MockClock) -> None:
    big = "z" * 1_000_000
    async with rig(send_timeout_s=10) as r:
        r.requests.count = 1
        for _ in range(8):
            assert r.outbox.offer(big)
        started = trio.current_time()
        await r.outbox.run()  # the client never reads
        assert r.outbox.overflowed
        assert 10 <= trio.current_time() - started < 15


async def test_the_bus_offers_one_encoded_frame_to_every_sink_and_batches_in_coalescing(
) -> None:
    bus = EventBus()
    async with rig() as a, rig() as b:
        for r in (a, b):
            bus.subscribe("s", r.outbox)
        bus.publish("s", "session.changed", {"n": 1})
        # Both written at once, from the publisher, the same frame.
        assert a.readable_now() and a.readable_now() == b.readable_now()
        with bus.coalescing():
            bus.publish("s", "session.changed", {"n": 2})
            bus.publish("s", "session.changed", {"n": 3})
        assert [json.loads(t)["payload"]["n"] for t in await a.texts(1)] == [1]
        assert a.readable_now() == b""  # batched: left to the writer
        bus.unsubscribe_all(a.outbox)
        bus.publish("s", "session.changed", {"n": 4})
        assert bus.subscriber_count("s") == 1
