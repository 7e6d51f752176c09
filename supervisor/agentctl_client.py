"""The agentctl client: an ``AgentAdapter`` whose agent runs behind agentctl.

The lifecycle manager drives it exactly like a local adapter::

    nursery.start_soon(adapter.connection.run)   # the event stream reader
    await adapter.initialize()                   # the stream is up, agentctl answers
    await adapter.new_session(cwd)               # POST /api/v1/session
    await adapter.prompt(text)                   # POST /api/v1/prompt, then the
                                                 # TurnEnded from the event stream
    await adapter.cancel()                       # POST /api/v1/acp/cancel (join_s=0)

``connection.run`` owns one nursery: the WebSocket to ``/api/v1/events`` and
its reader.  Agent events go to ``events`` in agentctl's order (sequence
numbers are checked: a missing event closes the link).  Every HTTP call is
bounded twice, by httpx's timeout and by ``trio.fail_after``; the event stream
is bounded by agentctl's heartbeats (``heartbeat_s`` of silence = lost).

Loss of agentctl looks like a crashed agent: an unreachable agentctl, a
refused token, a dropped or silent event stream, ``agent not running``, or
the agent's own exit all set ``connection.closed``, close ``events`` (after a
notice naming the reason), and end a pending ``prompt`` with
``TurnEnded(stop_reason="error")``; later calls raise ``AgentClosed``.  An
HTTP timeout raises ``AgentTimeout`` and leaves the link up (agentctl may
only be slow; a dead one stops its heartbeats).

``cancel`` writes the protocol cancel through agentctl and returns, like a
local adapter's; the join window and escalation stay the lifecycle's, which
sees the turn end on ``events``.  No asyncio: httpx runs on httpcore's Trio
backend, the stream on trio-websocket.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import ssl
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final, cast
from urllib.parse import quote, urlsplit

import httpx
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

from protocols.adapters import AgentAdapter, AgentClosed, AgentTimeout
from protocols.events import AgentEvent, AgentNotice, TurnEnded
from protocols.jsonrpc import LocalProtocolError
from protocols.process import terminate_group
from web.agentctl.wire import CONTROL_TYPES, TOKEN_ENV, WireError, decode_event

from .config import Config
from .executors import LaunchedAgent
from .profiles import AgentProfile

__all__ = [
    "AgentctlAdapter",
    "AgentctlLink",
    "AgentctlTimeouts",
    "agentctl_token",
    "launch_agentctl",
    "spawn_agentctl",
]

log = logging.getLogger(__name__)

_MAX_FRAME: Final = 64 * 1024 * 1024
#: The backend's variables a spawned agentctl (and so its agent) does not inherit.
_PRIVATE_ENV: Final = frozenset({"TURNVISOR_TOKEN", TOKEN_ENV})


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentctlTimeouts:
    #: TCP + WebSocket handshake of the event stream, and ``initialize``'s status call.
    connect_s: float = 10.0
    #: One control call: prompt start, cancel write, permission answer.
    request_s: float = 10.0
    #: ``POST /api/v1/session`` (agentctl may spawn and initialize the agent).
    session_s: float = 60.0
    #: One turn at most.
    turn_s: float = 3600.0
    #: Silence on the event stream (agentctl sends a heartbeat every 5 s) before
    #: the link is declared lost.
    heartbeat_s: float = 20.0
    #: Re-attaching to a session with a turn still running (a previous backend's):
    #: how long to wait for that turn to end after cancelling it.
    attach_join_s: float = 5.0


@dataclass(eq=False)
class _PendingTurn:
    id: str
    done: trio.Event = field(default_factory=trio.Event)
    ended: TurnEnded | None = None
    #: Set once ``POST /prompt`` has been answered (or failed).  A cancel waits
    #: for it: the two requests may travel on different connections, and a
    #: cancel that overtook its prompt would find no turn and be lost.
    answered: trio.Event = field(default_factory=trio.Event)


class AgentctlLink:
    """The lifecycle's view of the link (``run``, ``closed``, ``close_reason``),
    the event stream reader behind it, and the bounded HTTP calls."""

    def __init__(self, url: str, token: str, timeouts: AgentctlTimeouts, *,
                 owner: str | None = None, event_buffer: int = 1024) -> None:
        self.url = url.rstrip("/")
        #: Announced on the event stream: agentctl keeps a connected owner's session.
        self.owner = owner
        self.timeouts = timeouts
        self.closed = trio.Event()
        self.close_reason = ""
        self.connected = trio.Event()
        #: The Hello frame (agentctl's status when the stream opened).
        self.hello: dict[str, Any] = {}
        self.last_seq: int | None = None
        #: The agentctl session this link serves: the exit of the agent that
        #: holds it is this link's end (an agent replaced on purpose is not).
        self.session_id: str | None = None
        self._token = token
        self._scope: trio.CancelScope | None = None
        self._turn: _PendingTurn | None = None
        self._events_send, self.events = trio.open_memory_channel[AgentEvent](event_buffer)
        self.http = httpx.AsyncClient(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(timeouts.request_s))

    # -- the reader -----------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read the event stream until it ends; then the link is closed."""
        task_status.started()
        reason = "agentctl event stream ended"
        quiet = False
        stream: _EventStream | None = None
        try:
            with trio.CancelScope() as scope:
                self._scope = scope
                if self.closed.is_set():
                    return
                # Reachability and the token first, over plain HTTP, so that the
                # usual failures read as plainly as they are.
                try:
                    await self.request("GET", "/api/v1/status", None,
                                       timeout_s=self.timeouts.connect_s)
                except (AgentClosed, AgentTimeout) as exc:
                    reason = str(exc)
                    return
                try:
                    with trio.fail_after(self.timeouts.connect_s):
                        stream = await _EventStream.open(
                            self.url + "/api/v1/events" + (
                                f"?owner={quote(self.owner, safe='')}" if self.owner else ""),
                            self._token, max_message=_MAX_FRAME)
                        hello = json.loads(await stream.receive_text() or "null")
                except trio.TooSlowError:
                    reason = (f"agentctl at {self.url} did not open its event stream within "
                              f"{self.timeouts.connect_s:g}s")
                    return
                except (OSError, trio.BrokenResourceError, _StreamError, ValueError) as exc:
                    reason = f"agentctl's event stream at {self.url} failed: {exc}"
                    return
                if not isinstance(hello, dict) or hello.get("type") != "Hello":
                    reason = "agentctl's event stream did not start with Hello" + (
                        f" ({stream.close_reason})" if stream.close_reason else "")
                    return
                self.hello = hello
                self.last_seq = int(hello.get("last_seq", 0))
                self.connected.set()
                reason = await self._read(stream)
        except trio.Cancelled:
            # Its owner stopped it (the execution ends): not a loss worth a warning.
            reason, quiet = "agentctl client stopped", True
            raise
        finally:
            if stream is not None:
                await stream.aclose()
            self.close(reason, quiet=quiet)

    async def _read(self, stream: _EventStream) -> str:
        """Frames → events until the stream ends; returns why it ended."""
        while True:
            with trio.move_on_after(self.timeouts.heartbeat_s) as silent:
                try:
                    message = await stream.receive_text()
                except (OSError, trio.BrokenResourceError, _StreamError) as exc:
                    return f"agentctl event stream failed: {exc}"
            if silent.cancelled_caught:
                return f"agentctl sent nothing for {self.timeouts.heartbeat_s:g}s"
            if message is None:
                return f"agentctl event stream closed: {stream.close_reason}"
            try:
                frame = json.loads(message)
                if not isinstance(frame, dict):
                    raise WireError("a frame must be a JSON object")
                ended = await self._on_frame(frame)
            except (WireError, ValueError) as exc:
                return f"bad frame on agentctl's event stream: {exc}"
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return self.close_reason or "link closed"
            if ended is not None:
                return ended

    async def _on_frame(self, frame: dict[str, Any]) -> str | None:
        kind = frame.get("type")
        seq = frame.get("seq")
        if seq is None:
            return None  # Heartbeat (Hello and Gap come only at the start)
        if not isinstance(seq, int):
            raise WireError("seq must be an integer")
        if self.last_seq is not None and seq != self.last_seq + 1:
            return f"agentctl's event stream skipped from seq {self.last_seq} to {seq}"
        self.last_seq = seq
        if kind in CONTROL_TYPES:
            if kind == "AgentExited" and self.session_id is not None \
                    and frame.get("session_id") == self.session_id:
                code = frame.get("returncode")
                return f"agent exited (status {code})" + (
                    f": {frame['error']}" if frame.get("error") else "")
            return None
        ev = decode_event(frame)
        if isinstance(ev, TurnEnded):
            pending = self._turn
            if pending is None or frame.get("turn") != pending.id:
                # The end of a turn this adapter gave up on (escalated, timed out).
                ev = AgentNotice(message=f"late end of abandoned turn {frame.get('turn')}: "
                                         f"{ev.stop_reason}", level="info")
            else:
                pending.ended = ev
                pending.done.set()
        await self._events_send.send(ev)
        return None

    async def request(self, method: str, path: str, body: dict[str, Any] | None, *,
                      timeout_s: float, expect: tuple[int, ...] = (200,),
                      ) -> tuple[int, dict[str, Any]]:
        """One bounded request; a status in ``expect`` is returned with its body,
        any other becomes ``AgentClosed`` (the link is closed) or ``AgentTimeout``."""
        if self.closed.is_set():
            raise AgentClosed(self.close_reason)
        try:
            with trio.fail_after(timeout_s):
                resp = await self.http.request(method, path, json=body,
                                                timeout=httpx.Timeout(timeout_s))
        except (trio.TooSlowError, httpx.TimeoutException):
            raise AgentTimeout(f"agentctl did not answer {method} {path} within "
                               f"{timeout_s:g}s") from None
        except httpx.HTTPError as exc:
            self.close(f"agentctl at {self.url} is unreachable: {_describe(exc)}")
            raise AgentClosed(self.close_reason) from None
        try:
            data = resp.json()
            if not isinstance(data, dict):
                raise ValueError("not an object")
        except ValueError:
            self.close(f"agentctl answered {method} {path} with {resp.status_code} and no JSON")
            raise AgentClosed(self.close_reason) from None
        if resp.status_code in expect:
            return resp.status_code, cast(dict[str, Any], data)
        error = str(data.get("error") or resp.reason_phrase)
        if resp.status_code == 401:
            self.close("agentctl refused the token")
        elif resp.status_code == 503:
            self.close(f"agent not running behind agentctl: {data.get('detail') or error}")
        elif resp.status_code == 404 and error == "session not found":
            self.close("agentctl's agent no longer has this session (it was replaced)")
        elif resp.status_code == 409:
            raise LocalProtocolError(f"agentctl: {error}")
        else:
            raise AgentTimeout(f"agentctl {method} {path} failed ({resp.status_code}): {error}")
        raise AgentClosed(self.close_reason)

    # -- state ------------------------------------------------------------------------

    def expect_turn(self, turn: _PendingTurn | None) -> None:
        """The turn whose ``TurnEnded`` is awaited (None: none; any end is late)."""
        self._turn = turn

    def close(self, reason: str, *, quiet: bool = False) -> None:
        """Mark the link lost (idempotent): a pending turn ends with an error,
        ``events`` gets a notice and is closed, the reader is cancelled."""
        if self.closed.is_set():
            return
        self.close_reason = reason
        self.closed.set()
        log.log(logging.INFO if quiet else logging.WARNING, "agentctl %s: %s", self.url, reason)
        pending = self._turn
        if pending is not None and not pending.done.is_set():
            pending.ended = TurnEnded(stop_reason="error", error=reason)
            pending.done.set()
        try:
            self._events_send.send_nowait(AgentNotice(message=reason, level="warning"))
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        self._events_send.close()
        if self._scope is not None:
            self._scope.cancel()


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class _StreamError(Exception):
    """The event stream's WebSocket failed (refused, oversized, malformed)."""


