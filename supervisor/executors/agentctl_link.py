"""The link to one agentctl: its event stream (on trio-websocket) and bounded HTTP calls.

``AgentctlLink`` is what the lifecycle sees of an agentctl-backed adapter's
connection (``protocols.transport.AgentLink``: ``run``, ``closed``,
``close_reason``).  ``run`` owns the event stream: a WebSocket to
``/api/v1/events``, each message decoded by the sans-IO
``protocols.agentctl_wire.StreamDecoder`` (sequence numbers checked: a missing
event closes the link).  Every HTTP call is bounded twice, by httpx's timeout
and by ``trio.fail_after``; the event stream is bounded by agentctl's
heartbeats (``agentctl_heartbeat_s`` of silence = lost).

Loss of agentctl looks like a crashed agent: an unreachable agentctl, a
refused token, a dropped or silent event stream, ``agent not running``, or
the agent's own exit all set ``closed``, close ``events`` (after a notice
naming the reason), and end a pending turn with ``TurnEnded(stop_reason=
"error")``; later calls raise ``AgentClosed``.  An HTTP timeout raises
``AgentTimeout`` and leaves the link up (agentctl may only be slow; a dead one
stops its heartbeats).  No asyncio: httpx runs on httpcore's Trio backend.

Handing a turn over across a backend restart (``resume``, ``take``): the
link knows the seq of every event it put on ``events``, so the lifecycle can
record how far it has written the stream down (``take`` after each batch);
a later backend opens the stream ``?after=`` that seq and gets everything the
agent produced since, from agentctl's replay ring, in order.

The stream carries frames the other way too (``send_frame_nowait``: the
adapter's ``Cancel``, DESIGN.md §20): a bounded queue per connection, drained
by a writer task beside the reader; agentctl's answers come back in order
with the events and are written into the turn they answer
(``PendingTurn.frame``, supervisor/executors/agentctl_turn.py): data the
adapter and the cancel operation read, no callback.  A cancel the link owes
(held while it was down, or a frame a cut may have swallowed) is read off the
same turn by the link's own return, which sends it before anything else.
"""

from __future__ import annotations

import logging
import ssl
from collections import deque
from collections.abc import Callable
from typing import Any, Final, cast
from urllib.parse import quote, urlsplit

import httpx
import trio
from trio_websocket import (
    ConnectionClosed,
    HandshakeError,
    WebSocketConnection,
    wrap_client_stream,
)

from protocols.agentctl_wire import (
    TOKEN_HEADER,
    CancelAck,
    Control,
    Frame,
    FrameRefused,
    Hello,
    LoggedEvent,
    StreamDecoder,
    WireError,
)
from protocols.events import AgentEvent, AgentNotice, SubagentChanged, TurnEnded
from protocols.prompt_parts import Line
from protocols.scopes import shielded_for
from protocols.transport import AgentClosed, AgentRefused, AgentTimeout

from ..config import Timeouts
from .agentctl_http import Route, describe, first_set, payload, refusal, shared_tls, ws_close_reason
from .agentctl_reach import LinkReach
from .agentctl_turn import PendingTurn
from .link_hold import LinkDown, OfflineStops

__all__ = ["AgentctlLink", "PendingTurn", "Route", "first_set"]

log = logging.getLogger(__name__)

_MAX_FRAME: Final = 64 * 1024 * 1024
#: The bound of each attempt to open the event stream again after a cut.
_RETRY_CONNECT_S: Final = 3.0
#: Frames queued for agentctl at most (a cancel per turn: a few at a time).
_FRAME_QUEUE: Final = 16


