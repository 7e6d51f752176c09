"""The WebSocket gateway at ``/ws`` (DESIGN.md §4).

One connection = one nursery (``serve``):

    serve                     the connection's nursery
    ├── Outbox.run            the connection's writer (web.outbox)
    ├── _close_on_shutdown    closes the socket (1001) when the server stops
    └── _request (each)       one per request frame, bounded in number

Every outbound frame (responses and notifications alike) goes through the
connection's bounded ``Outbox`` (the bus's sink for this connection), so there
is one order and one write path; the outbox owns the write policy (at once
from the offering task, or batched by its writer).  A client that falls
``ws_send_queue`` frames behind is dropped; it resyncs from the subscribe
snapshot when it reconnects.  A client that stops reading altogether (TCP
window at zero) is dropped after ``SEND_TIMEOUT_S``.  When the client goes away the
nursery is cancelled: waits on accepted cancel operations are abandoned, the
operations themselves (in the orchestrator's nursery) are not.  When the
server stops, every connection is closed with 1001 at once, so the graceful
shutdown does not wait out Hypercorn's grace period.

Bad input always gets an ``error`` envelope and the connection stays open.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Final, Protocol

import trio

from supervisor.bus import envelope
from supervisor.errors import SupervisorError
from supervisor.notify import workspace_channel
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor

from .actions import (
    ACTIONS,
    ORDERED_ACTIONS,
    STORE_ERRORS,
    join_cancel,
    join_known_cancel,
    store_failed,
)
from .contract.requests import SessionRef, SessionSubscribe, parse
from .outbox import FrameWriter, Outbox
from .validate import BadInput
from .wsconn import WebSocketClosed

__all__ = ["Gateway"]

log = logging.getLogger(__name__)

SEND_TIMEOUT_S: Final = 10.0
MAX_IN_FLIGHT: Final = 512


class Socket(FrameWriter, Protocol):
    """A WebSocket (``web.wsconn.ServerWebSocket``): ``receive`` raises
    ``WebSocketClosed`` (or is cancelled) when the client has gone."""

    async def receive(self) -> str | bytes: ...


class Gateway:
    def __init__(self, sup: Supervisor) -> None:
        self.sup = sup
        self.max_frame = sup.config.limits.max_ws_frame_bytes
        self.connections = 0
        self.closing = trio.Event()

    def close_all(self) -> None:
        """Server shutdown: close every connection (1001, going away)."""
        self.closing.set()

    async def serve(self, ws: Socket, caller: Caller) -> None:
        in_flight = _InFlight()
        ordered = _Sequencer()
        sub = Outbox(ws, self.sup.bus.subscriber(), requests=in_flight,
                     closing=self.closing, send_timeout_s=SEND_TIMEOUT_S)
        # Every connection follows its workspace's task and session lists.
        self.sup.bus.subscribe(workspace_channel(caller.workspace_id), sub.mailbox)
        self.connections += 1
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer, sub, nursery.cancel_scope)
                nursery.start_soon(self._close_on_shutdown, ws, nursery.cancel_scope)
                while not sub.overflowed:
                    try:
                        data = await ws.receive()
                    except WebSocketClosed:
                        break
                    self._dispatch(data, sub, caller, nursery, in_flight, ordered)
                nursery.cancel_scope.cancel()
        finally:
            self.connections -= 1
            sub.close()

    @staticmethod
    async def _writer(sub: Outbox, scope: trio.CancelScope) -> None:
        await sub.run()
        scope.cancel()  # the connection ends with its writer

    async def _close_on_shutdown(self, ws: Socket, scope: trio.CancelScope) -> None:
        await self.closing.wait()
        with trio.move_on_after(1):
            await ws.close(1001, "server shutting down")
        scope.cancel()

    # -- requests -------------------------------------------------------------

    def _dispatch(self, data: str | bytes | None, sub: Outbox, caller: Caller,
                  nursery: trio.Nursery, in_flight: _InFlight, ordered: _Sequencer) -> None:
        req_id: str = ""
        action = ""
        try:
            # Quart hands an empty binary frame over as None (``bytes or text``).
            if data is None or isinstance(data, bytes):
                raise BadInput("BAD_REQUEST", "binary frames are not supported; send JSON text")
            if len(data) > self.max_frame:
                # Not parsed; the id and action are read from the head of the
                # frame when they are there, so the client can match the error.
                req_id, action = _head_id_action(data)
                raise BadInput("BAD_REQUEST", f"frame larger than {self.max_frame} bytes (the "
                               "server's [limits] max_ws_frame_bytes): not read, nothing done")
            try:
                msg = json.loads(data)
            except (ValueError, RecursionError):
                raise BadInput("BAD_REQUEST", "frame is not valid JSON") from None
            if not isinstance(msg, dict):
                raise BadInput("BAD_REQUEST", "frame must be a JSON object (the envelope)")
            raw_id = msg.get("id")
            if isinstance(raw_id, str | int) and not isinstance(raw_id, bool):
                req_id = str(raw_id)[:128]
            raw_action = msg.get("action")
            action = raw_action[:100] if isinstance(raw_action, str) else ""
            if msg.get("type") != "request":
                raise BadInput("BAD_REQUEST", 'type must be "request"')
            if not action:
                raise BadInput("BAD_REQUEST", "action is required")
            payload = msg.get("payload", {})
            if payload is None:
                payload = {}
            if not isinstance(payload, dict):
                raise BadInput("VALIDATION_ERROR", "payload must be a JSON object")
            if action not in ACTIONS and action not in ("session.subscribe",
                                                        "session.unsubscribe"):
                raise BadInput("UNKNOWN_ACTION", f"unknown action {action!r}")
            if sub.in_flight >= MAX_IN_FLIGHT:
                raise BadInput("CONFLICT", f"more than {MAX_IN_FLIGHT} requests in flight")
        except BadInput as exc:
            sub.offer(envelope("error", action, {"code": exc.code, "message": exc.message},
                               req_id or None))
            return
        in_flight.count += 1
        if action == "agent.cancel" and join_known_cancel(self.sup, caller, payload,
                                                          sub.mailbox, req_id):
            in_flight.count -= 1  # owed by its operation now (``Subscriber.owed``), or answered
            return
        # Taken here, in frame order (tasks start in no particular order).
        ticket = ordered.take() if action in ORDERED_ACTIONS else None
        nursery.start_soon(self._request, sub, caller, req_id, action, payload, in_flight,
                           ordered, ticket)

    async def _request(self, sub: Outbox, caller: Caller, req_id: str, action: str,
                       payload: dict[str, Any], in_flight: _InFlight,
                       ordered: _Sequencer, ticket: int | None) -> None:
        try:
            if ticket is not None:
                await ordered.wait_for(ticket)
            if action == "session.subscribe":
                await self._subscribe(sub, caller, req_id, payload)
                return
            if action == "agent.cancel":
                # Answered by its operation's settle, as the fast path's (or, with
                # a revert, after it): no response of this task's.
                await join_cancel(self.sup, caller, payload, sub.mailbox, req_id)
                return
            if action == "session.unsubscribe":
                self.sup.bus.unsubscribe(
                    parse(SessionRef, payload, self.sup.config.limits).session_id, sub.mailbox)
                result: dict[str, Any] = {"success": True}
            else:
                result = await ACTIONS[action](self.sup, caller, payload)
            sub.offer(envelope("response", action, result, req_id or None))
        except (BadInput, SupervisorError) as exc:
            code = exc.code
            message = exc.message if isinstance(exc, BadInput) else str(exc)
            sub.offer(envelope("error", action, {"code": code, "message": message},
                               req_id or None))
        except STORE_ERRORS as exc:
            log.warning("action %s: %s", action, exc)
            sub.offer(envelope("error", action,
                               {"code": "INTERNAL_ERROR", "message": store_failed(exc)},
                               req_id or None))
        except Exception:
            log.exception("action %s failed", action)
            sub.offer(envelope("error", action,
                               {"code": "INTERNAL_ERROR", "message": "internal error"},
                               req_id or None))
        finally:
            in_flight.count -= 1
            if ticket is not None:
                ordered.done(ticket)

    async def _subscribe(self, sub: Outbox, caller: Caller, req_id: str,
                         payload: dict[str, Any]) -> None:
        req = parse(SessionSubscribe, payload, self.sup.config.limits)
        session_id = req.session_id
        # Opt-in (docs/contract-notes.md): a streamed text message's growth comes
        # as session.message.appended instead of the whole message.
        text_appends = req.text_appends
        # Authorize before subscribing: another workspace's session is not found.
        await self.sup.orchestrator.session(caller, session_id)
        self.sup.bus.subscribe(session_id, sub.mailbox, text_appends=text_appends)
        session = await self.sup.orchestrator.session(caller, session_id)
        sub.offer(envelope("response", "session.subscribe", {"success": True}, req_id or None))
        sub.offer(envelope("notification", "session.state_changed",
                           self.sup.notify.state_payload(session)))
        # DESIGN.md §9: the queue as it is, once right after the snapshot.
        queue = await self.sup.orchestrator.queue.state(session_id)
        sub.offer(envelope("notification", "session.queue.changed", queue.payload()))


_HEAD_ID: Final = re.compile(r'"id"\s*:\s*"([^"\\]{1,128})"')
_HEAD_ACTION: Final = re.compile(r'"action"\s*:\s*"([^"\\]{1,100})"')


def _head_id_action(data: str) -> tuple[str, str]:
    """The request id and action of an oversized frame, if they lead it."""
    head = data[:1024]
    found_id = _HEAD_ID.search(head)
    found_action = _HEAD_ACTION.search(head)
    return (found_id.group(1) if found_id else "",
            found_action.group(1) if found_action else "")


class _InFlight:
    """Requests of one connection still running (bounded by MAX_IN_FLIGHT)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


class _Sequencer:
    """One connection's ordered requests run one at a time, in frame order:
    tickets are taken when frames are read, served in ticket order."""

    __slots__ = ("_next", "_serving", "_waiting")

    def __init__(self) -> None:
        self._next = 0
        self._serving = 0
        self._waiting: dict[int, trio.Event] = {}

    def take(self) -> int:
        ticket = self._next
        self._next += 1
        return ticket

    async def wait_for(self, ticket: int) -> None:
        if ticket != self._serving:
            event = self._waiting.setdefault(ticket, trio.Event())
            await event.wait()

    def done(self, ticket: int) -> None:
        # Only the ticket being served finishes (one at a time), even on errors.
        self._serving = ticket + 1
        event = self._waiting.pop(self._serving, None)
        if event is not None:
            event.set()
