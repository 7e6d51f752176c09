"""The adapters against the mock agent as a real subprocess, both dialects.

One test (or two) per row of the mock agent's prompt table (DESIGN.md §3).
The ``agent`` fixture (conftest) spawns ``python -m protocols.mock_agent`` in
its own process group, initializes it, opens a session, and always tears it
down with ``terminate_group``, checking that the group is gone.  Every test is
bounded by ``trio.fail_after`` so a hang fails with a traceback, never stalls CI.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
import trio
import trio.testing

from protocols.adapters import AcpAdapter, AgentAdapter, CodexAdapter
from protocols.events import (
    AgentEvent,
    AgentNotice,
    MessageChunk,
    PermissionRequested,
    PermissionResolved,
    PermissionWithdrawn,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
)
from protocols.jsonrpc import LocalProtocolError
from protocols.transport import AgentClosed, AgentConnection, AgentTimeout

from .helpers import RunningAgent

#: Wall-clock bound per test; the slowest row (/slow 800) needs about 1 s.
TEST_S = 10.0
#: "Promptly": the mock honours /delay's cancel at once, so anything near this
#: bound means a wakeup was lost somewhere between adapter and agent.
PROMPT_CANCEL_S = 0.5

T = TypeVar("T", bound=AgentEvent)


@dataclass
class Events:
    """Reads the adapter's event channel, keeping everything it has seen."""

    channel: trio.MemoryReceiveChannel[AgentEvent]
    seen: list[AgentEvent] = field(default_factory=list)

    async def until(self, cls: type[T]) -> T:
        while True:
            ev = await self.channel.receive()
            self.seen.append(ev)
            if isinstance(ev, cls):
                return ev

    def of(self, cls: type[T]) -> list[T]:
        return [e for e in self.seen if isinstance(e, cls)]

    def text(self) -> str:
        return "".join(c.text for c in self.of(MessageChunk))


@dataclass
class PromptTask:
    """A prompt running in the background, and when it returned."""

    result: TurnEnded | None = None
    ended_at: float | None = None

    async def run(self, adapter: AgentAdapter, text: str) -> None:
        self.result = await adapter.prompt(text)
        self.ended_at = trio.current_time()


def lines_after(agent: RunningAgent, method: str) -> list[Any]:
    """The lines written to the agent from the one calling ``method`` on."""
    lines = agent.written.lines()
    first = next(i for i, m in enumerate(lines) if m.get("method") == method)
    return lines[first:]


async def test_echo(agent: RunningAgent) -> None:
    events = Events(agent.adapter.events)
    with trio.fail_after(TEST_S):
        ended = await agent.adapter.prompt("hello from the test")
        assert (ended.stop_reason, ended.error) == ("end_turn", None)
        await events.until(TurnEnded)
    assert events.text() == "hello from the test"
    assert events.of(AgentNotice) == []


async def test_delay_cancels_promptly_and_the_adapter_goes_on(agent: RunningAgent) -> None:
    adapter = agent.adapter
    events = Events(adapter.events)
    task = PromptTask()
    with trio.fail_after(TEST_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task.run, adapter, "/delay 5000")
            await events.until(MessageChunk)
            assert adapter.turn_running
            operation_id = adapter.operation_id
            assert operation_id is not None
            cancel_at = trio.current_time()
            await adapter.cancel()
        assert task.result is not None and task.ended_at is not None
        assert task.result.stop_reason == "cancelled"
        assert task.ended_at - cancel_at < PROMPT_CANCEL_S
        assert not adapter.turn_running
        assert adapter.operation_id is None

        # What went on the wire is the protocol's cancel, naming the operation.
        if isinstance(adapter, AcpAdapter):
            assert lines_after(agent, "session/cancel")[0] == {
                "jsonrpc": "2.0",
                "method": "session/cancel",
                "params": {"sessionId": operation_id},
            }
        else:
            [interrupt] = lines_after(agent, "turn/interrupt")
            assert interrupt["params"] == {"threadId": adapter.agent_session_id,
                                           "turnId": operation_id}
            assert task.result.turn_id == operation_id

        # The same adapter, and the same agent, take the next prompt.
        ended = await adapter.prompt("still here")
        assert ended.stop_reason == "end_turn"


