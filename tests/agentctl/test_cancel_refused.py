"""agentctl's ``CancelFailed`` reaches the cancel operation (issue 44, DESIGN.md §20).

A real ``turnvisor serve`` (a subprocess) with an agentctl profile, a real
agentctl and its mock agent running a turn.  The agent then stops reading its
stdin with the pipe full (stopped by SIGSTOP, the pipe filled with blank lines
through ``/proc/PID/fd/0``, as a hung agent leaves unread input): agentctl
cannot write the cancel within its write bound and answers the backend's
``Cancel`` frame with ``CancelFailed``.  The person's ``agent.cancel`` is
then answered with an error, as a cancel whose HTTP write failed is, and
pending is released — not left waiting for escalation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from agentctl_support import AgentctlFactory, agent_streaming, fill_stdin, remote_toml, stopped

from tests.support.serverproc import server_process
from tests.support.ws import WsClient, ws_client
from tests.web.support import launch, new_task


def _toml(url: str) -> str:
    # Escalation well past agentctl's write bound (10 s): a cancel that waited
    # on for it, as one did before agentctl's answer reached the operation,
    # would be answered as an escalated stop, not as an error.
    return remote_toml(url, timeouts="cancel_escalate_s = 90\ncancel_operation_s = 120\n")


async def _session(ws: WsClient, task_id: str) -> dict[str, Any]:
    listed = await ws.call("session.list", {"task_id": task_id})
    session: dict[str, Any] = listed["sessions"][0]
    return session


async def test_a_cancel_agentctl_could_not_write_fails_the_operation(
        tmp_path: Path, agentctl: AgentctlFactory) -> None:
    with trio.fail_after(120):
        async with agentctl("acp") as ctl, \
                server_process(tmp_path / "data", toml=_toml(ctl.url)) as srv, \
                ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, "remote")
            await ws.call("session.subscribe", {"session_id": sid})
            pid = (await ctl.status())["agent"]["pid"]
            msg = await ws.call("message.add", {"session_id": sid,
                                                "content": "/delay 60000"})
            await agent_streaming(ws, sid, msg["turn_id"])
            # The prompt's answer reaches the backend (then its cancel goes as a
            # frame; before it, over HTTP, whose failure fails the same way).
            await trio.sleep(1.0)
            with stopped(pid):
                assert fill_stdin(pid) > 0
                cancel = await ws.send("agent.cancel", {"session_id": sid})
                answer = await cancel.wait(60)
                assert answer["type"] == "error", answer
                assert "did not read its stdin" in answer["payload"]["message"], answer
                # Pending released with the answer, while the turn still runs.
                session = await _session(ws, task_id)
                assert session["cancellation_pending"] is False, session
                assert session["state"] == "RUNNING", session
                assert (await ctl.status())["turn"]["id"] == msg["turn_id"]
