"""AgentConnection over in-memory streams, with a scripted agent on the far end.

Every test runs on trio's MockClock (the ``autojump_clock`` argument: pytest-trio
picks the clock from the test's own arguments): a 30 s timeout costs no wall
time, and a timing assertion is exact rather than a guess about load.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from protocols.acp import AcpClient
from protocols.events import AgentNotice, MessageChunk, TurnEnded
from protocols.jsonrpc import (
    Dialect,
    ErrorResponse,
    IncomingNotification,
    IncomingRequest,
    RpcConnection,
    RpcEvent,
)
from protocols.transport import (
    AgentClosed,
    AgentConnection,
    AgentRequestError,
    AgentTimeout,
)

from .helpers import drain, parse_lines


class ScriptedAgent:
    """The agent's end of the link: an RpcConnection in the server role."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.rpc = RpcConnection(Dialect.JSONRPC2, first_id=0)
        self._ready: list[RpcEvent] = []

    async def receive(self) -> RpcEvent:
        while not self._ready:
            self.rpc.receive_data(bytes(await self.stream.receive_some()))
            self._ready += drain(self.rpc)
        return self._ready.pop(0)

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)


@asynccontextmanager
async def connected(
    *, write_timeout_s: float = 5.0
) -> AsyncIterator[tuple[AcpClient, AgentConnection, ScriptedAgent]]:
    """A connection whose reader runs in this block's nursery, plus its peer."""
    ours, theirs = trio.testing.memory_stream_pair()
    core = AcpClient()
    conn = AgentConnection(core, ours, ours, write_timeout_s=write_timeout_s)
    with trio.fail_after(600):  # virtual seconds: only a real hang trips it
        async with trio.open_nursery() as nursery:
            await nursery.start(conn.run)
            yield core, conn, ScriptedAgent(theirs)
            nursery.cancel_scope.cancel()


async def test_request_times_out_on_a_silent_agent(autojump_clock: trio.testing.MockClock) -> None:
    async with connected() as (core, conn, _agent):
        rid, data = core.initialize()
        start = trio.current_time()
        with pytest.raises(AgentTimeout, match="no answer to request 1 within 30"):
            await conn.request(rid, data, timeout_s=30)
        assert trio.current_time() - start == pytest.approx(30)
        assert not conn.closed.is_set()  # a slow agent is not a dead one