async def test_slow_agent_ignores_cancel_until_its_time(agent: RunningAgent) -> None:
    adapter = agent.adapter
    events = Events(adapter.events)
    task = PromptTask()
    with trio.fail_after(TEST_S):
        started_at = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task.run, adapter, "/slow 800")
            await events.until(MessageChunk)
            await adapter.cancel()
            chunks_at_cancel = len(events.of(MessageChunk))
            await events.until(TurnEnded)
    assert task.result is not None and task.ended_at is not None
    # The turn lasted its full 800 ms and kept streaming after the cancel...
    assert task.ended_at - started_at >= 0.8
    assert len(events.of(MessageChunk)) >= chunks_at_cancel + 2
    # ...and still reports that it was cancelled when it finally stopped.
    assert task.result.stop_reason == "cancelled"


async def test_hang_is_bounded_by_the_turn_timeout(agent: RunningAgent) -> None:
    adapter = agent.adapter
    adapter.timeouts = dataclasses.replace(adapter.timeouts, turn_s=0.5)

    async def cancel_soon() -> None:
        await trio.sleep(0.1)
        await adapter.cancel()  # ignored by /hang

    with trio.fail_after(TEST_S):
        started_at = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_soon)
            with pytest.raises(AgentTimeout, match=r"did not end within 0\.5"):
                await adapter.prompt("/hang")
    assert 0.5 <= trio.current_time() - started_at < 2.0
    # The turn never ended: the agent is still mid-turn; teardown kills it.
    assert adapter.turn_running


def _allow_option(agent: RunningAgent) -> str:
    return "allow" if agent.protocol == "acp" else "accept"


async def test_permission_is_surfaced_and_answered(agent: RunningAgent) -> None:
    adapter = agent.adapter
    events = Events(adapter.events)
    task = PromptTask()
    with trio.fail_after(TEST_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task.run, adapter, "/permission")
            request = await events.until(PermissionRequested)
            assert request.request_id in adapter.core.pending_permissions
            await adapter.respond_permission(request.request_id, _allow_option(agent))
            await events.until(TurnEnded)
    assert task.result is not None
    assert task.result.stop_reason == "end_turn"
    assert events.of(PermissionResolved) == [
        PermissionResolved(request_id=request.request_id, option_id=_allow_option(agent))
    ]
    if agent.protocol == "acp":
        assert (request.title, request.tool_call_id) == ("Write to disk", "perm-tool")
        assert [o.option_id for o in request.options] == ["allow", "reject"]
        assert events.text() == "permission: allow"
        assert {
            "jsonrpc": "2.0",
            "id": 0,
            "result": {"outcome": {"outcome": "selected", "optionId": "allow"}},
        } in agent.written.lines()
    else:
        assert (request.title, request.tool_call_id) == ("touch file.txt", "perm-item")
        assert [o.option_id for o in request.options] == [
            "accept",
            "acceptForSession",
            "decline",
            "cancel",
        ]
        assert events.text() == "approval: accept"
        assert {"id": 100, "result": {"decision": "accept"}} in agent.written.lines()


