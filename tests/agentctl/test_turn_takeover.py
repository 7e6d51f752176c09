"""A turn an agentctl at a configured URL runs outlives the backend: after a
restart the new backend takes it over (issue 14 item 7).  The same turn id
keeps streaming into the same session, the chunks the agent produced while no
backend was connected arrive from agentctl's replay ring (none lost, none
twice), the turn ends with the agent's own stop reason, and it is cancellable
again; with agentctl gone the turn is interrupted as any restart interrupts it.

Real mock agent, real agentctl process, the real supervisor, the same SQLite
file across the two backends (the in-process backend's scope is its lifetime:
leaving it is a graceful stop)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from agentctl_support import TOKEN, AgentctlFactory

from supervisor.config import Config
from supervisor.models import CANCELLED_STATUS, Message, SessionState
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor, open_supervisor
from supervisor.session.lifecycle import CancelOutcome
from supervisor.turn.recovery import RESTART_STATUS
from tests.support.sessions import new_session
from tests.support.wait import wait_state

PROTOCOLS = pytest.mark.parametrize("protocol", ["acp", "codex"])


def _config(tmp_path: Path, url: str, protocol: str, **timeouts: float) -> Config:
    return Config.from_mapping(tmp_path / "data", {"timeouts": timeouts, "agents": {"remote": {
        "protocol": protocol, "executor": "agentctl", "agentctl_url": url,
        "agentctl_token": TOKEN, "command": [sys.executable, "-m", "protocols.mock_agent"]}}})


async def _start_turn(sup: Supervisor, prompt: str) -> tuple[Caller, str, str]:
    """A session on the remote agent, a streaming turn, its first chunks stored."""
    caller, sid = await new_session(sup, "remote")
    msg = await sup.orchestrator.send_message(caller, sid, prompt)
    assert msg.turn_id is not None
    with trio.fail_after(10):
        while "chunk1 " not in await _text(sup, caller, sid, msg.turn_id):
            await trio.sleep(0.02)
    return caller, sid, msg.turn_id


async def _messages(sup: Supervisor, caller: Caller, sid: str) -> list[Message]:
    return await sup.orchestrator.list_messages(caller, sid)


async def _text(sup: Supervisor, caller: Caller, sid: str, turn_id: str) -> str:
    return "".join(m.content for m in await _messages(sup, caller, sid)
                   if m.turn_id == turn_id and m.role == "agent" and m.kind == "text")



def _chunk_numbers(text: str) -> list[int]:
    assert re.fullmatch(r"(chunk\d+ )*", text), text
    return [int(n) for n in re.findall(r"chunk(\d+) ", text)]


async def _turn_row(sup: Supervisor, turn_id: str) -> Any:
    turn = await sup.store.get_turn(turn_id)
    assert turn is not None
    return turn


@PROTOCOLS
async def test_a_running_turn_streams_on_into_the_same_session_after_a_restart(
    tmp_path: Path, agentctl: AgentctlFactory, protocol: str
) -> None:
    with trio.fail_after(60):
        async with agentctl(protocol) as ctl:
            config = _config(tmp_path, ctl.url, protocol)
            async with open_supervisor(config) as sup:
                caller, sid, turn_id = await _start_turn(sup, "/delay 3000")
                before = _chunk_numbers(await _text(sup, caller, sid, turn_id))
            # No backend: the agent streams on into agentctl's log.
            await trio.sleep(0.6)
            status = await ctl.status()
            assert status["turn"] is not None and status["turn"]["id"] == turn_id
            async with open_supervisor(config) as sup:
                caller = await sup.caller()
                session = await sup.orchestrator.session(caller, sid)
                assert (session.state, session.current_turn_id) == (SessionState.RUNNING,
                                                                     turn_id)
                # A prompt meanwhile waits its turn in the queue, then runs.
                queued = await sup.orchestrator.add_message(caller, sid, "/recall")
                assert queued["delivery"] == "queued"
                with trio.fail_after(20):
                    while not [m for m in await _messages(sup, caller, sid)
                               if m.content.startswith("recall: ")]:
                        await trio.sleep(0.02)
                await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=20)
                turn = await _turn_row(sup, turn_id)
                assert (turn.state, turn.stop_reason) == ("completed", "end_turn")
                after = _chunk_numbers(await _text(sup, caller, sid, turn_id))
                # Every chunk once, in order: those of the gap included.
                assert after == list(range(len(after))) and len(after) > len(before) + 5
                messages = await _messages(sup, caller, sid)
                assert not [m for m in messages if m.kind == "status"]
                # The agent, its conversation and the session go on as one.
                assert [m.content for m in messages if m.content.startswith("recall: ")] == [
                    "recall: /delay 3000"]


@PROTOCOLS
async def test_a_taken_over_turn_is_cancellable_again(
    tmp_path: Path, agentctl: AgentctlFactory, protocol: str
) -> None:
    with trio.fail_after(60):
        async with agentctl(protocol) as ctl:
            config = _config(tmp_path, ctl.url, protocol)
            async with open_supervisor(config) as sup:
                caller, sid, turn_id = await _start_turn(sup, "/delay 20000")
            async with open_supervisor(config) as sup:
                caller = await sup.caller()
                # Nothing pending after the restart, whatever was before it.
                assert not sup.notify.projection.get(sid).pending
                outcome = await sup.orchestrator.cancel(caller, sid)
                assert outcome is CancelOutcome.ACKNOWLEDGED
                assert not sup.notify.projection.get(sid).pending
                session = await sup.orchestrator.session(caller, sid)
                assert session.state is SessionState.WAITING_FOR_INPUT
                turn = await _turn_row(sup, turn_id)
                assert (turn.state, turn.stop_reason) == ("cancelled", "cancelled")
                statuses = [m.content for m in await _messages(sup, caller, sid)
                            if m.kind == "status"]
                assert statuses == [CANCELLED_STATUS]
                assert (await ctl.status())["turn"] is None


async def test_a_cancel_pending_at_the_restart_is_gone_and_the_turn_cancellable_again(
    tmp_path: Path, agentctl: AgentctlFactory
) -> None:
    """``/slow`` ignores cancels until its end: the backend stops while the
    user's cancel is still unanswered (late); the next backend shows nothing
    pending, and a new cancel ends the turn as the user's.

    The turn runs 20 s: it must outlast the stop and the next backend's start
    and reads (a second or two here, many more on a loaded machine), or it
    ends by itself before the new cancel."""
    with trio.fail_after(90):
        async with agentctl("acp") as ctl:
            config = _config(tmp_path, ctl.url, "acp", cancel_join_s=0.3,
                             cancel_escalate_s=30, cancel_operation_s=30)
            async with open_supervisor(config) as sup, trio.open_nursery() as nursery:
                caller, sid, turn_id = await _start_turn(sup, "/slow 20000")

                async def cancel() -> None:
                    await sup.orchestrator.cancel(caller, sid)
                nursery.start_soon(cancel)
                with trio.fail_after(5):
                    while not sup.notify.projection.get(sid).pending:
                        await trio.sleep(0.01)
                await trio.sleep(0.5)  # late: the agent ignores it for now
                nursery.cancel_scope.cancel()
            async with open_supervisor(config) as sup:
                caller = await sup.caller()
                assert not sup.notify.projection.get(sid).pending
                session = await sup.orchestrator.session(caller, sid)
                assert (session.state, session.current_turn_id) == (SessionState.RUNNING,
                                                                     turn_id)
                outcome = await sup.orchestrator.cancel(caller, sid)
                assert outcome is CancelOutcome.LATE
                assert not sup.notify.projection.get(sid).pending
                # The agent honours it at the end of its 20 s.
                await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=40)
                turn = await _turn_row(sup, turn_id)
                assert (turn.state, turn.stop_reason) == ("cancelled", "cancelled")
                statuses = [m.content for m in await _messages(sup, caller, sid)
                            if m.kind == "status"]
                assert statuses == [CANCELLED_STATUS]


async def test_agentctl_gone_interrupts_the_turn_as_any_restart(
    tmp_path: Path, agentctl: AgentctlFactory
) -> None:
    with trio.fail_after(60):
        async with agentctl("acp") as ctl:
            config = _config(tmp_path, ctl.url, "acp", agentctl_connect_s=1,
                             agentctl_takeover_s=3)
            async with open_supervisor(config) as sup:
                caller, sid, turn_id = await _start_turn(sup, "/delay 20000")
            ctl.kill()
            await ctl.process.wait()
            async with open_supervisor(config) as sup:
                caller = await sup.caller()
                started = trio.current_time()
                await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=20)
                # Within the 1 s connect and 3 s take-over bounds set here, with room
                # for a loaded machine: the defaults (10 s, 15 s) would take longer.
                assert trio.current_time() - started < 10
                turn = await _turn_row(sup, turn_id)
                assert (turn.state, turn.stop_reason) == ("interrupted", "cancelled")
                statuses = [m for m in await _messages(sup, caller, sid) if m.kind == "status"]
                assert [(m.content, m.turn_id) for m in statuses] == [(RESTART_STATUS, turn_id)]
                assert not (await sup.store.queue_state(sid)).auto_run


async def test_a_turn_that_ended_while_no_backend_was_connected_ends_with_its_own_end(
    tmp_path: Path, agentctl: AgentctlFactory
) -> None:
    """The turn's end is an entry of agentctl's log like its chunks: a backend
    that comes back after it finds it among the replayed entries."""
    with trio.fail_after(60):
        async with agentctl("acp") as ctl:
            config = _config(tmp_path, ctl.url, "acp")
            async with open_supervisor(config) as sup:
                caller, sid, turn_id = await _start_turn(sup, "/delay 1200")
            with trio.fail_after(10):
                while (await ctl.status())["turn"] is not None:
                    await trio.sleep(0.05)
            async with open_supervisor(config) as sup:
                caller = await sup.caller()
                await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=20)
                turn = await _turn_row(sup, turn_id)
                assert (turn.state, turn.stop_reason) == ("completed", "end_turn")
                numbers = _chunk_numbers(await _text(sup, caller, sid, turn_id))
                assert numbers == list(range(len(numbers))) and len(numbers) >= 12
                assert not [m for m in await _messages(sup, caller, sid) if m.kind == "status"]


@PROTOCOLS
async def test_a_tool_card_started_before_the_restart_is_finished_after_it(
    tmp_path: Path, agentctl: AgentctlFactory, protocol: str
) -> None:
    with trio.fail_after(60):
        async with agentctl(protocol) as ctl:
            config = _config(tmp_path, ctl.url, protocol)
            async with open_supervisor(config) as sup:
                caller, sid = await new_session(sup, "remote")
                await sup.orchestrator.send_message(caller, sid, "/tool 2500")
                with trio.fail_after(10):
                    while not [m for m in await _messages(sup, caller, sid)
                               if m.kind == "tool_call"]:
                        await trio.sleep(0.02)
            async with open_supervisor(config) as sup:
                caller = await sup.caller()
                await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=20)
                messages = await _messages(sup, caller, sid)
                tools = [m for m in messages if m.kind == "tool_call"]
                assert len(tools) == 1 and tools[0].metadata["status"] == "completed"
                assert [m.content for m in messages if m.role == "agent" and m.kind == "text"] \
                    == ["tool finished"]


async def test_events_no_longer_kept_interrupt_the_turn_and_it_is_stopped_there(
    tmp_path: Path, agentctl: AgentctlFactory
) -> None:
    """agentctl keeps 8 entries here: the chunks of a longer absence are gone,
    so the turn is not taken over (it would miss text); it is interrupted as
    any restart interrupts it, and agentctl's turn is cancelled so the
    conversation takes the next prompt."""
    with trio.fail_after(60):
        async with agentctl("acp", "--replay-events", "8") as ctl:
            config = _config(tmp_path, ctl.url, "acp")
            async with open_supervisor(config) as sup:
                caller, sid, turn_id = await _start_turn(sup, "/delay 20000")
            await trio.sleep(1.5)  # 15 chunks: more than agentctl keeps
            async with open_supervisor(config) as sup:
                caller = await sup.caller()
                await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=20)
                turn = await _turn_row(sup, turn_id)
                assert (turn.state, turn.stop_reason) == ("interrupted", "cancelled")
                statuses = [m.content for m in await _messages(sup, caller, sid)
                            if m.kind == "status"]
                assert statuses == [RESTART_STATUS]
                assert (await ctl.status())["turn"] is None
                await sup.orchestrator.queue_set_auto_run(caller, sid, True)
                msg = await sup.orchestrator.send_message(caller, sid, "/recall")
                await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=20)
                assert msg.turn_id is not None
                assert await _text(sup, caller, sid, msg.turn_id) == "recall: /delay 20000"
