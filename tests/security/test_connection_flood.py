"""The control plane stays reachable (issue 40, item 7), as a local program floods it.

The attack seen: an agent (another program on 127.0.0.1, the person's own
address) held 64 connections and every request of the person's page got a
503: no way to open the UI and cancel the turn.  Here a flooder holds 64, then
200 connections from 127.0.0.1 in each shape an attacker has at hand:

- ``silent``: connected, never a byte;
- ``partial``: a request head that never ends, one byte at a time;
- ``keepalive``: a complete request, answered, the connection kept;
- ``stalled``: requests for the largest static file, the answers never read;
- ``trickle``: a stream of small requests whose answers are read a little at
  a time (always a request being answered, and always some progress);
- ``websocket``: WebSocket upgrades without the token: refused, but held
  open while the server lingers on its close, then tried again;
- ``churn``: silent connections, each reopened the moment the server closes it
  (over the bound the flooder's own connections evict one another, at full
  speed, all along the person's visit).

Against a real server with the default limits, while the flood holds: the
page loads as a browser loads it (``GET /?token=…``, every asset the shell
and its modules name, fetched on up to six connections without the token,
``/api/v1/boot`` with it), the page's WebSocket connects with its token (the
bearer subprotocol), and a WebSocket client starts a mock agent turn that
runs for 10 s, cancels it, and the turn ends cancelled.  And the flood was
real: when the person is done, the flooder still holds its connections (all
but the few the person's own displaced).
"""

from __future__ import annotations

import base64
import os
import re
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
import trio
from trio_websocket import open_websocket_url

from supervisor.config import Limits
from tests.support.server import Server, running_server
from tests.support.ws import is_state, is_turn_completed, ws_client
from web.auth import SUBPROTOCOL, bearer_subprotocol
from web.listener import ConnLimits

SHAPES = ["silent", "partial", "keepalive", "stalled", "trickle", "websocket", "churn"]
#: The default bound of unauthenticated connections per address, and far over it.
COUNTS = [Limits().max_connections_per_peer, 200]
#: What a browser opens to one host at most (HTTP/1.1).
BROWSER_CONNECTIONS = 6
#: The largest static file: its answer outgrows the socket buffers when unread.
BIG_ASSET = "/static/vendor/highlight.esm.js"
#: Every wait in this file ends within this.
BOUND_S = 60


def port_of(srv: Server) -> int:
    return int(srv.url.rsplit(":", 1)[1])


def host_of(srv: Server) -> str:
    return srv.url.removeprefix("http://")