async def test_cancel_answers_the_pending_permission(agent: RunningAgent) -> None:
    adapter = agent.adapter
    events = Events(adapter.events)
    task = PromptTask()
    with trio.fail_after(TEST_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task.run, adapter, "/permission")
            request = await events.until(PermissionRequested)
            cancel_at = trio.current_time()
            await adapter.cancel()
            await events.until(TurnEnded)
    assert task.result is not None and task.ended_at is not None
    assert task.result.stop_reason == "cancelled"
    assert task.ended_at - cancel_at < PROMPT_CANCEL_S
    assert adapter.core.pending_permissions == ()
    assert events.of(PermissionResolved) == [
        PermissionResolved(request_id=request.request_id, option_id=None)
    ]
    if isinstance(adapter, AcpAdapter):
        # The MUST of ACP: the answer "cancelled", then the cancel itself.
        answer, cancel = agent.written.lines()[-2:]
        assert answer == {
            "jsonrpc": "2.0",
            "id": 0,
            "result": {"outcome": {"outcome": "cancelled"}},
        }
        assert cancel["method"] == "session/cancel"
    else:
        assert isinstance(adapter, CodexAdapter)
        interrupt, decline = lines_after(agent, "turn/interrupt")
        assert interrupt["params"]["turnId"] == task.result.turn_id
        assert decline == {"id": 100, "result": {"decision": "decline"}}


async def test_tool_call_start_and_finish(agent: RunningAgent) -> None:
    events = Events(agent.adapter.events)
    with trio.fail_after(TEST_S):
        ended = await agent.adapter.prompt("/tool 200")
        await events.until(TurnEnded)
    assert ended.stop_reason == "end_turn"
    [started] = events.of(ToolCallStarted)
    updates = events.of(ToolCallUpdated)
    assert {u.tool_call_id for u in updates} == {started.tool_call_id}
    assert updates[-1].status == "completed"
    if agent.protocol == "acp":
        assert (started.status, started.kind) == ("pending", "execute")
        assert [u.status for u in updates] == ["in_progress", "completed"]
    else:
        assert (started.status, started.kind) == ("in_progress", "execute")
    assert events.seen.index(started) < events.seen.index(updates[-1])
    assert events.text() == "tool finished"


async def test_cancel_marks_the_running_tool_cancelled(agent: RunningAgent) -> None:
    adapter = agent.adapter
    events = Events(adapter.events)
    task = PromptTask()
    with trio.fail_after(TEST_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task.run, adapter, "/tool 5000")
            started = await events.until(ToolCallStarted)
            if agent.protocol == "acp":
                await events.until(ToolCallUpdated)  # in_progress
            cancel_at = trio.current_time()
            await adapter.cancel()
            await events.until(TurnEnded)
    assert task.result is not None and task.ended_at is not None
    assert task.result.stop_reason == "cancelled"
    assert task.ended_at - cancel_at < PROMPT_CANCEL_S
    assert events.of(ToolCallUpdated)[-1] == ToolCallUpdated(
        tool_call_id=started.tool_call_id, status="cancelled"
    )


async def test_crash_ends_the_turn_with_an_error(agent: RunningAgent) -> None:
    adapter = agent.adapter
    with trio.fail_after(TEST_S):
        ended = await adapter.prompt("/crash")
        assert ended.stop_reason == "error"
        assert ended.error is not None and "stdout ended" in ended.error
        assert await agent.proc.wait() == 1
        # Further use says plainly that the agent is gone.
        with pytest.raises(AgentClosed):
            await adapter.prompt("anyone there?")
        await adapter.cancel()  # nothing running: already settled, no error
        while b"crashing on purpose" not in agent.stderr:
            await trio.sleep(0.01)


async def test_garbage_line_is_a_notice_and_the_turn_ends_normally(agent: RunningAgent) -> None:
    events = Events(agent.adapter.events)
    with trio.fail_after(TEST_S):
        ended = await agent.adapter.prompt("/garbage")
        await events.until(TurnEnded)
    assert ended.stop_reason == "end_turn"
    [notice] = events.of(AgentNotice)
    assert "not JSON" in notice.message
    assert "this is not JSON" in notice.message
    assert events.text() == "/garbage"


