"""`turnvisor serve` as a real subprocess, stopped (SIGTERM) or killed
(SIGKILL) and started again on the same data dir: the session's next prompt
runs in a fresh agent that restored the conversation (DESIGN.md §10) —
``/recall`` lists the prompts sent before the restart."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import trio

from tests.support.leaks import kill_group
from tests.support.serverproc import server_process
from tests.support.sessions import subscribe_snapshot
from tests.support.ws import WsClient, is_turn_completed, ws_client

from .support import launch, new_task
from .test_serve_process import agent_groups


async def _turn(ws: WsClient, sid: str, prompt: str) -> str:
    """Send ``prompt`` and wait for its turn to complete; the agent's answer."""
    after = len(ws.notifications)
    msg = await ws.call("message.add", {"session_id": sid, "content": prompt})
    await ws.wait_for(is_turn_completed(sid), after=after, timeout=20)
    listed = await ws.call("message.list", {"session_id": sid})
    return "".join(m["content"] for m in listed["messages"]
                   if m["turn_id"] == msg["turn_id"] and m["role"] == "agent")


@pytest.mark.parametrize(("signum", "agent"), [
    (signal.SIGTERM, "mock"), (signal.SIGTERM, "mock-codex"),
    (signal.SIGKILL, "mock"), (signal.SIGKILL, "mock-codex")])
async def test_the_conversation_survives_a_server_restart(
    tmp_path: Path, signum: signal.Signals, agent: str
) -> None:
    data = tmp_path / "data"
    pgids: list[int] = []
    try:
        with trio.fail_after(60):
            async with server_process(data) as srv:
                async with ws_client(srv) as ws:
                    sid = await launch(ws, await new_task(ws), agent)
                    await subscribe_snapshot(ws, sid)
                    assert await _turn(ws, sid, "remember the tide") == "remember the tide"
                    assert await _turn(ws, sid, "and the moon") == "and the moon"
                pgids = [p for p, _ in await trio.to_thread.run_sync(
                    agent_groups, data / "turnvisor.db")]
                srv.proc.send_signal(signum)
                with trio.fail_after(10):
                    await srv.proc.wait()
            async with server_process(data) as srv, ws_client(srv) as ws:
                state = await subscribe_snapshot(ws, sid)
                # A SIGKILLed server's agents were swept at the start: none runs now.
                assert (state["new_state"], state["agent_live"]) == ("WAITING_FOR_INPUT", False)
                answer = await _turn(ws, sid, "/recall")
                assert answer == "recall: remember the tide | and the moon"
                listed = await ws.call("message.list", {"session_id": sid})
                assert not any(m["metadata"].get("resumed") is False
                               for m in listed["messages"])
                live = await ws.call("session.list", {"task_id": state["task_id"]})
                assert [s["agent_live"] for s in live["sessions"]] == [True]
    finally:
        for pgid in pgids:
            kill_group(pgid)