class _EventStream:
    """A minimal WebSocket client for agentctl's event stream: wsproto over one
    Trio stream that this object owns and always closes.  Only the reading
    task uses it, so it also writes (pongs, the close) without a lock."""

    def __init__(self, stream: trio.abc.Stream, ws: WSConnection, *, max_message: int) -> None:
        self._stream = stream
        self._ws = ws
        self._max = max_message
        self._parts: list[str] = []
        self._size = 0
        self.close_reason = ""

    @classmethod
    async def open(cls, url: str, token: str, *, max_message: int) -> _EventStream:
        parts = urlsplit(url)
        secure = parts.scheme == "https"
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if secure else 80)
        stream: trio.abc.Stream
        if secure:
            stream = await trio.open_ssl_over_tcp_stream(
                host, port, ssl_context=ssl.create_default_context(), https_compatible=True)
        else:
            stream = await trio.open_tcp_stream(host, port)
        ws = WSConnection(ConnectionType.CLIENT)
        try:
            await stream.send_all(ws.send(Request(
                host=parts.netloc,
                target=(parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                extra_headers=[(b"authorization", f"Bearer {token}".encode())])))
            while True:
                for ev in ws.events():
                    if isinstance(ev, AcceptConnection):
                        return cls(stream, ws, max_message=max_message)
                    if isinstance(ev, RejectConnection | RejectData):
                        status = getattr(ev, "status_code", "?")
                        raise _StreamError(f"the WebSocket upgrade was refused ({status})")
                data = await stream.receive_some(65536)
                if not data:
                    raise _StreamError("connection closed during the WebSocket handshake")
                ws.receive_data(bytes(data))
        except BaseException:
            with trio.CancelScope(shield=True):
                await stream.aclose()
            raise

    async def receive_text(self) -> str | None:
        """The next text message; None once the stream is closed (``close_reason``)."""
        while True:
            for ev in self._ws.events():
                match ev:
                    case TextMessage(data=data, message_finished=finished):
                        self._size += len(data)
                        if self._size > self._max:
                            raise _StreamError(f"a message larger than {self._max} bytes")
                        self._parts.append(data)
                        if finished:
                            text = "".join(self._parts)
                            self._parts.clear()
                            self._size = 0
                            return text
                    case Ping():
                        await self._stream.send_all(self._ws.send(ev.response()))
                    case CloseConnection(code=code, reason=reason):
                        self.close_reason = f"code {code}" + (f": {reason}" if reason else "")
                        if self._ws.state is ConnectionState.REMOTE_CLOSING:
                            await self._stream.send_all(self._ws.send(ev.response()))
                        return None
                    case BytesMessage():
                        raise _StreamError("unexpected binary message")
            if self.close_reason:
                return None
            chunk = await self._stream.receive_some(65536)
            if not chunk:
                self.close_reason = "connection lost (no close frame)"
                return None
            self._ws.receive_data(bytes(chunk))

    async def aclose(self) -> None:
        """Say goodbye if the socket still takes it (briefly), and close it."""
        with trio.CancelScope(shield=True):
            try:
                if self._ws.state is ConnectionState.OPEN:
                    with trio.move_on_after(1.0):
                        await self._stream.send_all(self._ws.send(CloseConnection(code=1000)))
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            finally:
                await self._stream.aclose()


class AgentctlAdapter:
    """An ``AgentAdapter`` over agentctl's HTTP API and event stream.

    ``owner`` names who the agent's session belongs to (the backend's session
    id): agentctl hands the same owner its live session back (re-attachment)
    and refuses another owner's.  ``session_cwd`` is sent as the session's cwd;
    None lets agentctl use its agent's directory (paths are the agent machine's).
    """

    def __init__(self, url: str, token: str, *, owner: str | None = None,
                 session_cwd: str | None = None, protocol: str | None = None,
                 timeouts: AgentctlTimeouts | None = None) -> None:
        self.timeouts = timeouts or AgentctlTimeouts()
        self.connection = AgentctlLink(url, token, self.timeouts, owner=owner)
        self.owner = owner
        self.session_cwd = session_cwd
        self.protocol = protocol
        #: True when ``new_session`` re-attached to a live session.
        self.attached = False
        self._session_id: str | None = None
        self._turn: _PendingTurn | None = None
        self._abandoned: str | None = None

    # -- AgentAdapter -----------------------------------------------------------------

    @property
    def events(self) -> trio.MemoryReceiveChannel[AgentEvent]:
        return self.connection.events

    @property
    def operation_id(self) -> str | None:
        """agentctl's id of the running turn (what a cancel acts on)."""
        return self._turn.id if self.turn_running and self._turn is not None else None

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def turn_running(self) -> bool:
        return self._turn is not None and not self._turn.done.is_set()

    async def initialize(self) -> None:
        """Wait for the event stream (bounded), then check agentctl's answer."""
        link = self.connection
        with trio.move_on_after(self.timeouts.connect_s):
            while not (link.connected.is_set() or link.closed.is_set()):
                await _first(link.connected, link.closed)
        if link.closed.is_set():
            raise AgentClosed(link.close_reason)
        if not link.connected.is_set():
            raise AgentTimeout(f"agentctl's event stream did not open within "
                               f"{self.timeouts.connect_s:g}s")
        status = await self._call("GET", "/api/v1/status", None,
                                  timeout_s=self.timeouts.connect_s)
        if self.protocol is not None and status.get("protocol") != self.protocol:
            self.connection.close(f"agentctl runs a {status.get('protocol')} agent, the profile "
                                  f"says {self.protocol}")
            raise AgentClosed(self.connection.close_reason)

    async def new_session(self, cwd: str) -> str:
        """Start the agent's session, or re-attach to the one this ``owner`` started.

        A re-attached session may still run a turn of a previous backend (which
        has closed that turn on its side): it is cancelled, and if the agent does
        not end it within ``attach_join_s`` the agent is replaced by a fresh one,
        as the lifecycle replaces a local agent that never ended an escalated turn.
        """
        data = await self._start_session(replace=False)
        running = data.get("turn_id")
        if data.get("attached") and isinstance(running, str):
            log.info("agentctl %s: re-attached to session %s; cancelling its turn %s",
                     self.connection.url, data["session_id"], running)
            joined = await self.cancel_and_join(self.timeouts.attach_join_s)
            if not joined.get("success"):
                log.warning("agentctl %s: turn %s ignored the cancel; replacing the agent",
                            self.connection.url, running)
                data = await self._start_session(replace=True)
        return str(data["session_id"])

    async def _start_session(self, *, replace: bool) -> dict[str, Any]:
        if replace:
            self.connection.session_id = None
        body: dict[str, Any] = {"owner": self.owner, "replace": replace}
        if self.session_cwd is not None:
            body["cwd"] = self.session_cwd
        data = await self._call("POST", "/api/v1/session", body,
                                timeout_s=self.timeouts.session_s)
        session_id = data.get("session_id")
        if not isinstance(session_id, str):
            raise AgentClosed(f"agentctl did not start a session: {data.get('error')}")
        self._session_id = session_id
        self.connection.session_id = session_id
        self.attached = bool(data.get("attached"))
        return data

    async def prompt(self, text: str) -> TurnEnded:
        if self.turn_running:
            raise RuntimeError("a prompt is already running on this adapter")
        turn = _PendingTurn(id=uuid.uuid4().hex)
        # Armed before the request: the turn's end may beat the response.
        self._turn = turn
        self.connection.expect_turn(turn)
        body: dict[str, Any] = {"text": text, "session_id": self._session_id,
                                "turn_id": turn.id}
        if self._abandoned is not None:
            body["abandon_turn"] = self._abandoned
        try:
            await self._call("POST", "/api/v1/prompt", body, timeout_s=self.timeouts.request_s,
                             expect=(202,))
        except AgentTimeout:
            # agentctl may have started it: the next prompt tells it to forget it.
            self._abandoned = turn.id
            self._forget(turn)
            raise
        except BaseException:
            self._forget(turn)
            raise
        finally:
            turn.answered.set()
        self._abandoned = None
        with trio.move_on_after(self.timeouts.turn_s):
            await turn.done.wait()
        if turn.ended is None:
            self.abandon_turn()
            raise AgentTimeout(f"turn did not end within {self.timeouts.turn_s:g}s")
        return turn.ended

    async def cancel(self) -> None:
        """Have agentctl write the protocol cancel; the turn's end comes on ``events``."""
        turn = self._turn
        if turn is None or turn.done.is_set():
            return
        if not turn.answered.is_set():
            # Never overtake the prompt (bounded: the prompt's own request bound).
            with trio.move_on_after(self.timeouts.request_s):
                await turn.answered.wait()
            if self._turn is not turn or turn.done.is_set():
                return
        data = await self._call("POST", "/api/v1/acp/cancel",
                                {"session_id": self._session_id, "join_s": 0},
                                timeout_s=self.timeouts.request_s, expect=(200, 504))
        if not data.get("success"):
            raise AgentTimeout(str(data.get("error") or "agentctl could not write the cancel"))

    async def cancel_and_join(self, join_s: float) -> dict[str, Any]:
        """agentctl's own join: the cancel, then up to ``join_s`` for the turn's
        end; agentctl's answer (``not_acknowledged`` when it did not end)."""
        return await self._call("POST", "/api/v1/acp/cancel",
                                {"session_id": self._session_id, "join_s": join_s},
                                timeout_s=self.timeouts.request_s + join_s,
                                expect=(200, 202, 504))

    async def respond_permission(self, request_id: str, option_id: str | None) -> None:
        status, data = await self._call_status(
            "POST", "/api/v1/permission",
            {"request_id": request_id, "option_id": option_id, "session_id": self._session_id},
            timeout_s=self.timeouts.request_s, expect=(200, 404, 504))
        if status == 404:
            raise LocalProtocolError(str(data.get("error")))
        if status == 504:
            raise AgentTimeout(str(data.get("error")))

    def _forget(self, turn: _PendingTurn) -> None:
        if self._turn is turn:
            self._turn = None
            self.connection.expect_turn(None)

    def abandon_turn(self) -> bool:
        """Forget the running turn (after an escalation); the caller cancels the
        task blocked in ``prompt``.  agentctl forgets it at the next prompt; a
        late end of it is reported as a notice, never as this adapter's turn end."""
        turn = self._turn
        if turn is None or turn.done.is_set():
            return False
        self._abandoned = turn.id
        self._turn = None
        self.connection.expect_turn(None)
        return True

    async def status(self) -> dict[str, Any]:
        return await self._call("GET", "/api/v1/status", None, timeout_s=self.timeouts.request_s)

    async def aclose(self) -> None:
        """Close the link and the HTTP client (bounded, shielded).  The agent
        keeps running in agentctl, ready to be re-attached."""
        self.connection.close("agentctl client closed", quiet=True)
        with trio.CancelScope(shield=True), trio.move_on_after(2.0):
            await self.connection.http.aclose()

    # -- HTTP ---------------------------------------------------------------------

    async def _call(self, method: str, path: str, body: dict[str, Any] | None, *,
                    timeout_s: float, expect: tuple[int, ...] = (200,)) -> dict[str, Any]:
        return (await self.connection.request(method, path, body, timeout_s=timeout_s,
                                              expect=expect))[1]

    async def _call_status(self, method: str, path: str, body: dict[str, Any] | None, *,
                           timeout_s: float, expect: tuple[int, ...] = (200,),
                           ) -> tuple[int, dict[str, Any]]:
        return await self.connection.request(method, path, body, timeout_s=timeout_s,
                                             expect=expect)


async def _first(*events: trio.Event) -> None:
    """Return once any of ``events`` is set."""
    async with trio.open_nursery() as nursery:
        async def wait(ev: trio.Event) -> None:
            await ev.wait()
            nursery.cancel_scope.cancel()
        for ev in events:
            nursery.start_soon(wait, ev)


# -- executors ----------------------------------------------------------------------


def agentctl_token(profile: AgentProfile) -> str | None:
    """The profile's ``agentctl_token``, else ``TURNVISOR_AGENTCTL_TOKEN`` in its
    ``env``, else in the backend's environment."""
    return (profile.agentctl_token or profile.env.get(TOKEN_ENV)
            or os.environ.get(TOKEN_ENV))


def _timeouts(config: Config) -> AgentctlTimeouts:
    t = config.timeouts
    return AgentctlTimeouts(connect_s=min(t.agent_start_s, 10.0), request_s=t.agent_request_s,
                            session_s=t.agent_start_s, turn_s=t.turn_s)


@asynccontextmanager
async def spawn_agentctl(profile: AgentProfile, cwd: str, token: str, *, start_s: float,
                         term_grace_s: float, extra_args: Sequence[str] = (),
                         ) -> AsyncIterator[tuple[trio.Process, str]]:
    """A local ``turnvisor agentctl`` for ``profile`` on a free loopback port, in
    its own process group; yields it and its URL, and tears it down on exit
    (SIGTERM: agentctl stops its agent; SIGKILL after ``term_grace_s``: the
    agent's lifeline kills its group)."""
    ready_r, ready_w = os.pipe()
    # The backend's own token stays with the backend (agentctl passes its
    # environment on to the agent, minus the agentctl token).
    env = {k: v for k, v in os.environ.items() if k not in _PRIVATE_ENV}
    env.update(profile.env)
    env[TOKEN_ENV] = token
    command = [sys.executable, "-m", "web", "agentctl", "--listen", "127.0.0.1:0",
               "--protocol", profile.protocol, "--cwd", cwd, "--ready-fd", str(ready_w),
               *extra_args, "--", *profile.command]
    try:
        proc = await trio.lowlevel.open_process(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, env=env, process_group=0, pass_fds=(ready_w,))
    except BaseException:
        os.close(ready_r)
        raise
    finally:
        os.close(ready_w)
    try:
        ready = trio.lowlevel.FdStream(ready_r)
        buf = b""
        with trio.move_on_after(start_s):
            while not buf.endswith(b"\n"):
                chunk = await ready.receive_some(4096)
                if not chunk:
                    break
                buf += chunk
        await ready.aclose()
        url = buf.decode(errors="replace").strip()
        if not url.startswith("http"):
            raise OSError(f"agentctl did not report its URL within {start_s:g}s "
                          f"(exit status {proc.returncode})")
        yield proc, url
    finally:
        await terminate_group(proc, grace_s=term_grace_s)


@asynccontextmanager
async def launch_agentctl(config: Config, profile: AgentProfile, cwd: str, *,
                          owner: str | None = None) -> AsyncIterator[LaunchedAgent]:
    """The executor for ``executor = "agentctl"`` profiles.

    With ``agentctl_url``: connect to that agentctl (token: ``agentctl_token``);
    nothing is spawned and nothing is torn down but the connection, so the agent
    survives a backend restart and is re-attached by ``owner``.  Without it:
    spawn a local agentctl (own process group, recorded like an agent's) and
    tear it down, agent included, on exit.
    """
    timeouts = _timeouts(config)
    url = profile.agentctl_url
    if url:
        token = agentctl_token(profile)
        if not token:
            raise OSError(f"profile {profile.name!r}: no agentctl token "
                          f"(agentctl_token, or {TOKEN_ENV} in env)")
        adapter = AgentctlAdapter(url, token, owner=owner, session_cwd=profile.cwd,
                                  protocol=profile.protocol, timeouts=timeouts)
        try:
            yield LaunchedAgent(adapter=cast(AgentAdapter, adapter))
        finally:
            await adapter.aclose()
        return
    token = secrets.token_urlsafe(32)
    # The agentctl's agent gets the local agents' sandbox: this data dir hidden.
    sandbox_args = ["--hide", str(config.data_dir),
                    *(["--sandbox", profile.sandbox] if profile.sandbox else []),
                    *(a for p in profile.sandbox_writable for a in ("--sandbox-writable", p))]
    async with spawn_agentctl(profile, cwd, token, start_s=config.timeouts.agent_start_s,
                              term_grace_s=config.timeouts.term_grace_s,
                              extra_args=sandbox_args) as (proc, url):
        adapter = AgentctlAdapter(url, token, owner=owner, session_cwd=cwd,
                                  protocol=profile.protocol, timeouts=timeouts)
        try:
            yield LaunchedAgent(adapter=cast(AgentAdapter, adapter), pgid=proc.pid,
                                process=proc, stderr=proc.stderr)
        finally:
            await adapter.aclose()
