"""``/steps`` and ``/stray`` in the mock agent as a real process, through the adapters,
in each dialect (ACP 1, ACP 2, Codex: the ``agent`` fixture), and ``/stray`` inside the
bubblewrap sandbox: the stray is a real process in the agent's process group that
outlives the turn and goes with the group."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
import trio

from protocols.adapters import AcpAdapter, CodexAdapter
from protocols.events import (
    MessageChunk,
    PermissionRequested,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
)
from protocols.mock_agent import STATE_DIR_ENV
from protocols.process import start_agent_process, terminate_group
from protocols.sandbox import SandboxMode, bwrap_works, wrap

from .conftest import TEST_TIMEOUTS
from .helpers import MOCK_AGENT, REPO_ROOT, RunningAgent
from .test_adapters_mock import PROMPT_CANCEL_S, TEST_S, Events, PromptTask

STRAY_CMDLINE = b"sleep\x00600\x00"
needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot run here")


def _state(pid: int) -> str | None:
    """The process's state letter (``Z``: a zombie), or None if there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _stray_pid(text: str) -> int:
    match = re.fullmatch(r"stray pid (\d+)", text)
    assert match is not None, text
    return int(match.group(1))


async def test_steps_run_one_after_another(agent: RunningAgent) -> None:
    events = Events(agent.adapter.events)
    with trio.fail_after(TEST_S):
        ended = await agent.adapter.prompt("/steps 3 100")
        await events.until(TurnEnded)
    assert ended.stop_reason == "end_turn"
    started = events.of(ToolCallStarted)
    assert [(s.title, s.status, s.kind) for s in started] == [
        (f"step {i} of 3: sleep 0.1", "in_progress", "execute") for i in (1, 2, 3)]
    done = [u for u in events.of(ToolCallUpdated) if u.status == "completed"]
    assert [u.tool_call_id for u in done] == [s.tool_call_id for s in started]
    # Each step ends before the next one starts, with its text in between.
    order: list[tuple[str, str]] = []
    for e in events.seen:
        if isinstance(e, ToolCallStarted):
            order.append(("start", e.tool_call_id))
        elif isinstance(e, ToolCallUpdated) and e.status == "completed":
            order.append(("done", e.tool_call_id))
        elif isinstance(e, MessageChunk):
            order.append(("text", ""))
    a, b, c = (s.tool_call_id for s in started)
    assert order == [("start", a), ("done", a), ("text", ""), ("start", b), ("done", b),
                     ("text", ""), ("start", c), ("done", c), ("text", "")]
    assert events.text() == "step 1 of 3 done. step 2 of 3 done. step 3 of 3 done. "


async def test_a_cancel_mid_step_ends_the_turn_and_the_step_cancelled(
        agent: RunningAgent) -> None:
    adapter = agent.adapter
    events = Events(adapter.events)
    task = PromptTask()
    with trio.fail_after(TEST_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task.run, adapter, "/steps 3 5000")
            started = await events.until(ToolCallStarted)
            cancel_at = trio.current_time()
            await adapter.cancel()
            await events.until(TurnEnded)
    assert task.result is not None and task.ended_at is not None
    assert task.result.stop_reason == "cancelled"
    assert task.ended_at - cancel_at < PROMPT_CANCEL_S
    assert events.of(ToolCallUpdated) == [
        ToolCallUpdated(tool_call_id=started.tool_call_id, status="cancelled")]
    assert len(events.of(ToolCallStarted)) == 1


async def test_a_cancel_as_a_step_completes_stops_before_the_next_step(
        agent: RunningAgent) -> None:
    adapter = agent.adapter
    events = Events(adapter.events)
    task = PromptTask()
    with trio.fail_after(TEST_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task.run, adapter, "/steps 3 300")
            while not any(u.status == "completed" for u in events.of(ToolCallUpdated)):
                await events.until(ToolCallUpdated)
            await adapter.cancel()  # within the agent's think before step 2
            await events.until(TurnEnded)
    assert task.result is not None and task.result.stop_reason == "cancelled"
    [first] = events.of(ToolCallStarted)
    assert first.title == "step 1 of 3: sleep 0.3"


async def test_a_permission_arrives_while_the_first_step_runs(agent: RunningAgent) -> None:
    adapter = agent.adapter
    events = Events(adapter.events)
    task = PromptTask()
    allow = "allow" if isinstance(adapter, AcpAdapter) else "accept"
    with trio.fail_after(TEST_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task.run, adapter, "/steps 2 400 permission")
            request = await events.until(PermissionRequested)
            # Step 1 is still running: started, not completed.
            assert [u.status for u in events.of(ToolCallUpdated)] in ([], ["in_progress"])
            await adapter.respond_permission(request.request_id, allow)
            await events.until(TurnEnded)
    assert task.result is not None and task.result.stop_reason == "end_turn"
    assert len(events.of(ToolCallStarted)) == 2


