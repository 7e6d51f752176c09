"""The thin Trio transport around a sans-IO client core.

``AgentConnection.run`` is the stdout reader: it feeds bytes to the core and
routes what comes out.  Answers to our requests wake the task waiting on that
id; the end of a turn wakes the task waiting on the prompt; everything else
goes to ``events`` (a bounded channel: a slow consumer slows the reader, it
never loses an event), or, once ``deliver_to`` named one, to a function the
reader calls in its own step (agentctl's log, which never blocks: one task
hand-off less between the agent's answer and its readers).  Writes go
through one lock, each bounded by
``write_timeout_s``: an agent that stops reading its stdin cannot block a
caller forever, and each is whole or not at all: a cancel never leaves half
a JSON line on the agent's stdin (see ``send``).  A write to a pipe nobody
is writing is tried at once, before the task yields (a cancel is on the
agent's stdin before anything else runs).
The connection owns no task; whoever runs ``run`` (the execution nursery) owns
the reader.

A request given a ``withdraw`` (the core's ``cancel_request``) is withdrawn
before ``request`` gives up on it, whether its own timeout expired or its
caller was cancelled (then within ``withdraw_timeout_s``, shielded): the agent
learns it can stop working on it (ACP ``$/cancel_request``).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from .events import AgentEvent, AgentNotice, TurnEnded
from .jsonrpc import JSON, ErrorResponse, NeedData, PeerClosed, Response, error_details, error_text
from .prompt_parts import Line

__all__ = [
    "AgentClosed",
    "AgentConnection",
    "AgentLink",
    "AgentRefused",
    "AgentRequestError",
    "AgentTimeout",
    "ClientCore",
]


class AgentClosed(Exception):
    """The agent's stdout ended (it exited or closed it)."""


class AgentTimeout(Exception):
    """The agent did not answer within the bound."""


class AgentRefused(Exception):
    """The other side refused what we asked (a permission that is no longer
    pending, a turn it will not start): its decision, not our misuse of the
    protocol (that is ``LocalProtocolError``)."""


class AgentRequestError(Exception):
    """The agent answered a request with a JSON-RPC error: its ``code``,
    ``message`` and ``data`` (None: none sent).  The text (``str``) adds the
    short form of ``data``'s details (``error_details``), which is often all
    that says what went wrong (ACP SDKs answer ``Internal error`` with
    ``data: {details}``); ``details`` is that short form, or None."""

    def __init__(self, method: str, code: int, message: str, data: JSON = None) -> None:
        super().__init__(f"{method} failed ({code}): {error_text(message, data)}")
        self.method = method
        self.code = code
        self.message = message
        self.data = data
        self.details = error_details(data)


class ClientCore(Protocol):
    def receive_data(self, data: bytes) -> None: ...
    def next_event(self) -> AgentEvent | Response | ErrorResponse | PeerClosed | NeedData: ...
    def data_to_send(self) -> bytes: ...


class AgentLink(Protocol):
    """What the lifecycle needs of an adapter's link to its agent, whatever
    carries it (stdio pipes, agentctl's HTTP and event stream): a reader to run
    in a nursery it owns, and whether and why the link is closed."""

    @property
    def closed(self) -> trio.Event: ...

    @property
    def close_reason(self) -> str: ...

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...


@dataclass(slots=True)
class _Waiter:
    done: trio.Event = field(default_factory=trio.Event)
    value: Response | ErrorResponse | None = None


