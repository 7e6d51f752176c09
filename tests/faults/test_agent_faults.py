"""Agents misbehaving, as real processes, against a real server (issue 8, item 1).

Every case, in both dialects, ends the same way (``settled``): the session is
WAITING_FOR_INPUT, ``cancellation_pending`` is false on the wire and in the
projection, no cancel operation is left, a cancel is accepted (idle) and a
new prompt gets its answer; the fault rig then checks that the server stops
with no agent process, fd, child or Trio task left behind.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.models import CANCELLED_STATUS
from supervisor.profiles import BUILTIN_PROFILES, AgentProfile
from supervisor.session.lifecycle import CancelOutcome
from tests.support.leaks import group_members, rss_bytes
from tests.support.ws import WsClient, ws_client

from .support import AGENTS, Rig, fault_server, quiescent, session_dto, wait_frame, wait_turn_end

pytestmark = pytest.mark.parametrize("agent", AGENTS)
WEIRD_AGENT = Path(__file__).with_name("weird_agent.py")


async def open_session(rig: Rig, ws: WsClient, agent: str) -> tuple[str, str]:
    task = await ws.call("task.create", {"title": f"fault {agent}"})
    session = await ws.call("session.launch", {"task_id": task["id"], "agent": agent})
    assert session["state"] == "WAITING_FOR_INPUT", session
    await ws.call("session.subscribe", {"session_id": session["id"]})
    rig.pgid(session["id"])
    return task["id"], session["id"]


async def prompt(ws: WsClient, sid: str, text: str) -> int:
    """Send a prompt; returns the notification index it started at."""
    mark = len(ws.notifications)
    await ws.call("message.add", {"session_id": sid, "content": text})
    return mark


async def streaming(ws: WsClient, sid: str, mark: int) -> None:
    await wait_frame(ws, lambda f: f["action"] in ("session.message.added",
                                                   "session.message.updated")
                     and f["payload"]["session_id"] == sid
                     and f["payload"]["message"]["role"] == "agent", after=mark)


async def messages(ws: WsClient, sid: str) -> list[dict[str, Any]]:
    return (await ws.call("message.list", {"session_id": sid, "limit": 1000}))["messages"]


async def settled(rig: Rig, ws: WsClient, task_id: str, sid: str) -> None:
    """The end state every fault must leave: coherent, idle, cancellable, usable."""
    await quiescent(rig)
    dto = await session_dto(rig, ws, task_id, sid)
    assert dto["state"] == "WAITING_FOR_INPUT", dto
    assert dto["cancellation_pending"] is False, dto
    # Cancellable: an idle cancel is a harmless success ...
    reply = await ws.request("agent.cancel", {"session_id": sid})
    assert reply["type"] == "response" and reply["payload"]["success"] is True, reply
    # ... and usable: the next prompt is answered (by a fresh agent if it had to be).
    mark = await prompt(ws, sid, "still here")
    end = await wait_turn_end(ws, sid, after=mark)
    assert end["stop_reason"] == "end_turn", end
    texts = [m["content"] for m in await messages(ws, sid) if m["role"] == "agent"]
    assert texts[-1] == "still here", texts[-3:]
    rig.record()
    await quiescent(rig)


def statuses(msgs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(m["content"], m["metadata"]) for m in msgs if m["kind"] == "status"]


async def test_agent_crashes_mid_turn(tmp_path: Path, agent: str) -> None:
    with trio.fail_after(60):
        async with fault_server(tmp_path) as rig, ws_client(rig.srv) as ws:
            rig.watch(ws)
            task_id, sid = await open_session(rig, ws, agent)
            pgid = rig.pgid(sid)
            mark = await prompt(ws, sid, "/crash")
            end = await wait_turn_end(ws, sid, after=mark)
            assert end["stop_reason"] == "error", end
            assert statuses(await messages(ws, sid)) == [
                ("Agent error: agent exited (status 1)", {"variant": "error"})]
            with trio.fail_after(5):
                while group_members([pgid]):
                    await trio.sleep(0.05)
            await settled(rig, ws, task_id, sid)
            assert rig.pgid(sid) != pgid


async def test_agent_crashes_mid_cancel(tmp_path: Path, agent: str) -> None:
    """The agent dies while a cancel it ignores is pending: the cancel settles,
    the turn is closed once, pending clears."""
    with trio.fail_after(60):
        async with fault_server(tmp_path, timeouts={"cancel_escalate_s": 10.0}) as rig, \
                ws_client(rig.srv) as ws:
            rig.watch(ws)
            task_id, sid = await open_session(rig, ws, agent)
            pgid = rig.pgid(sid)
            mark = await prompt(ws, sid, "/slow 20000")
            await streaming(ws, sid, mark)
            async with trio.open_nursery() as nursery:
                replies: list[dict[str, Any]] = []

                async def cancel() -> None:
                    replies.append(await ws.request("agent.cancel", {"session_id": sid}))

                nursery.start_soon(cancel)
                await wait_frame(ws, lambda f: f["action"] == "session.cancellation_changed"
                                 and f["payload"]["cancellation_pending"] is True, after=mark)
                await trio.sleep(0.6)  # past the join window: the agent ignored it
                os.killpg(pgid, signal.SIGKILL)
            (reply,) = replies
            assert reply["type"] == "response" and reply["payload"]["success"], reply
            assert rig.srv.sup.orchestrator.settled[-1].outcome in (
                CancelOutcome.ACKNOWLEDGED, CancelOutcome.LATE, CancelOutcome.NO_EXECUTION)
            end = await wait_turn_end(ws, sid, after=mark)
            assert end["stop_reason"] in ("error", "cancelled"), end
            # Exactly one status message closes the turn.
            assert len(statuses(await messages(ws, sid))) == 1
            await settled(rig, ws, task_id, sid)


async def test_agent_hangs_and_ignores_cancel(tmp_path: Path, agent: str) -> None:
    """`/hang`: never answers, ignores cancel.  The cancel escalates within
    ``cancel_escalate_s``; the turn gets one cancelled status."""
    with trio.fail_after(60):
        async with fault_server(tmp_path) as rig, ws_client(rig.srv) as ws:
            rig.watch(ws)
            task_id, sid = await open_session(rig, ws, agent)
            mark = await prompt(ws, sid, "/hang")
            await trio.sleep(0.2)
            start = trio.current_time()
            reply = await ws.request("agent.cancel", {"session_id": sid})
            took = trio.current_time() - start
            assert reply["type"] == "response", reply
            assert rig.srv.sup.orchestrator.settled[-1].outcome is CancelOutcome.ESCALATED
            assert 1.5 < took < 10, took
            end = await wait_turn_end(ws, sid, after=mark)
            assert end["stop_reason"] == "cancelled"
            # The agent had to be stopped: the status says so (DESIGN §9).
            assert statuses(await messages(ws, sid)) == [
                (CANCELLED_STATUS, {"cancelled": True, "variant": "warning", "escalated": True})]
            hung = rig.pgid(sid)
            await quiescent(rig)
            # The agent still holds its hung turn: the next prompt replaces it.
            await settled(rig, ws, task_id, sid)
            assert rig.pgid(sid) != hung


async def test_agent_answers_cancel_late(tmp_path: Path, agent: str) -> None:
    """`/slow`: ignores cancel until its stream ends (after the join window,
    before escalation): outcome LATE, one status, pending clears."""
    with trio.fail_after(60):
        async with fault_server(tmp_path, timeouts={"cancel_escalate_s": 6.0}) as rig, \
                ws_client(rig.srv) as ws:
            rig.watch(ws)
            task_id, sid = await open_session(rig, ws, agent)
            mark = await prompt(ws, sid, "/slow 2500")
            await streaming(ws, sid, mark)
            reply = await ws.request("agent.cancel", {"session_id": sid})
            assert reply["type"] == "response", reply
            assert rig.srv.sup.orchestrator.settled[-1].outcome is CancelOutcome.LATE
            await wait_turn_end(ws, sid, after=mark)
            assert len(statuses(await messages(ws, sid))) == 1
            await settled(rig, ws, task_id, sid)


async def test_agent_closes_stdout_but_keeps_running(tmp_path: Path, agent: str) -> None:
    # Unsandboxed: bwrap's own processes hold the agent's stdout too, so a
    # sandboxed agent's stdout ends only when the agent does (README, sandbox).
    profiles = {**BUILTIN_PROFILES, agent: replace(BUILTIN_PROFILES[agent], sandbox="none")}
    with trio.fail_after(60):
        async with fault_server(tmp_path, profiles=profiles) as rig, ws_client(rig.srv) as ws:
            rig.watch(ws)
            task_id, sid = await open_session(rig, ws, agent)
            pgid = rig.pgid(sid)
            mark = await prompt(ws, sid, "/closeout")
            end = await wait_turn_end(ws, sid, after=mark)
            assert end["stop_reason"] == "error", end
            # The still-running process was torn down with its group.
            with trio.fail_after(5):
                while group_members([pgid]):
                    await trio.sleep(0.05)
            assert sid not in rig.srv.sup.lifecycle.executions
            await settled(rig, ws, task_id, sid)


# -- output faults: the agent writes something bad, then answers normally ------

OUTPUT_FAULTS = ["/stderr 20480", "/bigline 20", "/partial", "/badutf8", "/wrongshape",
                 "/garbage"]


async def test_agent_output_faults(tmp_path: Path, agent: str) -> None:
    """On one session, one after the other: 20 MiB of stderr, a 20 MiB line, a
    line in pieces, invalid UTF-8, JSON of the wrong shape plus a reply to an
    unknown id, a non-JSON line.  Each turn still ends with the echo, the same
    agent process serves them all, and the server's memory stays bounded."""
    with trio.fail_after(120):
        async with fault_server(tmp_path) as rig, ws_client(rig.srv) as ws:
            rig.watch(ws)
            task_id, sid = await open_session(rig, ws, agent)
            pgid = rig.pgid(sid)
            rss_before = rss_bytes()
            peak = rss_before
            for text in OUTPUT_FAULTS:
                mark = await prompt(ws, sid, text)
                with trio.fail_after(60):
                    while True:
                        peak = max(peak, rss_bytes())
                        done = [f for f in ws.notifications[mark:]
                                if f["action"] == "session.turn.completed"]
                        if done:
                            break
                        await trio.sleep(0.02)
                assert done[0]["payload"]["stop_reason"] == "end_turn", (text, done)
                agent_texts = [m["content"] for m in await messages(ws, sid)
                               if m["role"] == "agent"]
                assert agent_texts[-1].endswith(text), (text, agent_texts[-1][:80])
                assert rig.pgid(sid) == pgid, f"{text} restarted the agent"
                await quiescent(rig)
            # A 20 MiB line is dropped by the line decoder (limit 8 MiB), not held.
            assert peak - rss_before < 120 * 1024 * 1024, (rss_before, peak)
            await settled(rig, ws, task_id, sid)