class AgentctlLink(LinkReach):
    """The lifecycle's view of the link (``run``, ``closed``, ``close_reason``),
    the event stream reader behind it, and the bounded HTTP calls."""

    def __init__(self, url: str, token: str, timeouts: Timeouts, *,
                 owner: str | None = None, event_buffer: int = 1024,
                 on_subagent: Callable[[SubagentChanged], None] | None = None,
                 route: Route | None = None, uds: str | None = None,
                 reconnect: bool = False) -> None:
        self.url = url.rstrip("/")
        #: A lost event stream is opened again (after the last seq read) instead
        #: of closing the link: an agentctl at a configured URL outlives a cut
        #: (DESIGN.md §20).  A refused token, a gone agent, lost events still close.
        self.reconnect = reconnect
        #: While the stream is down: False, and since when; ``_reach`` is
        #: replaced (set) at each change.
        self.reachable = True
        self.down_since: float | None = None
        self._reach = trio.Event()
        #: agentctl's ``OfflineCancel`` (the turn it cancelled itself while no
        #: backend was connected), taken by the session before that turn's end is read.
        self.offline = OfflineStops()
        #: When a cancel held while the link was down went out (``LinkHold``):
        #: first thing on the link's return (``_send_owed``).
        self.owed_sent_at: float | None = None
        #: The open connection's queue of frames for agentctl (None: none is open).
        self._frames: trio.MemorySendChannel[str] | None = None
        self._lost = False
        self._returning = False
        self.route = route
        #: A unix socket that reaches agentctl (the ssh executor's forwarded
        #: socket): HTTP and the event stream connect there, ``url`` names the host.
        self.uds = uds
        #: Announced on the event stream: agentctl keeps a connected owner's session.
        self.owner = owner
        self.timeouts = timeouts
        self.closed = trio.Event()
        self.close_reason = ""
        self.connected = trio.Event()
        #: The Hello frame (agentctl's status when the stream opened).
        self.hello: dict[str, Any] = {}
        #: The agentctl session this link serves: the exit of the agent that
        #: holds it is this link's end (an agent replaced on purpose is not).
        self.session_id: str | None = None
        self._token = token
        self._scope: trio.CancelScope | None = None
        self._turn: PendingTurn | None = None
        self._events_send, self.events = trio.open_memory_channel[AgentEvent](event_buffer)
        #: Told of each child session's change read from the stream, before it is
        #: queued on ``events`` (the adapter's cache of children, ``AgentctlAdapter``).
        self.on_subagent = on_subagent
        #: ``?after=`` for the stream (``resume``): the seq a previous backend
        #: wrote down up to.
        self.after: int | None = None
        #: Why the stream could not continue after ``after`` (entries gone,
        #: another agentctl process), or None.
        self.resume_lost: str | None = None
        #: The seq of each event on ``events`` not yet taken, oldest first
        #: (None: a notice of the link's own) ...
        self._seqs: deque[int | None] = deque()
        self._sending = False
        #: ... and the seq of the last event taken (``take``).
        self.position: int | None = None
        #: The last seq read from the stream, and a wake-up for ``reached``.
        self.read_seq: int | None = None
        self._advanced = trio.Event()
        self.http = httpx.AsyncClient(
            base_url=self.url, headers=self._headers(),
            transport=httpx.AsyncHTTPTransport(uds=uds, verify=self._tls()) if uds else None,
            verify=self._tls(),
            timeout=httpx.Timeout(timeouts.agent_request_s))

    def _tls(self) -> ssl.SSLContext:
        """The route's own context (a cluster's CA), else the one every link shares,
        for its requests and its event stream alike."""
        if self.route is not None and self.route.ssl_context is not None:
            return self.route.ssl_context
        return shared_tls()

    def _headers(self) -> dict[str, str]:
        bearer = f"Bearer {self._token}"
        if self.route is None:
            return {"Authorization": bearer}
        return {**self.route.headers, TOKEN_HEADER: bearer}

    # -- the reader -----------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read the event stream until it ends; then the link is closed."""
        task_status.started()
        reason = "agentctl event stream ended"
        quiet = False
        try:
            with trio.CancelScope() as scope:
                self._scope = scope
                if self.closed.is_set():
                    return
                # Reachability and the token first, over plain HTTP, so that the
                # usual failures read as plainly as they are.
                try:
                    await self.request("GET", "/api/v1/status", None,
                                       timeout_s=self.timeouts.agentctl_connect_s)
                except (AgentClosed, AgentTimeout) as exc:
                    reason = str(exc)
                    return
                reason = await self._stream()
                backoff = 0.2
                while self.reconnect and self._lost and not self.closed.is_set():
                    self._went_down(reason)
                    await trio.sleep(backoff)
                    backoff = min(backoff * 2, 2.0)
                    if self.read_seq is not None:
                        self.after = self.read_seq
                    self._returning = True
                    reason = await self._stream()
                    if self.reachable:
                        backoff = 0.2
        except trio.Cancelled:
            # Its owner stopped it (the execution ends): not a loss worth a warning.
            reason, quiet = "agentctl client stopped", True
            raise
        finally:
            self.close(reason, quiet=quiet)

    async def _stream(self) -> str:
        """Open the event stream and read it; returns why it ended.

        The TCP stream is ours, not trio-websocket's: its connection does not
        close the socket when the peer drops without a close frame (it only
        marks itself closed), so whoever opens the socket closes it."""
        connect_s = self.timeouts.agentctl_connect_s
        if self._returning:
            # Re-connecting: a handshake the cut left hanging is given up sooner,
            # so the next attempt (and the held cancel) is not held up by it.
            connect_s = min(connect_s, _RETRY_CONNECT_S)
        parts = urlsplit(self.url)
        secure = parts.scheme == "https"
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if secure else 80)
        query = ([f"owner={quote(self.owner, safe='')}"] if self.owner else []) + (
            [f"after={self.after}"] if self.after is not None else [])
        resource = (parts.path.rstrip("/") + "/api/v1/events"
                    + ("?" + "&".join(query) if query else ""))
        stream: trio.SocketStream | trio.SSLStream[trio.SocketStream] | None = None
        # Set again by every way the network (not agentctl) ends the stream.
        self._lost = True
        try:
            async with trio.open_nursery() as nursery:
                # Errors are caught inside: the nursery would wrap them in a group.
                try:
                    with trio.fail_after(connect_s):
                        tcp = (await trio.open_unix_socket(self.uds) if self.uds
                               else await trio.open_tcp_stream(host, port))
                        stream = tcp
                        if secure:
                            stream = trio.SSLStream(tcp, self._tls(),
                                                    server_hostname=host,
                                                    https_compatible=True)
                        ws = await wrap_client_stream(
                            nursery, stream, parts.netloc, resource,
                            extra_headers=[(k.lower().encode(), v.encode())
                                           for k, v in self._headers().items()],
                            max_message_size=_MAX_FRAME)
                    frames, queued = trio.open_memory_channel[str](_FRAME_QUEUE)
                    nursery.start_soon(self._send_frames, ws, queued)
                    try:
                        self._lost = False
                        self._frames = frames
                        return await self._read(ws)
                    finally:
                        self._frames = None
                        frames.close()
                        # Say goodbye if the socket still takes it (briefly).
                        with trio.CancelScope(shield=True), \
                                trio.move_on_after(self.timeouts.cancel_cleanup_s):
                            await ws.aclose()
                except trio.TooSlowError:
                    return (f"agentctl at {self.url} did not open its event stream within "
                            f"{connect_s:g}s")
                except ConnectionClosed as exc:
                    self._lost = True
                    return f"agentctl event stream closed: {ws_close_reason(exc)}"
                except (HandshakeError, OSError, trio.BrokenResourceError) as exc:
                    self._lost = True
                    return f"agentctl's event stream at {self.url} failed: {describe(exc)}"
                finally:
                    nursery.cancel_scope.cancel()  # the connection's reader task
        except ExceptionGroup as group:
            # A handshake refused by a relay in front of agentctl (the API
            # server's Pod proxy answering 503) is raised by the connection's
            # reader task, so out of the nursery: a cut like the others.
            refused, rest = group.split(HandshakeError)
            if refused is None or rest is not None:
                raise
            self._lost = True
            first: BaseException = refused
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            return f"agentctl's event stream at {self.url} failed: {refusal(first)}"
        finally:
            if stream is not None:
                # Shielded (the socket is ours to close) but bounded: a TLS
                # goodbye to a peer that reads nothing would wait forever.
                with shielded_for(self.timeouts.cancel_cleanup_s):
                    await stream.aclose()

    async def _send_frames(self, ws: WebSocketConnection,
                           queued: trio.MemoryReceiveChannel[str]) -> None:
        """The connection's only writer of client frames (``send_frame_nowait``).
        A frame the connection loses is the sender's to make good (the adapter
        owes a cancel until agentctl answers it)."""
        async for data in queued:
            try:
                with trio.move_on_after(self.timeouts.agent_request_s):
                    await ws.send_message(data)
            except (ConnectionClosed, OSError, trio.BrokenResourceError,
                    trio.ClosedResourceError):
                return  # the reader sees the end too, and says why

    def send_frame_nowait(self, data: str, kind: str) -> bool:
        """Queue ``data`` (a frame of type ``kind``) for agentctl without
        waiting: True if queued.  False when the stream is not open and
        reachable, agentctl does not read ``kind`` (its Hello's ``accepts``: an
        older agentctl reads nothing), or the queue is full."""
        frames = self._frames
        if (frames is None or not self.reachable or self.closed.is_set()
                or kind not in (self.hello.get("accepts") or ())):
            return False
        try:
            frames.send_nowait(data)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        return True

    async def _read(self, ws: WebSocketConnection) -> str:
        """Messages → events until the stream ends; returns why it ended."""
        decoder = StreamDecoder(after=self.after)
        first = True
        while True:
            # The first message (Hello) is bounded by the connect timeout, every
            # later one by agentctl's heartbeats.
            t = self.timeouts
            bound = t.agentctl_connect_s if first else t.agentctl_heartbeat_s
            with trio.move_on_after(bound) as silent:
                message = await ws.get_message()
            if silent.cancelled_caught:
                self._lost = True
                if first:
                    return (f"agentctl at {self.url} did not open its event stream within "
                            f"{bound:g}s")
                return f"agentctl sent nothing for {bound:g}s"
            try:
                frame = decoder.receive(message)
            except WireError as exc:
                return f"bad frame on agentctl's event stream: {exc}"
            first = False
            if decoder.last_seq != self.read_seq:
                self.read_seq = decoder.last_seq
                self._advanced.set()
                self._advanced = trio.Event()
            try:
                ended = await self._on_frame(frame)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return self.close_reason or "link closed"
            if ended is not None:
                return ended

    async def _on_frame(self, frame: Frame) -> str | None:
        match frame:
            case Hello(status=status, resumed=resumed) if self._returning:
                if resumed is False:
                    return (f"agentctl no longer has the events of the outage (after seq "
                            f"{self.after})")
                self.hello = status
                await self._came_back()
            case Hello(status=status, resumed=resumed):
                self.hello = status
                self.position = self.read_seq
                if resumed is False:
                    self.resume_lost = (f"agentctl no longer has its events after seq "
                                        f"{self.after} (its log holds "
                                        f"{status.get('oldest_seq')}..{status.get('last_seq')})")
                    log.warning("agentctl %s: %s", self.url, self.resume_lost)
                self.connected.set()
            case Control(kind="AgentExited", data=data) if (
                    self.session_id is not None and data.get("session_id") == self.session_id):
                code = data.get("returncode")
                return f"agent exited (status {code})" + (
                    f": {data['error']}" if data.get("error") else "")
            case Control(kind="OfflineCancel", data=data):
                await self.offline.hand(str(data.get("turn_id")))
            case CancelAck() as ack:
                pending = self._turn
                if pending is not None and pending.id == ack.turn_id:
                    pending.frame.answer(ack)
                if ack.error is not None:
                    log.warning("agentctl %s: could not write the cancel of turn %s: %s",
                                self.url, ack.turn_id, ack.error)
                    await self._emit(AgentNotice(
                        message=f"agentctl could not write the cancel: {ack.error}"), None)
            case FrameRefused(error=error):
                log.warning("agentctl %s refused a frame: %s", self.url, error)
            case LoggedEvent(seq=seq, turn=turn, event=TurnEnded() as ended):
                pending = self._turn
                if pending is None or turn != pending.id:
                    # The end of a turn this adapter gave up on (escalated, timed out).
                    await self._emit(AgentNotice(
                        message=f"late end of abandoned turn {turn}: {ended.stop_reason}",
                        level="info"), seq)
                else:
                    pending.ended = ended
                    pending.done.set()
                    await self._emit(ended, seq)
            case LoggedEvent(seq=seq, event=event):
                if isinstance(event, SubagentChanged) and self.on_subagent is not None:
                    self.on_subagent(event)
                await self._emit(event, seq)
        return None  # Heartbeat, other Control entries

    async def _emit(self, event: AgentEvent, seq: int | None) -> None:
        # Paired with its seq (``take``): one producer, so the order is the channel's.
        self._seqs.append(seq)
        self._sending = True
        try:
            await self._events_send.send(event)
        finally:
            self._sending = False

    def take(self, count: int) -> int | None:
        """``count`` more events were taken from ``events`` (and written
        down): the seq of the last of them, the stream position a later
        client resumes after (None before the stream opened)."""
        for _ in range(min(count, len(self._seqs))):
            seq = self._seqs.popleft()
            if seq is not None:
                self.position = seq
        return self.position

    def resume(self, after: int) -> None:
        """Open the stream after ``after`` (before ``run``): a previous client
        took every event up to it."""
        self.after = after
        self.position = after

    async def reached(self, seq: int) -> None:
        """Return once the stream has been read up to ``seq`` (or the link closed)."""
        while not self.closed.is_set() and (self.read_seq is None or self.read_seq < seq):
            await first_set(self._advanced, self.closed)

    async def request(self, method: str, path: str, body: dict[str, Any] | Line | None, *,
                      timeout_s: float, expect: tuple[int, ...] = (200,),
                      held: bool = False) -> tuple[int, dict[str, Any]]:
        """One bounded request; a status in ``expect`` is returned with its body,
        any other becomes ``AgentClosed`` (the link is closed) or ``AgentTimeout``.

        A re-connecting link that is down waits for its return (within the
        bound), then raises ``LinkDown``; ``held``: the request is the link's
        own return's (it goes before the link is reachable again)."""
        if self.closed.is_set():
            raise AgentClosed(self.close_reason)
        if not self.reachable and not held:
            with trio.move_on_after(timeout_s):
                while not self.reachable and not self.closed.is_set():
                    await self.until_changed()
            if self.closed.is_set():
                raise AgentClosed(self.close_reason)
            if not self.reachable:
                raise self.link_down()
        try:
            with trio.fail_after(timeout_s):
                resp = await self.http.request(method, path, **payload(body),
                                                timeout=httpx.Timeout(timeout_s))
        except (trio.TooSlowError, httpx.TimeoutException):
            raise AgentTimeout(f"agentctl did not answer {method} {path} within "
                               f"{timeout_s:g}s") from None
        except httpx.HTTPError as exc:
            if self.reconnect:
                # Perhaps a cut: the stream's reader tells (and re-connects).
                raise self.link_down(describe(exc)) from None
            self.close(f"agentctl at {self.url} is unreachable: {describe(exc)}")
            raise AgentClosed(self.close_reason) from None
        try:
            data = resp.json()
            if not isinstance(data, dict):
                raise ValueError("not an object")
        except ValueError:
            self.close(f"agentctl answered {method} {path} with {resp.status_code} and no JSON")
            raise AgentClosed(self.close_reason) from None
        if self.reconnect and self.route is not None and data.get("kind") == "Status":
            # The relay's own answer (the API server's Pod proxy: the Pod does
            # not answer it, or is not running now), not agentctl's: a cut.
            raise self.link_down(str(data.get("message") or resp.reason_phrase))
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
            raise AgentRefused(f"agentctl: {error}")
        else:
            raise AgentTimeout(f"agentctl {method} {path} failed ({resp.status_code}): {error}")
        raise AgentClosed(self.close_reason)

    def link_down(self, why: str = "") -> LinkDown:
        """What a request meets while the host does not answer."""
        return LinkDown(f"the agent's host ({self.url}) does not answer"
                        + (f": {why}" if why else ""), self)

    # -- state ------------------------------------------------------------------------

    def expect_turn(self, turn: PendingTurn | None) -> None:
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
        if self._sending and self._seqs:
            # The event being sent will not arrive (the channel closes below);
            # if it was taken after all, the position lags one event (it
            # would be replayed, never lost).
            self._seqs.pop()
        try:
            self._events_send.send_nowait(AgentNotice(message=reason,
                                                      level="info" if quiet else "warning"))
            self._seqs.append(None)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        self._events_send.close()
        if self._scope is not None:
            self._scope.cancel()