async def test_write_times_out_when_the_agent_stops_reading(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A lockstep stream has no buffer: send_all waits for the peer to read,
    # like a pipe whose reader stopped draining.
    ours, _theirs = trio.testing.lockstep_stream_pair()
    core = AcpClient()
    conn = AgentConnection(core, ours, ours, write_timeout_s=5)
    rid, data = core.initialize()
    start = trio.current_time()
    with trio.fail_after(600), pytest.raises(AgentTimeout, match="did not read its stdin"):
        await conn.request(rid, data, timeout_s=60)
    # Bounded by the write timeout, not the (longer) request timeout.
    assert trio.current_time() - start == pytest.approx(5)


async def test_request_answered(autojump_clock: trio.testing.MockClock) -> None:
    async def answer(agent: ScriptedAgent) -> None:
        req = await agent.receive()
        assert isinstance(req, IncomingRequest)
        await trio.sleep(3)
        await agent.send(agent.rpc.send_response(req.id, {"protocolVersion": 1}))

    async with connected() as (core, conn, agent), trio.open_nursery() as nursery:
        nursery.start_soon(answer, agent)
        rid, data = core.initialize()
        assert await conn.request(rid, data, timeout_s=10) == {"protocolVersion": 1}


async def test_request_error_raises_with_code(autojump_clock: trio.testing.MockClock) -> None:
    async def refuse(agent: ScriptedAgent) -> None:
        req = await agent.receive()
        assert isinstance(req, IncomingRequest)
        await agent.send(agent.rpc.send_error(req.id, -32602, "bad cwd"))

    async with connected() as (core, conn, agent), trio.open_nursery() as nursery:
        nursery.start_soon(refuse, agent)
        rid, data = core.new_session("/nope")
        with pytest.raises(AgentRequestError, match="bad cwd") as info:
            await conn.request(rid, data, timeout_s=10)
        assert (info.value.method, info.value.code) == ("session/new", -32602)


async def test_request_error_keeps_its_data(autojump_clock: trio.testing.MockClock) -> None:
    async def refuse(agent: ScriptedAgent) -> None:
        req = await agent.receive()
        assert isinstance(req, IncomingRequest)
        await agent.send(agent.rpc.send_error(req.id, -32603, "Internal error",
                                              {"details": "cwd /nope does not exist"}))

    async with connected() as (core, conn, agent), trio.open_nursery() as nursery:
        nursery.start_soon(refuse, agent)
        rid, data = core.new_session("/nope")
        with pytest.raises(AgentRequestError) as info:
            await conn.request(rid, data, timeout_s=10)
        assert info.value.data == {"details": "cwd /nope does not exist"}
        assert info.value.details == "cwd /nope does not exist"
        assert str(info.value) == ("session/new failed (-32603): Internal error: "
                                   "cwd /nope does not exist")


async def test_agent_exit_fails_a_pending_request_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with connected() as (core, conn, agent):
        async with trio.open_nursery() as nursery:

            async def die() -> None:
                await agent.receive()
                await agent.stream.aclose()

            nursery.start_soon(die)
            rid, data = core.initialize()
            start = trio.current_time()
            with pytest.raises(AgentClosed):
                await conn.request(rid, data, timeout_s=30)
            assert trio.current_time() == start  # not after the timeout
        with pytest.raises(AgentClosed):
            await conn.send(b"{}\n")


async def _open_session(core: AcpClient, conn: AgentConnection, agent: ScriptedAgent) -> None:
    async with trio.open_nursery() as nursery:

        async def answer() -> None:
            req = await agent.receive()
            assert isinstance(req, IncomingRequest)
            await agent.send(agent.rpc.send_response(req.id, {"sessionId": "s"}))

        nursery.start_soon(answer)
        rid, data = core.new_session("/w")
        await conn.request(rid, data, timeout_s=5)


async def test_turn_events_and_end(autojump_clock: trio.testing.MockClock) -> None:
    async with connected() as (core, conn, agent):
        await _open_session(core, conn, agent)
        _, data = core.prompt("hi")
        conn.expect_turn()
        await conn.send(data)
        req = await agent.receive()
        assert isinstance(req, IncomingRequest)
        await agent.send(
            agent.rpc.send_notification(
                "session/update",
                {
                    "sessionId": "s",
                    "update": {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": "yo"},
                    },
                },
            )
            + agent.rpc.send_response(req.id, {"stopReason": "end_turn"})
        )
        assert await conn.wait_turn(timeout_s=5) == TurnEnded(stop_reason="end_turn")
        assert await conn.events.receive() == MessageChunk(text="yo")
        assert await conn.events.receive() == TurnEnded(stop_reason="end_turn")
        # stdout ends: one last notice, then the channel closes.
        await agent.stream.aclose()
        notice = await conn.events.receive()
        assert isinstance(notice, AgentNotice)
        with pytest.raises(trio.EndOfChannel):
            await conn.events.receive()


async def test_wait_turn_times_out_on_a_hung_turn(autojump_clock: trio.testing.MockClock) -> None:
    async with connected() as (core, conn, agent):
        await _open_session(core, conn, agent)
        _, data = core.prompt("/hang")
        conn.expect_turn()
        await conn.send(data)
        start = trio.current_time()
        with pytest.raises(AgentTimeout, match="turn did not end within 45"):
            await conn.wait_turn(timeout_s=45)
        assert trio.current_time() - start == pytest.approx(45)


async def test_agent_exit_mid_turn_ends_it_with_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with connected() as (core, conn, agent):
        await _open_session(core, conn, agent)
        _, data = core.prompt("/crash")
        conn.expect_turn()
        await conn.send(data)
        await agent.receive()
        await agent.stream.aclose()
        ended = await conn.wait_turn(timeout_s=30)
        assert ended.stop_reason == "error"
        assert ended.error == "agent's stdout ended"


async def test_core_replies_are_written_back(autojump_clock: trio.testing.MockClock) -> None:
    """An agent call the client does not serve is refused on the wire, so the
    agent is not left waiting."""
    async with connected() as (_core, conn, agent):
        _, call = agent.rpc.send_request("terminal/create", {"command": "ls"})
        await agent.send(call)
        refusal = await agent.receive()
        assert isinstance(refusal, ErrorResponse)
        assert (refusal.method, refusal.code) == ("terminal/create", -32601)
        notice = await conn.events.receive()
        assert isinstance(notice, AgentNotice)


async def test_cancel_notification_goes_out_while_a_prompt_waits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with connected() as (core, conn, agent):
        await _open_session(core, conn, agent)
        _, data = core.prompt("long")
        conn.expect_turn()
        await conn.send(data)
        prompt = await agent.receive()
        assert isinstance(prompt, IncomingRequest)
        await conn.send(core.cancel())
        assert await agent.receive() == IncomingNotification(
            method="session/cancel", params={"sessionId": "s"}
        )
        await agent.send(agent.rpc.send_response(prompt.id, {"stopReason": "cancelled"}))
        assert await conn.wait_turn(timeout_s=5) == TurnEnded(stop_reason="cancelled")


# -- withdrawing a request ($/cancel_request) --------------------------------

INITIALIZE_LINE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,'
    b'"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false,"subagents":{}}}}\n'
)
WITHDRAW_LINE = b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}\n'