# -- faults the mock agent does not have: tests/faults/weird_agent.py ---------------

WEIRD = {
    "weird": AgentProfile(name="weird", protocol="acp",
                          command=(sys.executable, str(WEIRD_AGENT), "--protocol", "acp")),
    "weird-codex": AgentProfile(name="weird-codex", protocol="codex",
                                command=(sys.executable, str(WEIRD_AGENT), "--protocol",
                                         "codex")),
}


async def test_agent_writes_lone_surrogates_late_replies_and_floods(tmp_path: Path,
                                                                    agent: str) -> None:
    """Text with lone surrogates (an emoji cut in two by a JavaScript agent),
    answers after the end of the turn and to ids never used, 400 tool calls
    in a burst: every turn ends normally, the text is stored (the pair
    rejoined, lone halves as U+FFFD) and the same agent answers throughout."""
    weird = "weird" if agent == "mock" else "weird-codex"
    with trio.fail_after(90):
        async with fault_server(tmp_path, profiles={**BUILTIN_PROFILES, **WEIRD}) as rig, \
                ws_client(rig.srv) as ws:
            rig.watch(ws)
            task_id, sid = await open_session(rig, ws, weird)
            pgid = rig.pgid(sid)
            for text in ("/surrogates", "/late", "/flood 400", "/surrogates"):
                mark = await prompt(ws, sid, text)
                end = await wait_turn_end(ws, sid, after=mark, timeout=60)
                assert end["stop_reason"] == "end_turn", (text, end)
                await quiescent(rig)
                assert rig.pgid(sid) == pgid, f"{text} cost the agent its life"
            msgs = await messages(ws, sid)
            texts = [m["content"] for m in msgs if m["role"] == "agent" and m["kind"] == "text"]
            assert "split \U0001F600 lone \ufffd end " in texts, texts[:3]
            tools = [m for m in msgs if m["kind"] == "tool_call"]
            assert "tool \ufffd title" in {m["content"] for m in tools}
            assert len(tools) >= 402
            await settled(rig, ws, task_id, sid)
