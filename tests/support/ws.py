"""The one WebSocket client of the tests and the benchmarks (trio-websocket).

Every frame is timestamped (``time.perf_counter``) the moment the reader task
gets it, before anything else is done with it, so the benchmarks can measure
latency with it.  Then:

- a response or error whose id is one of ours wakes the ``Pending`` request
  that sent it (send time and answer time recorded);
- anything else is a notification: offered to the armed ``Watch``es (one-shot
  predicates registered before the action that triggers them), and kept in
  ``notifications`` (with ``arrivals``) unless the client was opened with
  ``keep=False`` — long benchmark runs would otherwise grow without bound.

The per-frame path is kept cheap: no allocation beyond the parsed frame, and
the wake-up event of ``changed()`` exists only while someone waits on it.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio
from trio_websocket import (
    ConnectionClosed,
    WebSocketConnection,
    connect_websocket_url,
    open_websocket_url,
)

from . import frames_check

__all__ = [
    "Endpoint",
    "Frame",
    "Pending",
    "RequestFailed",
    "Watch",
    "WsClient",
    "is_agent_output",
    "is_cancellation",
    "is_state",
    "is_turn_completed",
    "now",
    "open_client",
    "ws_client",
]

now = time.perf_counter
Frame = dict[str, Any]
Predicate = Callable[[Frame], bool]

_ids = itertools.count(1)
#: What ends the reader: the socket closed, by either side.
_CLOSED = (ConnectionClosed, trio.ClosedResourceError, trio.BrokenResourceError)


class Endpoint(Protocol):
    """A running server, in this process or a subprocess."""

    @property
    def ws_url(self) -> str: ...

    @property
    def token(self) -> str: ...


class RequestFailed(Exception):
    """The server answered a request with an error frame."""

    def __init__(self, action: str, frame: Frame) -> None:
        super().__init__(f"{action} failed: {frame.get('payload')}")
        self.frame = frame


@dataclass(eq=False)
class Pending:
    """One request in flight: when it was sent and when its answer arrived."""

    action: str
    rid: str = ""
    #: The payload sent, and whether the published schema refuses it.
    payload: dict[str, Any] | None = None
    refused: bool = False
    sent_at: float = 0.0
    answered_at: float = 0.0
    frame: Frame | None = None
    done: trio.Event = field(default_factory=trio.Event)

    async def wait(self, within: float = 30) -> Frame:
        with trio.fail_after(within):
            await self.done.wait()
        assert self.frame is not None
        return self.frame

    @property
    def ok(self) -> bool:
        return self.frame is not None and self.frame["type"] == "response"

    @property
    def ms(self) -> float:
        return (self.answered_at - self.sent_at) * 1000


@dataclass(eq=False)
class Watch:
    """The first notification that matches ``pred`` after the watch was armed."""

    pred: Predicate
    at: float = 0.0
    frame: Frame | None = None
    done: trio.Event = field(default_factory=trio.Event)

    async def wait(self, within: float = 30) -> float:
        """The arrival time of the matching frame."""
        with trio.fail_after(within):
            await self.done.wait()
        return self.at


class WsClient:
    """One connection: requests answered by id, notifications collected and watched.

    ``inspect`` (optional) sees every message's raw text before it is parsed (the soak
    looks for tracebacks in every frame)."""

    def __init__(self, conn: WebSocketConnection, *, keep: bool = True,
                 inspect: Callable[[str], None] | None = None,
                 request_timeout: float = 15) -> None:
        self.conn = conn
        self.request_timeout = request_timeout
        self.keep = keep
        self.inspect = inspect
        self.notifications: list[Frame] = []
        #: ``arrivals[i]`` is when ``notifications[i]`` was received.
        self.arrivals: list[float] = []
        #: Notifications received, kept or not.
        self.received = 0
        self.closed = False
        self._pending: dict[str, Pending] = {}
        self._watches: list[Watch] = []
        self._changed: trio.Event | None = None

    async def reader(self) -> None:
        try:
            while True:
                data = await self.conn.get_message()
                at = now()
                text = data if isinstance(data, str) else data.decode(errors="replace")
                if self.inspect is not None:
                    self.inspect(text)
                frame = json.loads(text)
                frames_check.check_received(frame)
                if frame.get("type") in ("response", "error"):
                    pending = self._pending.pop(frame.get("id"), None)
                    if pending is not None:
                        if pending.refused and frame["type"] != "error":
                            raise frames_check.SchemaMismatch(
                                f"the schema refuses {pending.action} {pending.payload}, "
                                f"the server accepted it: {frame}")
                        pending.answered_at, pending.frame = at, frame
                        pending.done.set()
                        self._wake()
                        continue
                self.received += 1
                if self.keep:
                    self.notifications.append(frame)
                    self.arrivals.append(at)
                if self._watches:
                    for watch in list(self._watches):
                        if watch.pred(frame):
                            watch.at, watch.frame = at, frame
                            watch.done.set()
                            self._watches.remove(watch)
                self._wake()
        except _CLOSED:
            pass
        finally:
            self.closed = True
            self._wake()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def changed(self) -> None:
        """Returns after the next frame (or the connection's end)."""
        if self.closed:
            return
        if self._changed is None:
            self._changed = trio.Event()
        await self._changed.wait()

    # -- sending ----------------------------------------------------------------

    async def send_raw(self, data: str | bytes) -> None:
        await self.conn.send_message(data)

    async def send(self, action: str, payload: dict[str, Any] | None = None) -> Pending:
        rid = f"r{next(_ids)}"
        pending = self._pending[rid] = Pending(action, rid, payload)
        envelope = {"id": rid, "type": "request", "action": action,
                    "payload": payload or {}, "timestamp": "2026-01-01T00:00:00Z"}
        pending.refused = frames_check.refused_by_schema(envelope)
        frame = json.dumps(envelope)
        pending.sent_at = now()
        await self.conn.send_message(frame)
        return pending

    async def request(self, action: str, payload: dict[str, Any] | None = None,
                      *, timeout: float | None = None) -> Frame:
        """The answer frame, response or error (within ``request_timeout`` by default)."""
        pending = await self.send(action, payload)
        try:
            return await pending.wait(self.request_timeout if timeout is None else timeout)
        finally:
            self._pending.pop(pending.rid, None)

    async def call(self, action: str, payload: dict[str, Any] | None = None,
                   *, timeout: float | None = None) -> Any:
        """The response's payload; an error frame raises ``RequestFailed``."""
        frame = await self.request(action, payload, timeout=timeout)
        if frame["type"] != "response":
            raise RequestFailed(action, frame)
        return frame["payload"]

    # -- notifications ------------------------------------------------------------

    def watch(self, pred: Predicate) -> Watch:
        w = Watch(pred)
        self._watches.append(w)
        return w

    async def wait_for(self, pred: Predicate, *, timeout: float = 10, after: int = 0) -> Frame:
        """The first kept notification from index ``after`` on that matches ``pred``."""
        with trio.fail_after(timeout):
            seen = after
            while True:
                for frame in self.notifications[seen:]:
                    if pred(frame):
                        return frame
                seen = len(self.notifications)
                if self.closed:
                    raise ConnectionError("the server closed the connection")
                await self.changed()

    def of(self, action: str, session_id: str | None = None) -> list[dict[str, Any]]:
        """The payloads of the kept notifications of ``action`` (for one session)."""
        return [n["payload"] for n in self.notifications if n.get("action") == action
                and (session_id is None or n["payload"].get("session_id") == session_id)]

    async def aclose(self) -> None:
        """Closes the WebSocket (the reader then ends)."""
        try:
            await self.conn.aclose()
        finally:
            await _close_stream(self.conn)


async def _close_stream(conn: WebSocketConnection) -> None:
    # trio-websocket 0.12 leaves the TCP stream open when the server closed the
    # WebSocket first (a ResourceWarning later); close it here.
    with trio.CancelScope(shield=True):
        await conn._stream.aclose()


def _headers(endpoint: Endpoint, token: str | None,
             extra: list[tuple[str, str]] | None) -> list[tuple[bytes, bytes]]:
    return [(name.encode(), value.encode()) for name, value in
            [("Authorization", f"Bearer {token or endpoint.token}"), *(extra or [])]]


@asynccontextmanager
async def ws_client(endpoint: Endpoint, *, token: str | None = None,
                    headers: list[tuple[str, str]] | None = None, keep: bool = True,
                    max_message_size: int = 64 * 1024 * 1024,
                    ) -> AsyncIterator[WsClient]:
    """A client whose reader runs while the block runs; closed at its end."""
    opened: list[WebSocketConnection] = []
    try:
        async with trio.open_nursery() as nursery, open_websocket_url(
            endpoint.ws_url, extra_headers=_headers(endpoint, token, headers),
            max_message_size=max_message_size,
        ) as conn:
            opened.append(conn)
            client = WsClient(conn, keep=keep)
            nursery.start_soon(client.reader)
            try:
                yield client
            finally:
                nursery.cancel_scope.cancel()
    finally:
        for conn in opened:
            await _close_stream(conn)


async def open_client(nursery: trio.Nursery, endpoint: Endpoint, *, keep: bool = True,
                      inspect: Callable[[str], None] | None = None,
                      request_timeout: float = 15,
                      receive_buffer_size: int = 65536,
                      max_message_size: int = 64 * 1024 * 1024) -> WsClient:
    """A client whose socket and reader live in ``nursery`` (for many connections at once,
    or one closed by another task than the one that opened it): ``aclose`` ends it."""
    conn = await connect_websocket_url(
        nursery, endpoint.ws_url, extra_headers=_headers(endpoint, None, None),
        max_message_size=max_message_size, receive_buffer_size=receive_buffer_size)
    client = WsClient(conn, keep=keep, inspect=inspect, request_timeout=request_timeout)
    nursery.start_soon(client.reader)
    return client


# -- predicates over notifications ----------------------------------------------------


def is_cancellation(session_id: str, pending: bool) -> Predicate:
    def pred(f: Frame) -> bool:
        p = f.get("payload") or {}
        return (f.get("action") == "session.cancellation_changed"
                and p.get("session_id") == session_id and p.get("cancellation_pending") is pending)
    return pred


def is_state(session_id: str, state: str) -> Predicate:
    def pred(f: Frame) -> bool:
        p = f.get("payload") or {}
        return (f.get("action") == "session.state_changed"
                and p.get("session_id") == session_id and p.get("new_state") == state)
    return pred


def is_agent_output(session_id: str) -> Predicate:
    def pred(f: Frame) -> bool:
        p = f.get("payload") or {}
        msg = p.get("message") or {}
        return (f.get("action") in ("session.message.added", "session.message.updated")
                and p.get("session_id") == session_id and msg.get("role") == "agent")
    return pred


def is_turn_completed(session_id: str) -> Predicate:
    def pred(f: Frame) -> bool:
        p = f.get("payload") or {}
        return f.get("action") == "session.turn.completed" and p.get("session_id") == session_id
    return pred
