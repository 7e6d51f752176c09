"""A small trio-websocket client for the benchmark, with arrival timestamps.

Every frame is timestamped (``time.perf_counter``) the moment the reader task
gets it, before anything else is done with it.  Responses wake the request
that sent them; notifications are counted and offered to ``Watch``es (one-shot
predicates registered before the action that triggers them).
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, connect_websocket_url

__all__ = ["Conn", "Pending", "RequestFailed", "Watch", "now", "open_conn"]

now = time.perf_counter
Frame = dict[str, Any]

_ids = itertools.count(1)


class RequestFailed(Exception):
    def __init__(self, action: str, frame: Frame) -> None:
        super().__init__(f"{action} failed: {frame.get('payload')}")
        self.frame = frame


@dataclass(eq=False)
class Pending:
    """One request in flight: when it was sent and when its answer arrived."""

    action: str
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

    pred: Callable[[Frame], bool]
    at: float = 0.0
    frame: Frame | None = None
    done: trio.Event = field(default_factory=trio.Event)

    async def wait(self, within: float = 30) -> float:
        with trio.fail_after(within):
            await self.done.wait()
        return self.at


class Conn:
    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self._pending: dict[str, Pending] = {}
        self._watches: list[Watch] = []
        self.counts: Counter[str] = Counter()
        #: (arrival, session_id, pending, revision) of every cancellation_changed.
        self.cancellation_log: list[tuple[float, str, bool, int]] = []
        self.closed = False

    async def reader(self) -> None:
        try:
            while True:
                data = await self.ws.get_message()
                at = now()
                frame = json.loads(data)
                kind = frame.get("type")
                if kind in ("response", "error"):
                    pending = self._pending.pop(frame.get("id"), None)
                    if pending is not None:
                        pending.answered_at, pending.frame = at, frame
                        pending.done.set()
                    continue
                action = frame.get("action", "")
                self.counts[action] += 1
                if action == "session.cancellation_changed":
                    p = frame["payload"]
                    self.cancellation_log.append(
                        (at, p["session_id"], p["cancellation_pending"],
                         p["cancellation_revision"]))
                if self._watches:
                    for watch in list(self._watches):
                        if watch.pred(frame):
                            watch.at, watch.frame = at, frame
                            watch.done.set()
                            self._watches.remove(watch)
        except ConnectionClosed:
            self.closed = True

    def watch(self, pred: Callable[[Frame], bool]) -> Watch:
        w = Watch(pred)
        self._watches.append(w)
        return w

    async def send(self, action: str, payload: dict[str, Any] | None = None) -> Pending:
        rid = f"b{next(_ids)}"
        pending = self._pending[rid] = Pending(action)
        frame = json.dumps({"id": rid, "type": "request", "action": action,
                            "payload": payload or {}, "timestamp": "2026-01-01T00:00:00Z"})
        pending.sent_at = now()
        await self.ws.send_message(frame)
        return pending

    async def call(self, action: str, payload: dict[str, Any] | None = None, *,
                   within: float = 60) -> Any:
        pending = await self.send(action, payload)
        frame = await pending.wait(within)
        if frame["type"] != "response":
            raise RequestFailed(action, frame)
        return frame["payload"]


async def open_conn(nursery: trio.Nursery, ws_url: str, token: str) -> Conn:
    """A connection whose socket and reader live in ``nursery``."""
    ws = await connect_websocket_url(
        nursery, ws_url, extra_headers=[(b"Authorization", f"Bearer {token}".encode())],
        max_message_size=16 * 1024 * 1024, receive_buffer_size=65536)
    conn = Conn(ws)
    nursery.start_soon(conn.reader)
    return conn


# -- predicates ---------------------------------------------------------------


def is_cancellation(session_id: str, pending: bool) -> Callable[[Frame], bool]:
    def pred(f: Frame) -> bool:
        p = f.get("payload") or {}
        return (f.get("action") == "session.cancellation_changed"
                and p.get("session_id") == session_id and p.get("cancellation_pending") is pending)
    return pred


def is_state(session_id: str, state: str) -> Callable[[Frame], bool]:
    def pred(f: Frame) -> bool:
        p = f.get("payload") or {}
        return (f.get("action") == "session.state_changed"
                and p.get("session_id") == session_id and p.get("new_state") == state)
    return pred


def is_agent_output(session_id: str) -> Callable[[Frame], bool]:
    def pred(f: Frame) -> bool:
        p = f.get("payload") or {}
        msg = p.get("message") or {}
        return (f.get("action") in ("session.message.added", "session.message.updated")
                and p.get("session_id") == session_id and msg.get("role") == "agent")
    return pred
