"""``AgentConnection.deliver_to``: the reader hands each event to a function in
its own step (agentctl's event log), with no task between the agent's answer
and the log (issue 44: agentctl's share of a cancel's round trip).

On trio's MockClock, over in-memory streams, with the scripted agent of
test_transport.py.
"""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel
import trio.testing

from protocols.acp import AcpClient
from protocols.events import AgentEvent, AgentNotice, MessageChunk, TurnEnded
from protocols.jsonrpc import IncomingRequest
from protocols.transport import AgentConnection

from .test_transport import ScriptedAgent, _open_session


async def test_events_reach_the_sink_in_the_readers_own_step(
        autojump_clock: trio.testing.MockClock) -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    core = AcpClient()
    conn = AgentConnection(core, ours, ours)
    agent = ScriptedAgent(theirs)
    seen: list[tuple[AgentEvent, trio.lowlevel.Task]] = []
    conn.deliver_to(lambda ev: seen.append((ev, trio.lowlevel.current_task())))
    reader: list[trio.lowlevel.Task] = []

    async def run_reader(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        reader.append(trio.lowlevel.current_task())
        await conn.run(task_status=task_status)

    with trio.fail_after(600):  # virtual seconds: only a real hang trips it
        async with trio.open_nursery() as nursery:
            await nursery.start(run_reader)
            await _open_session(core, conn, agent)
            _, data = core.prompt("hi")
            conn.expect_turn()
            await conn.send(data)
            req = await agent.receive()
            assert isinstance(req, IncomingRequest)
            await agent.send(
                agent.rpc.send_notification("session/update", {
                    "sessionId": "s",
                    "update": {"sessionUpdate": "agent_message_chunk",
                               "content": {"type": "text", "text": "yo"}}})
                + agent.rpc.send_response(req.id, {"stopReason": "end_turn"}))
            ended = await conn.wait_turn(timeout_s=5)
            # Already delivered when the turn's waiter wakes: no task in between
            # (through ``events``, a consumer task would still have to run).
            assert [ev for ev, _ in seen] == [MessageChunk(text="yo"), ended]
            assert all(task is reader[0] for _, task in seen)
            with pytest.raises(trio.WouldBlock):
                conn.events.receive_nowait()  # nothing goes to ``events`` as well
            # stdout ends: the last notice to the sink too, then ``events`` closes.
            await agent.stream.aclose()
            await conn.closed.wait()
            assert isinstance(seen[-1][0], AgentNotice) and len(seen) == 3
            with pytest.raises(trio.EndOfChannel):
                await conn.events.receive()
            assert ended == TurnEnded(stop_reason="end_turn")
            nursery.cancel_scope.cancel()