async def test_dropcancel_ignores_the_first_cancel_and_honours_a_resent_one(
    agent: RunningAgent,
) -> None:
    """Models pi-acp/vibe dropping a cancel that follows the prompt at once:
    re-sending the protocol cancel stops the turn in well under a second."""
    adapter = agent.adapter
    events = Events(adapter.events)
    task = PromptTask()
    with trio.fail_after(TEST_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task.run, adapter, "/dropcancel 5000")
            await events.until(MessageChunk)
            await adapter.cancel()
            # Dropped: the turn goes on streaming.
            await trio.sleep(0.3)
            assert task.result is None
            before = len(events.of(MessageChunk))
            await events.until(MessageChunk)
            assert len(events.of(MessageChunk)) > before
            resent_at = trio.current_time()
            await adapter.resend_cancel()
        assert task.result is not None and task.ended_at is not None
        assert task.result.stop_reason == "cancelled"
        assert task.ended_at - resent_at < 1.0
    method = "session/cancel" if agent.protocol == "acp" else "turn/interrupt"
    cancels = [m for m in agent.written.lines() if m.get("method") == method]
    assert len(cancels) == 2
    assert cancels[0]["params"] == cancels[1]["params"]
    # No cancel outstanding any more: nothing to re-send.
    assert adapter.core.resend_cancel() == b""


async def test_withdraw_dismisses_the_permission(agent: RunningAgent) -> None:
    adapter = agent.adapter
    events = Events(adapter.events)
    with trio.fail_after(TEST_S):
        ended = None
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                nonlocal ended
                ended = await adapter.prompt("/withdraw")

            nursery.start_soon(run)
            request = await events.until(PermissionRequested)
            withdrawn = await events.until(PermissionWithdrawn)
            assert withdrawn.request_id == request.request_id
            await events.until(TurnEnded)
    assert ended is not None and ended.stop_reason == "end_turn"
    assert adapter.core.pending_permissions == ()
    assert events.of(PermissionResolved) == []
    if agent.protocol == "acp":
        # The answer the spec requires, exactly, and the agent got it.
        assert {
            "jsonrpc": "2.0", "id": 0,
            "error": {"code": -32800, "message": "Request cancelled"},
        } in agent.written.lines()
        assert events.text() == "withdrawn: -32800"
    else:
        # serverRequest/resolved owes the agent nothing.
        assert [m for m in agent.written.lines() if m.get("id") == 100] == []
        assert events.text() == "withdrawn: resolved"
    with pytest.raises(LocalProtocolError):
        await adapter.respond_permission(request.request_id, None)


async def test_deny_and_stop_ends_the_turn(agent: RunningAgent) -> None:
    """Codex's ``cancel`` decision refuses and interrupts; the event says so,
    so the supervisor can end the turn as a user cancel.  ACP has no such
    decision: its permission details are checked here instead."""
    adapter = agent.adapter
    events = Events(adapter.events)
    task = PromptTask()
    with trio.fail_after(TEST_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task.run, adapter, "/permission")
            request = await events.until(PermissionRequested)
            if agent.protocol == "acp":
                assert request.details == {
                    "kind": "execute", "raw_input": {"command": "touch file.txt"}
                }
                await adapter.respond_permission(request.request_id, "reject")
            else:
                assert request.details == {"command": "touch file.txt", "reason": "Write to disk"}
                assert [o.name for o in request.options] == [
                    "Allow", "Allow for this session", "Deny", "Deny and stop"
                ]
                await adapter.respond_permission(request.request_id, "cancel")
            await events.until(TurnEnded)
    assert task.result is not None
    [resolved] = events.of(PermissionResolved)
    if agent.protocol == "acp":
        assert task.result.stop_reason == "end_turn"
        assert not resolved.interrupts_turn
    else:
        assert task.result.stop_reason == "cancelled"
        assert resolved == PermissionResolved(
            request_id=request.request_id, option_id="cancel", interrupts_turn=True
        )
        assert {"id": 100, "result": {"decision": "cancel"}} in agent.written.lines()


