"""web.outbox and the bus's mailboxes: a connection's frames, its writer and its
write policy, over a real socket pair (what the client reads is what the
connection sent)."""

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
async def rig(queue_size: int = 64, send_timeout_s: float = 10,
              bus: EventBus | None = None) -> AsyncIterator[Rig]:
    bus = bus or EventBus(queue_size=queue_size)
    async with socket_pair() as (ws, client):
        requests, closing = Requests(), trio.Event()
        outbox = Outbox(ws, bus.subscriber(), requests=requests, closing=closing,
                        send_timeout_s=send_timeout_s)
        yield Rig(ws, client, outbox, requests, closing)


async def test_what_is_queued_together_leaves_in_one_write() -> None:
    async with rig() as r, trio.open_nursery() as nursery:
        nursery.start_soon(r.outbox.run)
        await trio.testing.wait_all_tasks_blocked()
        for name in ("one", "two", "three"):
            assert r.outbox.offer(name)
        assert await r.texts(3) == ["one", "two", "three"]
        assert len(r.client.writes) == 1  # one write (one read here) for the three
        nursery.cancel_scope.cancel()


async def test_with_a_request_in_flight_the_writer_waits_for_what_the_next_rounds_add(
) -> None:
    async with rig() as r, trio.open_nursery() as nursery:
        nursery.start_soon(r.outbox.run)
        await trio.testing.wait_all_tasks_blocked()
        r.requests.count = 1

        async def answer() -> None:
            # The request's answer, a round after its notification.
            await trio.lowlevel.checkpoint()
            r.requests.count = 0
            assert r.outbox.offer("answer")

        assert r.outbox.offer("notification")
        nursery.start_soon(answer)
        assert await r.texts(2) == ["notification", "answer"]
        assert len(r.client.writes) == 1
        nursery.cancel_scope.cancel()


async def test_an_owed_answer_counts_as_a_request_in_flight() -> None:
    async with rig() as r:
        assert r.outbox.in_flight == 0
        r.outbox.mailbox.owed += 1
        r.requests.count = 2
        assert r.outbox.in_flight == 3


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
        for _ in range(8):
            assert r.outbox.offer(big)
        started = trio.current_time()
        await r.outbox.run()  # the client never reads
        assert r.outbox.overflowed
        assert 10 <= trio.current_time() - started < 15


async def test_the_bus_offers_one_encoded_frame_to_every_subscriber() -> None:
    bus = EventBus()
    async with rig(bus=bus) as a, rig(bus=bus) as b:
        for r in (a, b):
            bus.subscribe("s", r.outbox.mailbox)
        bus.publish("s", "session.changed", {"n": 1})
        frames = [r.outbox.mailbox.receive_nowait() for r in (a, b)]
        assert frames[0] is frames[1]  # encoded once
        bus.unsubscribe_all(a.outbox.mailbox)
        bus.publish("s", "session.changed", {"n": 2})
        assert bus.subscriber_count("s") == 1
        assert len(a.outbox.mailbox) == 0 and len(b.outbox.mailbox) == 1


async def test_a_batch_and_its_answers_leave_in_one_write_in_order() -> None:
    bus = EventBus()
    async with rig(bus=bus) as r, trio.open_nursery() as nursery:
        mailbox = r.outbox.mailbox
        bus.subscribe("s", mailbox)
        nursery.start_soon(r.outbox.run)
        await trio.testing.wait_all_tasks_blocked()
        mailbox.owed += 2
        payload = {"success": True}
        bus.publish_all(
            [("s", "session.state_changed", {"n": 1}, None),
             ("other", "session.changed", {"n": 2}, None),
             ("s", "session.turn.completed", {"n": 3}, None)],
            [(mailbox, "c1", "response", "agent.cancel", payload),
             (mailbox, "c2", "response", "agent.cancel", payload)])
        assert mailbox.owed == 0
        frames = [json.loads(t) for t in await r.texts(4)]
        assert [(f["type"], f["action"], f.get("id") if f["type"] == "response" else None)
                for f in frames] == [
            ("notification", "session.state_changed", None),
            ("notification", "session.turn.completed", None),
            ("response", "agent.cancel", "c1"), ("response", "agent.cancel", "c2")]
        assert frames[2]["payload"] == frames[3]["payload"] == payload
        assert len(r.client.writes) == 1
        nursery.cancel_scope.cancel()


async def test_an_answer_to_a_connection_that_has_gone_is_dropped() -> None:
    bus = EventBus()
    gone = bus.subscriber()
    gone.owed += 1
    gone.close()
    bus.publish_all([], [(gone, "c1", "response", "agent.cancel", {"success": True})])
    assert gone.owed == 0 and len(gone) == 0