class RecordingStream(trio.abc.HalfCloseableStream):
    """Our end of the link, keeping every byte we wrote for exact assertions."""

    def __init__(self, inner: trio.abc.HalfCloseableStream) -> None:
        self.inner = inner
        self.written = bytearray()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)
        self.written += data

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def recorded() -> AsyncIterator[
    tuple[AcpClient, AgentConnection, ScriptedAgent, RecordingStream]
]:
    ours, theirs = trio.testing.memory_stream_pair()
    wire = RecordingStream(ours)
    core = AcpClient(acp_version=1)
    conn = AgentConnection(core, wire, wire, withdraw_timeout_s=1.0)
    with trio.fail_after(600):
        async with trio.open_nursery() as nursery:
            await nursery.start(conn.run)
            yield core, conn, ScriptedAgent(theirs), wire
            nursery.cancel_scope.cancel()


async def test_timed_out_request_is_withdrawn(autojump_clock: trio.testing.MockClock) -> None:
    async with recorded() as (core, conn, agent, wire):
        rid, data = core.initialize()
        with pytest.raises(AgentTimeout, match="within 30s \\(withdrawn\\)"):
            await conn.request(rid, data, timeout_s=30, withdraw=core.cancel_request)
        assert bytes(wire.written) == INITIALIZE_LINE + WITHDRAW_LINE
        assert await agent.receive() == IncomingRequest(
            id=1, method="initialize", params=parse_lines(INITIALIZE_LINE)[0]["params"]
        )
        assert await agent.receive() == IncomingNotification(
            method="$/cancel_request", params={"requestId": 1}
        )
        # The agent answers -32800 as the spec asks: reported, no crash.
        await agent.send(
            b'{"jsonrpc":"2.0","id":1,"error":{"code":-32800,"message":"Request cancelled"}}\n'
        )
        notice = await conn.events.receive()
        assert isinstance(notice, AgentNotice)
        assert "confirmed the withdrawal of initialize" in notice.message
        assert not conn.closed.is_set()


async def test_request_of_a_cancelled_caller_is_withdrawn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with recorded() as (core, conn, _agent, wire):
        rid, data = core.initialize()
        with trio.move_on_after(7):  # the caller's own start-up bound
            await conn.request(rid, data, timeout_s=30, withdraw=core.cancel_request)
        assert trio.current_time() == pytest.approx(7)
        assert bytes(wire.written) == INITIALIZE_LINE + WITHDRAW_LINE
        assert core.rpc.pending == {}