class Flood:
    """A local program holding ``count`` connections of one ``shape``."""

    def __init__(self, srv: Server, shape: str, count: int,
                 sources: tuple[str, ...] = ("127.0.0.1",)) -> None:
        self.srv = srv
        self.shape = shape
        self.count = count
        #: The loopback addresses it connects from, in turn (all of 127/8 is this host).
        self.sources = sources
        #: Open now (the server has not closed them, as far as the flooder saw).
        self.open = 0
        #: Closed by the server.
        self.closed = 0
        self.reopens = shape in ("websocket", "churn")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
                  ) -> None:
        """Opens every connection (each in its shape before the next), then
        reports started and holds them until cancelled."""
        async with trio.open_nursery() as nursery:
            for i in range(self.count):
                await nursery.start(self._hold, self.sources[i % len(self.sources)])
            task_status.started()

    async def _hold(self, source: str, *,
                    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        reported = False
        while True:
            stream = await trio.open_tcp_stream("127.0.0.1", port_of(self.srv),
                                                local_address=source)
            self.open += 1
            try:
                async with trio.open_nursery() as shaping:
                    await shaping.start(self._shape, stream)
                    if not reported:
                        task_status.started()
                        reported = True
                    if self.shape == "stalled":
                        await trio.sleep_forever()  # (reading would un-stall it)
                    if self.shape != "trickle":  # (it reads for itself)
                        await _read_to_eof(stream)
                        shaping.cancel_scope.cancel()
            except* (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # a reset: closed too
            finally:
                self.open -= 1
                stream.socket.close()
            self.closed += 1
            if not self.reopens:
                await trio.sleep_forever()
            # The refused WebSocket at a steady pace; the churn as fast as it goes.
            await trio.sleep(0.05 if self.shape == "websocket" else 0)

    async def _shape(self, stream: trio.SocketStream, *,
                     task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        host = host_of(self.srv)
        if self.shape in ("silent", "churn"):
            task_status.started()
        elif self.shape == "partial":
            await stream.send_all(f"GET / HTTP/1.1\r\nHost: {host}\r\nX-Slow: ".encode())
            task_status.started()
            while True:
                await trio.sleep(0.5)
                await stream.send_all(b"a")
        elif self.shape == "keepalive":
            await stream.send_all(f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n"
                                  .encode())
            reply = b""
            with trio.fail_after(BOUND_S):
                while not reply.endswith(b'{"status": "ok"}'):
                    data = await stream.receive_some(65536)
                    assert data, reply
                    reply += data
            task_status.started()
        elif self.shape == "stalled":
            stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            request = f"GET {BIG_ASSET} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
            await stream.send_all(request * 8)
            task_status.started()
        elif self.shape == "trickle":
            stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            request = f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
            await stream.send_all(request * 300)  # more answers than the buffers hold
            task_status.started()
            while await stream.receive_some(512):
                await trio.sleep(0.2)
            raise trio.BrokenResourceError  # (closed by the server)
        else:  # websocket, without the token
            key = base64.b64encode(os.urandom(16)).decode()
            await stream.send_all(
                f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Protocol: {SUBPROTOCOL}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n".encode())
            task_status.started()


async def _read_to_eof(stream: trio.SocketStream) -> None:
    while await stream.receive_some(65536):
        pass


async def page_loads(srv: Server) -> int:
    """Loads the page as a browser does; the number of files it fetched."""
    limits = httpx.Limits(max_connections=BROWSER_CONNECTIONS)
    async with httpx.AsyncClient(base_url=srv.url, limits=limits, timeout=BOUND_S) as http:
        # The login address: the top-level visit that hands the page its token.
        shell = await http.get("/", params={"token": srv.token})
        assert shell.status_code == 200, shell.text
        assert '<div id="app"' in shell.text
        wanted = set(re.findall(r'(?:href|src)="(/static/[^"]+)"', shell.text))
        assert "/static/app.js" in wanted
        fetched: dict[str, str] = {}
        while wanted:
            batch, wanted = wanted, set()

            async def fetch(path: str) -> None:
                # Assets go without the token, as a browser fetches them; and
                # as a browser does, a GET on a kept-alive connection that
                # closes under it is sent once more (on a new connection).
                try:
                    answer = await http.get(path)
                except (httpx.RemoteProtocolError, httpx.ReadError):
                    answer = await http.get(path)
                assert answer.status_code == 200, (path, answer.status_code, answer.text[:200])
                fetched[path] = answer.text

            async with trio.open_nursery() as nursery:
                for path in sorted(batch):
                    nursery.start_soon(fetch, path)
            for path in batch:
                if path.endswith(".js"):
                    base = path.rsplit("/", 1)[0]
                    for name in re.findall(r'(?:from|import)\s*\(?\s*"(\./[^"]+)"',
                                           fetched[path]):
                        found = f"{base}/{name[2:]}"
                        if found not in fetched:
                            wanted.add(found)
        boot = await http.get("/api/v1/boot", headers=srv.auth)
        assert boot.status_code == 200, boot.text
        assert "agent_availability" in boot.json()
        return len(fetched)


async def page_socket_connects(srv: Server) -> None:
    """The page's own WebSocket: the token in the bearer subprotocol."""
    async with open_websocket_url(srv.ws_url, subprotocols=[
            SUBPROTOCOL, bearer_subprotocol(srv.token)]) as ws:
        await ws.send_message('{"id":"1","type":"request","action":"task.list","payload":{}}')
        assert '"task.list"' in str(await ws.get_message())


async def cancel_lands(srv: Server) -> None:
    async with ws_client(srv) as ws:
        task = await ws.call("task.create", {"title": "flooded"})
        sid = (await ws.call("session.launch", {"task_id": task["id"]}))["id"]
        await ws.call("session.subscribe", {"session_id": sid})
        await ws.call("message.add", {"session_id": sid, "content": "/delay 10000"})
        await ws.wait_for(is_state(sid, "RUNNING"), timeout=BOUND_S)
        answer = await ws.call("agent.cancel", {"session_id": sid}, timeout=BOUND_S)
        assert answer["success"] is True
        done = await ws.wait_for(is_turn_completed(sid), timeout=BOUND_S)
        # Cancelled, long before the turn's 10 s were up.
        assert done["payload"]["stop_reason"] == "cancelled"


async def under_flood(tmp_path: Path, shape: str, count: int,
                      person: Callable[[Server], Awaitable[None]]) -> None:
    with trio.fail_after(BOUND_S * 2):
        async with running_server(tmp_path / "data") as srv, trio.open_nursery() as nursery:
            flood = Flood(srv, shape, count)
            await nursery.start(flood.run)
            held = flood.open
            if shape in ("silent", "partial", "keepalive"):
                # Up to the bound, the flood's own newer connections displaced its older ones.
                assert held == min(count, COUNTS[0]), (held, flood.closed)
            started = trio.current_time()
            await person(srv)
            print(f"{shape}-{count}: the person took {trio.current_time() - started:.2f}s; "
                  f"flood open {flood.open}, closed by the server {flood.closed}")
            if shape in ("silent", "partial", "keepalive"):
                # Still flooding: the person displaced only a few connections.
                # (A stalled or trickling flooder sees its close late: it is
                # not reading, or has its buffer to read first.)
                assert flood.open >= held - 3 * BROWSER_CONNECTIONS, (held, flood.open)
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("shape", SHAPES)
async def test_the_page_loads_and_a_cancel_lands_under_a_flood(
        tmp_path: Path, shape: str, count: int) -> None:
    async def person(srv: Server) -> None:
        assert await page_loads(srv) > 20  # the shell's assets and the modules they import
        await page_socket_connects(srv)
        await cancel_lands(srv)

    await under_flood(tmp_path, shape, count, person)


async def test_a_flood_from_many_loopback_addresses_meets_the_total_bound(
        tmp_path: Path) -> None:
    """Every 127.x.y.z is this host: 300 connections from five addresses stay
    under the bound per address (64) each; the bound in all (256) holds them,
    and makes room for the person."""
    sources = tuple(f"127.0.0.{i}" for i in range(2, 7))
    async with running_server(tmp_path / "data") as srv, trio.open_nursery() as nursery:
        flood = Flood(srv, "silent", 300, sources)
        with trio.fail_after(BOUND_S):
            await nursery.start(flood.run)
        held = flood.open
        assert held == ConnLimits().unauthenticated, (held, flood.closed)
        with trio.fail_after(BOUND_S):
            assert await page_loads(srv) > 20
            await page_socket_connects(srv)
            await cancel_lands(srv)
        assert flood.open >= held - 3 * BROWSER_CONNECTIONS, (held, flood.open)
        nursery.cancel_scope.cancel()