async def test_a_stray_outlives_the_turn_in_the_agents_group(agent: RunningAgent) -> None:
    events = Events(agent.adapter.events)
    with trio.fail_after(TEST_S):
        ended = await agent.adapter.prompt("/stray")
        await events.until(TurnEnded)
    assert ended.stop_reason == "end_turn"
    [started] = events.of(ToolCallStarted)
    assert started.title == "stray: sleep 600"
    assert events.of(ToolCallUpdated)[-1].status == "completed"
    pid = _stray_pid(events.text())
    assert _cmdline(pid) == STRAY_CMDLINE
    # In the agent's group (the agent leads it), not a session or group of its own.
    assert os.getpgid(pid) == agent.proc.pid
    assert os.getsid(pid) == os.getsid(agent.proc.pid)
    await trio.sleep(0.3)
    assert _alive(pid)
    # The agent goes on; the stray is still there after its next turn.
    with trio.fail_after(TEST_S):
        assert (await agent.adapter.prompt("still here")).stop_reason == "end_turn"
    assert _alive(pid)
    # Killed while the agent lives (as session.kill_strays does), it is not left a
    # zombie in the group: the agent collects its ended child.  (The fixture's own
    # check, that nothing of the group is left, would otherwise race the system's
    # init reaping an orphan: the group's end is test_a_stray_dies_with_the_group.)
    os.kill(pid, signal.SIGKILL)
    with trio.fail_after(TEST_S):
        while _state(pid) is not None:
            await trio.sleep(0.02)


def _alive(pid: int) -> bool:
    return _state(pid) not in (None, "Z", "X")


def _in_group(pgid: int) -> dict[int, bytes]:
    """Host pids of the live processes in group ``pgid``, with their command lines."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            pid = int(entry)
            try:
                if os.getpgid(pid) == pgid and _alive(pid):
                    out[pid] = _cmdline(pid)
            except ProcessLookupError:
                pass
    return out


def _ns_pid(host_pid: int) -> int:
    """The pid the process has in its innermost pid namespace (last of ``NSpid``)."""
    with open(f"/proc/{host_pid}/status") as f:
        line = next(x for x in f if x.startswith("NSpid:"))
    return int(line.split()[-1])


@pytest.mark.parametrize(("sandbox", "protocol"), [
    ("none", "acp"),
    pytest.param("bwrap", "acp", marks=needs_bwrap),
    pytest.param("bwrap", "codex", marks=needs_bwrap),
])
async def test_a_stray_dies_with_the_group(tmp_path: Path, sandbox: SandboxMode,
                                           protocol: str) -> None:
    """The host's view, as the backend has it: the stray is a live process of the group
    the backend started (in the sandbox too, whose pid namespace the agent's text
    speaks of), after the turn; the group's teardown takes it."""
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HOME": str(tmp_path / "home"),
           STATE_DIR_ENV: str(tmp_path / "home" / "mock-state")}
    with trio.fail_after(30):
        with wrap([*MOCK_AGENT, "--protocol", protocol], sandbox, cwd=str(work), env=env,
                  hide=[]) as launch:
            proc = await start_agent_process(launch.argv, env=env, cwd=str(work),
                                             pass_fds=launch.pass_fds)
            lifeline = launch.take_lifeline()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            cls = AcpAdapter if protocol == "acp" else CodexAdapter
            adapter = cls(proc.stdin, proc.stdout, timeouts=TEST_TIMEOUTS)
            events = Events(adapter.events)
            async with trio.open_nursery() as nursery:
                await nursery.start(adapter.connection.run)
                await adapter.initialize()
                await adapter.new_session(str(work))
                ended = await adapter.prompt("/stray")
                await events.until(TurnEnded)
                nursery.cancel_scope.cancel()
            assert ended.stop_reason == "end_turn"
            said = _stray_pid(events.text())
            strays = [p for p, cmd in _in_group(proc.pid).items() if cmd == STRAY_CMDLINE]
            assert len(strays) == 1
            [stray] = strays
            # Outside a sandbox the pid said is the host's; inside, the namespace's.
            assert _ns_pid(stray) == said
            assert (stray == said) == (sandbox == "none")
            await trio.sleep(0.3)
            assert _alive(stray)
        finally:
            await terminate_group(proc, grace_s=1.0)
            if lifeline is not None:
                os.close(lifeline)
        # Gone with the group (an orphan's zombie may wait an instant for init).
        while _alive(stray) or _in_group(proc.pid):
            await trio.sleep(0.02)