async def test_withdrawal_is_bounded_when_the_agent_stops_reading(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A lockstep stream has no buffer: the agent reads the request line, then
    # stops reading, so the withdrawal's write blocks.
    ours, theirs = trio.testing.lockstep_stream_pair()
    core = AcpClient(acp_version=1)
    conn = AgentConnection(core, ours, ours, write_timeout_s=5, withdraw_timeout_s=1)
    rid, data = core.initialize()
    with trio.fail_after(600):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(theirs.receive_some)
            start = trio.current_time()
            with trio.move_on_after(2):
                await conn.request(rid, data, timeout_s=30, withdraw=core.cancel_request)
            # Cancelled at 2 s; the withdrawal then waits at most withdraw_timeout_s.
            assert trio.current_time() - start == pytest.approx(3)


async def test_request_without_withdraw_writes_nothing_more(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with recorded() as (core, conn, _agent, wire):
        rid, data = core.initialize()
        with pytest.raises(AgentTimeout):
            await conn.request(rid, data, timeout_s=30)
        assert bytes(wire.written) == INITIALIZE_LINE


# -- writes to a real pipe (the local executor's agent stdin) ----------------------


@asynccontextmanager
async def piped() -> AsyncIterator[tuple[AgentConnection, trio.lowlevel.FdStream]]:
    """A connection writing a real pipe (an FdStream, as a local agent's stdin)."""
    import os

    r, w = os.pipe()
    async with trio.lowlevel.FdStream(r) as far, trio.lowlevel.FdStream(w) as near:
        yield AgentConnection(AcpClient(), near, far, write_timeout_s=5), far


async def read_exactly(stream: trio.lowlevel.FdStream, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        out += await stream.receive_some(65536)
    return bytes(out)


async def test_a_pipe_write_is_on_the_pipe_when_send_returns(autojump_clock: object) -> None:
    async with piped() as (conn, far):
        await conn.send(b'{"a":1}\n')
        assert await read_exactly(far, 8) == b'{"a":1}\n'


async def test_writes_larger_than_the_pipe_arrive_whole_and_in_order(
        autojump_clock: object) -> None:
    """The at-once write takes part of a big line; the rest goes under the lock
    before any other send (no line torn or interleaved)."""
    big = b"x" * 300_000 + b"\n"
    small = b"after\n"
    async with piped() as (conn, far):
        got: list[bytes] = []
        async with trio.open_nursery() as nursery:
            async def write_both() -> None:
                async with trio.open_nursery() as writers:
                    writers.start_soon(conn.send, big)
                    await trio.testing.wait_all_tasks_blocked()
                    writers.start_soon(conn.send, small)
            nursery.start_soon(write_both)
            got.append(await read_exactly(far, len(big) + len(small)))
        assert got[0] == big + small


async def test_a_closed_pipe_is_reported_as_closed(autojump_clock: object) -> None:
    async with piped() as (conn, far):
        await far.aclose()
        with pytest.raises(AgentClosed):
            await conn.send(b"late\n")


async def test_send_now_writes_a_frame_whole_without_yielding(autojump_clock: object) -> None:
    async with piped() as (conn, far):
        assert conn.can_send_now()
        with trio.testing.assert_no_checkpoints():
            assert conn.send_now(b'{"cancel":1}\n')
        assert await read_exactly(far, 13) == b'{"cancel":1}\n'


async def test_send_now_refuses_what_it_cannot_write_whole(autojump_clock: object) -> None:
    """Nothing is written when the frame may not go whole (longer than PIPE_BUF),
    while another write holds the pipe, or once the agent is gone: ``send`` it."""
    import select

    async with piped() as (conn, far):
        assert not conn.send_now(b"x" * (select.PIPE_BUF + 1))
        async with conn._write_lock:
            assert not conn.can_send_now()
            assert not conn.send_now(b"held\n")
        await conn.send(b"next\n")
        assert await read_exactly(far, 5) == b"next\n"
        conn._close("gone")
        assert not conn.send_now(b"late\n")


async def test_send_now_refuses_a_full_pipe_and_writes_nothing(autojump_clock: object) -> None:
    import fcntl
    import os

    async with piped() as (conn, far):
        fd = conn._send_stream.fileno()  # type: ignore[attr-defined]
        # Fill the pipe: a frame that would not fit is refused, not torn.
        size = fcntl.fcntl(fd, 1032)  # F_GETPIPE_SZ
        os.write(fd, b"y" * size)
        assert not conn.send_now(b"cancel\n")
        assert await read_exactly(far, size) == b"y" * size
        assert conn.send_now(b"cancel\n")
        assert await read_exactly(far, 7) == b"cancel\n"


async def test_send_now_is_for_pipes_only(autojump_clock: object) -> None:
    """A stream that is not a pipe (a socket may take part of a frame) is
    never written at once."""
    import socket

    a, b = socket.socketpair()
    with a, b:
        async with trio.lowlevel.FdStream(os.dup(a.fileno())) as near:
            conn = AgentConnection(AcpClient(), near, near)
            assert not conn.can_send_now()
            assert not conn.send_now(b"x\n")


# -- a write is whole or not at all, whatever cancels its caller ---------------


def _fill_pipe(conn: AgentConnection, leave: int) -> bytes:
    """Fill the agent's stdin pipe up to ``leave`` free bytes; what was written."""
    import fcntl

    fd = conn._send_stream.fileno()  # type: ignore[attr-defined]
    filler = b"y" * (fcntl.fcntl(fd, 1032) - leave)  # F_GETPIPE_SZ
    assert os.write(fd, filler) == len(filler)
    return filler


async def _drain_until(far: trio.lowlevel.FdStream, got: bytearray, end: bytes) -> None:
    while not got.endswith(end):
        got += await far.receive_some(65536)


async def test_a_cancelled_sender_finishes_the_line_it_began(autojump_clock: object) -> None:
    """The pipe takes only the head of the line at once; the caller is already
    cancelled.  The rest still follows (before the next frame), so the agent
    reads whole lines only."""
    line = b'{"jsonrpc":"2.0","method":"x","params":{"t":"' + b"z" * 8000 + b'"}}\n'
    async with piped() as (conn, far):
        # One free page: a non-blocking write of the line takes one page of it.
        filler = _fill_pipe(conn, leave=4096)
        got = bytearray()
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_drain_until, far, got, b"next\n")
                with trio.CancelScope() as scope:
                    scope.cancel()
                    await conn.send(line)
                await conn.send(b"next\n")
        assert bytes(got) == filler + line + b"next\n"


async def test_a_send_cancelled_mid_write_still_writes_its_whole_line(
        autojump_clock: object) -> None:
    big = b'{"t":"' + b"x" * 300_000 + b'"}\n'
    async with piped() as (conn, far):
        got = bytearray()
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                sender = trio.CancelScope()

                async def send_big() -> None:
                    with sender:
                        await conn.send(big)

                nursery.start_soon(send_big)
                await trio.testing.wait_all_tasks_blocked()  # the pipe is full
                sender.cancel()
                nursery.start_soon(_drain_until, far, got, b"next\n")
                await conn.send(b"next\n")
        assert bytes(got) == big + b"next\n"


async def test_a_sender_cancelled_while_waiting_for_the_pipe_writes_nothing(
        autojump_clock: object) -> None:
    big = b'{"t":"' + b"x" * 300_000 + b'"}\n'
    async with piped() as (conn, far):
        got = bytearray()
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(conn.send, big)
                await trio.testing.wait_all_tasks_blocked()
                waiting = trio.CancelScope()

                async def send_second() -> None:
                    with waiting:
                        await conn.send(b'{"second":1}\n')

                nursery.start_soon(send_second)
                await trio.testing.wait_all_tasks_blocked()
                waiting.cancel()
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(_drain_until, far, got, b"next\n")
                await conn.send(b"next\n")
        assert bytes(got) == big + b"next\n"


async def test_a_line_cut_by_the_write_timeout_is_the_last_write(
        autojump_clock: trio.testing.MockClock) -> None:
    """An agent that stops reading mid-line: the cancelled sender waits at most
    ``write_timeout_s``; the line stays cut, so nothing is ever appended to it."""
    big = b'{"t":"' + b"x" * 300_000 + b'"}\n'
    async with piped() as (conn, far):
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                sender = trio.CancelScope()
                ended: list[float] = []

                async def send_big() -> None:
                    with sender:
                        await conn.send(big)
                    ended.append(trio.current_time())

                start = trio.current_time()
                nursery.start_soon(send_big)
                await trio.testing.wait_all_tasks_blocked()
                sender.cancel()
        assert sender.cancelled_caught  # the caller sees its cancel, not the timeout
        assert ended == [pytest.approx(start + 5)]
        assert not conn.can_send_now()
        assert not conn.send_now(b"late\n")
        with pytest.raises(AgentTimeout, match="cut off"):
            await conn.send(b"late\n")
        got = bytearray()
        with trio.move_on_after(1):
            while True:
                got += await far.receive_some(65536)
        assert 0 < len(got) < len(big)
        assert big.startswith(bytes(got))