def _write_at_once(agent: RunningAgent) -> None:
    """The recording stream is no pipe: let ``send_now`` write the agent's
    real stdin at once (one ``os.write``, as on a pipe), keeping the copy."""
    import os

    conn = agent.adapter.connection
    assert isinstance(conn, AgentConnection)

    def send_now(data: bytes) -> bool:
        written = os.write(agent.written.inner.fileno(), data)  # type: ignore[attr-defined]
        assert written == len(data)
        agent.written.data += data
        return True

    conn.can_send_now = lambda: True  # type: ignore[method-assign]
    conn.send_now = send_now  # type: ignore[method-assign]


def _cancels(agent: RunningAgent) -> list[Any]:
    method = "session/cancel" if agent.protocol == "acp" else "turn/interrupt"
    return [m for m in agent.written.lines() if m.get("method") == method]


async def _during_delay(agent: RunningAgent,
                        cancel: Callable[[AgentAdapter], Awaitable[None]]) -> None:
    """A /delay turn cancelled by ``cancel`` after its first chunk: it ends
    cancelled, and exactly one protocol cancel went to the agent."""
    task = PromptTask()
    events = Events(agent.adapter.events)
    with trio.fail_after(TEST_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task.run, agent.adapter, "/delay 5000")
            await events.until(MessageChunk)
            await cancel(agent.adapter)
        assert task.result is not None and task.result.stop_reason == "cancelled"
    assert len(_cancels(agent)) == 1


async def test_cancel_now_writes_the_cancel_in_the_callers_step(agent: RunningAgent) -> None:
    _write_at_once(agent)

    async def at_once(adapter: AgentAdapter) -> None:
        with trio.testing.assert_no_checkpoints():
            assert adapter.cancel_now()
        assert len(_cancels(agent)) == 1

    await _during_delay(agent, at_once)


async def test_a_cancel_now_could_not_write_is_sent_once_by_cancel(
        agent: RunningAgent) -> None:
    """Built but refused by the pipe (full): ``cancel`` sends those bytes, and
    the core is not asked for a second cancel."""
    conn = agent.adapter.connection
    assert isinstance(conn, AgentConnection)
    conn.can_send_now = lambda: True  # type: ignore[method-assign]
    conn.send_now = lambda data: False  # type: ignore[method-assign]

    async def refused(adapter: AgentAdapter) -> None:
        assert not adapter.cancel_now()
        assert _cancels(agent) == []
        await adapter.cancel()

    await _during_delay(agent, refused)


@pytest.mark.parametrize("dialect", ["acp", "acp2"])  # (Codex owes its interrupt instead)
async def test_cancel_now_never_overtakes_an_unwritten_prompt(agent: RunningAgent) -> None:
    _write_at_once(agent)

    async def before_the_prompt(adapter: AgentAdapter) -> None:
        assert isinstance(adapter, AcpAdapter)
        # As if the prompt's write were still under way: nothing is built.
        adapter._prompt_written = unwritten = trio.Event()
        assert not adapter.cancel_now()
        assert adapter.turn_running and _cancels(agent) == []
        unwritten.set()
        await adapter.cancel()

    await _during_delay(agent, before_the_prompt)


async def test_a_second_prompt_at_once_is_refused_and_changes_nothing(
        agent: RunningAgent) -> None:
    """Two prompts on one adapter are our own misuse: the second raises at once,
    before the core starts a turn or anything is written, and the running turn
    goes on (its cancel still works); once it is over, the next prompt runs."""
    adapter = agent.adapter

    async def during(adapter: AgentAdapter) -> None:
        before = bytes(agent.written.data)
        operation_id = adapter.operation_id
        with trio.testing.assert_no_checkpoints(), pytest.raises(
                RuntimeError, match="already running"):
            await adapter.prompt("a second prompt")
        assert bytes(agent.written.data) == before
        assert adapter.turn_running and adapter.operation_id == operation_id
        await adapter.cancel()

    await _during_delay(agent, during)
    with trio.fail_after(TEST_S):
        assert (await adapter.prompt("after")).stop_reason == "end_turn"