class AgentConnection:
    def __init__(
        self,
        core: ClientCore,
        send_stream: trio.abc.SendStream,
        receive_stream: trio.abc.ReceiveStream,
        *,
        write_timeout_s: float = 5.0,
        withdraw_timeout_s: float = 1.0,
        event_buffer: int = 1024,
    ) -> None:
        self.core = core
        self._send_stream = send_stream
        self._receive_stream = receive_stream
        self._write_lock = trio.Lock()
        self.write_timeout_s = write_timeout_s
        #: How long a withdrawal may delay a cancelled caller.
        self.withdraw_timeout_s = withdraw_timeout_s
        self._waiters: dict[int | str, _Waiter] = {}
        self._turn_waiter: _Waiter | None = None
        self._turn_result: TurnEnded | None = None
        self._turn_done = trio.Event()
        self.closed = trio.Event()
        self.close_reason = ""
        self._events_send, self.events = trio.open_memory_channel[AgentEvent](event_buffer)
        self._sink: Callable[[AgentEvent], None] | None = None
        self._pipe: bool | None = None
        #: Why the agent's stdin takes no more writes: a write timed out
        #: mid-line ("" while it is whole).
        self._cut = ""

    # -- writing ------------------------------------------------------------

    def can_send_now(self) -> bool:
        """Whether ``send_now`` may write: open, nobody writing, and a pipe
        (whose writes of at most ``PIPE_BUF`` bytes are whole or nothing)."""
        if self.closed.is_set() or self._write_lock.locked() or self._cut:
            return False
        if self._pipe is None:
            self._pipe = isinstance(self._send_stream, trio.lowlevel.FdStream) and _is_fifo(
                self._send_stream.fileno())
        return self._pipe

    def send_now(self, data: bytes) -> bool:
        """Write ``data`` whole in this step, without yielding (the caller's
        step: no task between the decision and the write); False if nothing
        was written (then ``send`` it).  One non-blocking ``write``: a frame of
        at most ``PIPE_BUF`` bytes to a pipe goes whole or not at all."""
        if not data or len(data) > select.PIPE_BUF or not self.can_send_now():
            return False
        return self._write_now(data) == len(data)

    async def send(self, data: Line, *, timeout_s: float | None = None) -> None:
        """Write ``data`` whole or not at all, within ``timeout_s`` (default
        ``write_timeout_s``).  A ``Spliced`` line (a prompt with large images,
        protocols/prompt_parts.py) is written piece by piece as it is encoded, under
        the same rules.

        A cancel can take the caller only before the first byte is written
        (while it waits for the pipe).  Once a byte is on the agent's stdin the
        rest follows, shielded but bounded by the same timeout: half
        a JSON line followed by the next frame would be one garbled line to the
        agent.  When the bound bites mid-line (the agent stopped reading), the
        line stays cut: this and every later write raise ``AgentTimeout`` and
        write nothing more."""
        if not data:
            return
        if self.closed.is_set():
            raise AgentClosed(self.close_reason)
        self._check_not_cut()
        if not isinstance(data, bytes):
            await self._send_pieces(data, timeout_s)
            return
        sent = self._write_now(data)
        if sent == len(data):
            # Written before any other task ran (a cancel reaches the agent
            # first, not after the frames other tasks were about to write);
            # still a checkpoint, one that cannot lose the write.
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        timeout_s = self.write_timeout_s if timeout_s is None else timeout_s
        deadline = trio.current_time() + timeout_s
        if sent:
            # Part of the line is out: take the pipe in this same step (it is
            # free, or ``_write_now`` would not have written) so no other frame
            # gets between the halves, and no cancel before the rest.
            self._write_lock.acquire_nowait()
        else:
            with trio.move_on_at(deadline) as waited:
                # Nothing written yet: a cancel here loses nothing.
                await self._write_lock.acquire()
            if waited.cancelled_caught:
                raise AgentTimeout(f"agent did not read its stdin for {timeout_s}s")
        try:
            # (Another writer may have cut the line while this one waited.)
            self._check_not_cut()
            await self._write_rest(data[sent:], deadline, timeout_s)
        finally:
            self._write_lock.release()
        self._check_not_cut()

    async def _send_pieces(self, pieces: Iterable[bytes], timeout_s: float | None) -> None:
        """``send`` of a line made of pieces: the pipe is taken before the first
        byte (a cancel while waiting for it loses nothing), then each piece is
        written shielded, all within the one bound; no other frame between them."""
        timeout_s = self.write_timeout_s if timeout_s is None else timeout_s
        deadline = trio.current_time() + timeout_s
        try:
            self._write_lock.acquire_nowait()
        except trio.WouldBlock:
            with trio.move_on_at(deadline) as waited:
                await self._write_lock.acquire()
            if waited.cancelled_caught:
                raise AgentTimeout(f"agent did not read its stdin for {timeout_s}s") from None
        try:
            self._check_not_cut()
            for piece in pieces:
                await self._write_rest(piece, deadline, timeout_s)
                self._check_not_cut()
        finally:
            self._write_lock.release()
        # (As ``send``: a checkpoint, one that cannot lose the write.)
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def _write_rest(self, rest: bytes, deadline: float, timeout_s: float) -> None:
        """The write itself: shielded, so a cancel cannot cut it, with a
        deadline inside that can (then the line is marked cut)."""
        with trio.CancelScope(shield=True, deadline=deadline) as scope:
            try:
                await self._send_stream.send_all(rest)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise AgentClosed(f"agent's stdin is closed: {exc}") from None
        if scope.cancelled_caught:
            self._cut = (f"agent did not read its stdin for {timeout_s}s"
                         " (a line to it is cut off; nothing more is written)")
            # A cancelled caller sees its cancel, not the timeout.
            await trio.lowlevel.checkpoint_if_cancelled()

    def _check_not_cut(self) -> None:
        if self._cut:
            raise AgentTimeout(self._cut)

    def _write_now(self, data: bytes) -> int:
        """What one non-blocking ``write`` of a pipe nobody is writing took
        (0: not tried, or it took nothing; an error is left to ``send_all``)."""
        if (not isinstance(self._send_stream, trio.lowlevel.FdStream)
                or self._write_lock.locked() or self._cut):
            return 0
        try:
            # (A closed stream's fileno is -1: EBADF.)
            return os.write(self._send_stream.fileno(), data)
        except OSError:
            return 0

    async def request(
        self,
        rid: int | str,
        data: bytes,
        *,
        timeout_s: float,
        withdraw: Callable[[int | str], bytes] | None = None,
    ) -> Any:
        """Send a request built by the core and wait (bounded) for its answer.

        ``withdraw(rid)`` returns the bytes that take the request back; they
        are written (bounded) before a timeout is raised or a cancellation of
        the caller goes on."""
        waiter = self._waiters[rid] = _Waiter()
        try:
            await self.send(data)
            with trio.move_on_after(timeout_s):
                await waiter.done.wait()
        except trio.Cancelled:
            if withdraw is not None and waiter.value is None and not self.closed.is_set():
                deadline = trio.current_time() + self.withdraw_timeout_s
                with trio.CancelScope(shield=True, deadline=deadline):
                    await self._withdraw(rid, withdraw, self.withdraw_timeout_s)
            raise
        finally:
            self._waiters.pop(rid, None)
        match waiter.value:
            case Response(result=result):
                return result
            case ErrorResponse(method=method, code=code, message=message, data=data):
                raise AgentRequestError(method, code, message, data)
        if self.closed.is_set():
            raise AgentClosed(self.close_reason)
        if withdraw is not None:
            await self._withdraw(rid, withdraw)
            raise AgentTimeout(f"no answer to request {rid!r} within {timeout_s}s (withdrawn)")
        raise AgentTimeout(f"no answer to request {rid!r} within {timeout_s}s")

    async def _withdraw(self, rid: int | str, withdraw: Callable[[int | str], bytes],
                        timeout_s: float | None = None) -> None:
        # Best effort: an agent that is gone or not reading has nothing to stop.
        with contextlib.suppress(AgentClosed, AgentTimeout):
            await self.send(withdraw(rid), timeout_s=timeout_s)

    def expect_turn(self) -> None:
        """Arm the turn waiter before the prompt is written, so a fast answer is not missed."""
        self._turn_result = None
        self._turn_done = trio.Event()

    async def wait_turn(self, *, timeout_s: float = math.inf) -> TurnEnded:
        with trio.move_on_after(timeout_s):
            await self._turn_done.wait()
        if self._turn_result is None:
            raise AgentTimeout(f"turn did not end within {timeout_s}s")
        return self._turn_result

    def deliver_to(self, sink: Callable[[AgentEvent], None]) -> None:
        """Hand every event to ``sink`` in the reader's step instead of putting
        it on ``events`` (which then stays empty).  ``sink`` must not block
        (it is not awaited: nothing slows the reader) and must not raise; set
        it before ``run`` starts."""
        self._sink = sink

    async def _deliver(self, ev: AgentEvent) -> None:
        if self._sink is not None:
            if not self.closed.is_set():  # as ``events``: nothing after its close
                self._sink(ev)
        else:
            await self._events_send.send(ev)

    async def publish(self, ev: AgentEvent) -> None:
        """An event of the client's own making (a Codex option kept for the next
        turn) on ``events``, after those already there; nothing once closed."""
        if not self.closed.is_set():
            await self._deliver(ev)

    # -- reading ------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The stdout reader.  Returns when the agent's stdout ends."""
        task_status.started()
        try:
            while True:
                try:
                    data = await self._receive_stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                self.core.receive_data(bytes(data))
                if await self._drain():
                    return
                reply = self.core.data_to_send()
                if reply:
                    with contextlib.suppress(AgentClosed, AgentTimeout):
                        await self.send(reply)
        finally:
            self._close("agent's stdout ended")

    async def _drain(self) -> bool:
        while True:
            ev = self.core.next_event()
            if isinstance(ev, NeedData):
                return False
            match ev:
                case Response(id=rid) | ErrorResponse(id=rid):
                    waiter = self._waiters.get(rid)
                    if waiter is not None:
                        waiter.value = ev
                        waiter.done.set()
                case PeerClosed():
                    self._close("agent's stdout ended")
                    return True
                case TurnEnded():
                    self._turn_result = ev
                    self._turn_done.set()
                    await self._deliver(ev)
                case _:
                    await self._deliver(ev)

    def _close(self, reason: str) -> None:
        if self.closed.is_set():
            return
        self.close_reason = reason
        self.closed.set()
        for waiter in self._waiters.values():
            waiter.done.set()
        if not self._turn_done.is_set() and self._turn_result is None:
            self._turn_result = TurnEnded(stop_reason="error", error=reason)
            self._turn_done.set()
        notice = AgentNotice(message=reason, level="info")
        if self._sink is not None:
            self._sink(notice)
        else:
            with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError):
                self._events_send.send_nowait(notice)
        self._events_send.close()


def _is_fifo(fd: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False
