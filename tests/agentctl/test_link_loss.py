"""A stop that survives a lost link (DESIGN.md §20), through a real server.

``turnvisor serve`` runs as a subprocess with an agentctl profile whose URL is
a TCP proxy this test controls (tests/support/cut_proxy.py): the link to agentctl is cut and
restored while agentctl and its agent run on untouched.  A cancel pressed
during the cut is accepted and pending with phase ``link_down``, the session
says ``reachable: false``, and once the link returns the cancel is sent first,
the agent's turn ends cancelled and the receipt says how late it went out.
"""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio
from agentctl_support import AgentctlFactory, agent_streaming, remote_toml

from tests.support.cut_proxy import CutProxy, cut_proxy
from tests.support.serverproc import server_process
from tests.support.ws import WsClient, ws_client
from tests.web.support import launch, new_task


def _toml(url: str, *, link_down_cancel_s: float = 900, protocol: str = "acp") -> str:
    return remote_toml(url, protocol, timeouts=f"link_down_cancel_s = {link_down_cancel_s}\n")


async def _session(ws: WsClient, task_id: str) -> dict[str, Any]:
    listed = await ws.call("session.list", {"task_id": task_id})
    session: dict[str, Any] = listed["sessions"][0]
    return session


async def _until(ws: WsClient, task_id: str, what: str, pred: Any,
                 within: float = 30) -> dict[str, Any]:
    with trio.fail_after(within):
        while True:
            session = await _session(ws, task_id)
            if pred(session):
                return session
            await trio.sleep(0.05)


async def _running_turn(ws: WsClient, task_id: str) -> tuple[str, str]:
    sid = await launch(ws, task_id, "remote")
    await ws.call("session.subscribe", {"session_id": sid})
    msg = await ws.call("message.add", {"session_id": sid, "content": "/delay 60000"})
    await agent_streaming(ws, sid, msg["turn_id"])
    return sid, str(msg["turn_id"])


def _handover_row(db: Path, turn_id: str) -> tuple[Any, Any]:
    """(seq, cancel_held_at) of the turn's handover row, read-only ((None, None): none)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT seq, cancel_held_at FROM turn_handovers WHERE turn_id = ?",
                           (turn_id,)).fetchone()
    finally:
        conn.close()
    return (None, None) if row is None else (row[0], row[1])


async def _until_row(data: Path, turn_id: str, pred: Any) -> None:
    with trio.fail_after(30):
        while not pred(await trio.to_thread.run_sync(_handover_row, data / "turnvisor.db",
                                                       turn_id)):
            await trio.sleep(0.1)


async def _cut(proxy: CutProxy, ws: WsClient, task_id: str) -> None:
    proxy.cut()
    await _until(ws, task_id, "unreachable", lambda s: s["reachable"] is False)


@pytest.mark.parametrize("protocol", ["acp", "codex"])
async def test_a_cancel_during_a_cut_is_held_and_sent_first_on_return(
    tmp_path: Path, agentctl: AgentctlFactory, protocol: str
) -> None:
    with trio.fail_after(120):
        async with agentctl(protocol) as ctl, cut_proxy(ctl.url) as proxy, \
                server_process(tmp_path / "data", toml=_toml(proxy.url, protocol=protocol)) \
                as srv, \
                ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid, turn_id = await _running_turn(ws, task_id)
            assert (await _session(ws, task_id))["reachable"] is True
            await _cut(proxy, ws, task_id)
            down = await _session(ws, task_id)
            # Not shown as simply running: the host does not answer.
            assert down["state"] == "RUNNING" and down["reachable"] is False
            cancel = await ws.send("agent.cancel", {"session_id": sid})
            held = await _until(ws, task_id, "link_down", lambda s: (
                s["cancellation_pending"] and (s["cancel_progress"] or {}).get("phase")
                == "link_down"))
            assert held["cancel_progress"]["turn_id"] == turn_id
            await trio.sleep(1.5)  # the cut lasts: nothing escalates, nothing settles
            assert not cancel.done.is_set()
            assert (await ctl.status())["turn"]["id"] == turn_id  # it runs on, unreached
            assert (await _session(ws, task_id))["cancellation_pending"] is True
            proxy.restore()
            frame = await cancel.wait(30)
            assert frame["type"] == "response", frame
            answer = frame["payload"]
            assert answer["outcome"] == "cancelled", answer
            receipt = answer["receipt"]
            assert receipt["link_down_ms"] is not None and receipt["link_down_ms"] >= 1500
            after = await _until(ws, task_id, "settled", lambda s: (
                not s["cancellation_pending"] and s["state"] == "WAITING_FOR_INPUT"))
            assert after["reachable"] is True and after["cancel_progress"] is None
            status = await ctl.status()
            assert not (status.get("turn") or {}).get("id"), status
            listed = await ws.call("message.list", {"session_id": sid})
            states = [m["content"] for m in listed["messages"] if m["kind"] == "status"]
            assert any("cancelled" in s.lower() for s in states), states
            progress = [p["phase"] for p in ws.of("session.cancel.progress", sid)]
            assert progress[0] == "link_down" and "sent" in progress, progress


async def test_a_held_cancel_past_its_bound_clears_pending_and_still_goes_out(
    tmp_path: Path, agentctl: AgentctlFactory
) -> None:
    with trio.fail_after(120):
        async with agentctl("acp") as ctl, cut_proxy(ctl.url) as proxy, \
                server_process(tmp_path / "data",
                               toml=_toml(proxy.url, link_down_cancel_s=1)) as srv, \
                ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid, turn_id = await _running_turn(ws, task_id)
            await _cut(proxy, ws, task_id)
            frame = await ws.request("agent.cancel", {"session_id": sid}, timeout=30)
            # Every exit path clears pending: past its bound the answer is an error ...
            assert frame["type"] == "error", frame
            assert "has not answered" in frame["payload"]["message"], frame
            settled = await _until(ws, task_id, "not pending",
                                   lambda s: not s["cancellation_pending"])
            assert settled["state"] == "RUNNING" and settled["reachable"] is False
            assert (await ctl.status())["turn"]["id"] == turn_id
            # ... and the stop stays held: it goes out first when the link returns.
            proxy.restore()
            await _until(ws, task_id, "cancelled", lambda s: s["state"] == "WAITING_FOR_INPUT")
            status = await ctl.status()
            assert not (status.get("turn") or {}).get("id"), status


async def test_delete_during_a_cut_is_bounded(tmp_path: Path, agentctl: AgentctlFactory) -> None:
    with trio.fail_after(120):
        async with agentctl("acp") as ctl, cut_proxy(ctl.url) as proxy, \
                server_process(tmp_path / "data", toml=_toml(proxy.url)) as srv, \
                ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid, _turn_id = await _running_turn(ws, task_id)
            await _cut(proxy, ws, task_id)
            with trio.fail_after(20):
                await ws.call("session.delete", {"session_id": sid})
            listed = await ws.call("session.list", {"task_id": task_id})
            assert all(s["id"] != sid for s in listed["sessions"])
            assert ctl.process.returncode is None  # agentctl itself is not ours to stop


async def test_agentctl_cancels_by_itself_when_offline_and_says_so_on_return(
    tmp_path: Path, agentctl: AgentctlFactory
) -> None:
    with trio.fail_after(120):
        async with agentctl("acp", "--offline-cancel-s", "1") as ctl, \
                cut_proxy(ctl.url) as proxy, \
                server_process(tmp_path / "data", toml=_toml(proxy.url)) as srv, \
                ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid, turn_id = await _running_turn(ws, task_id)
            await trio.sleep(1.5)  # connected: nothing is cancelled however long it runs
            assert (await ctl.status())["turn"]["id"] == turn_id
            cut_at = trio.current_time()
            await _cut(proxy, ws, task_id)
            with trio.fail_after(20):
                while ((await ctl.status()).get("turn") or {}).get("id"):
                    await trio.sleep(0.1)
            assert trio.current_time() - cut_at >= 1.0  # not before offline_cancel_s
            assert (await _session(ws, task_id))["state"] == "RUNNING"  # unreached yet
            proxy.restore()
            await _until(ws, task_id, "ended", lambda s: (
                s["state"] == "WAITING_FOR_INPUT" and not s["cancellation_pending"]))
            receipt = await ws.call("turn.receipt", {"session_id": sid, "turn_id": turn_id})
            receipt = receipt.get("receipt", receipt)
            assert receipt["by"] == "offline" and receipt["outcome"] == "cancelled", receipt
            listed = await ws.call("message.list", {"session_id": sid})
            states = [m for m in listed["messages"] if m["kind"] == "status"]
            assert states and states[-1]["metadata"].get("cancelled"), states


async def test_a_held_cancel_survives_a_backend_killed_during_the_cut(
    tmp_path: Path, agentctl: AgentctlFactory
) -> None:
    data = tmp_path / "data"
    with trio.fail_after(150):
        async with agentctl("acp") as ctl, cut_proxy(ctl.url) as proxy:
            toml = _toml(proxy.url)
            async with server_process(data, toml=toml) as srv:
                async with ws_client(srv) as ws:
                    task_id = await new_task(ws)
                    sid, turn_id = await _running_turn(ws, task_id)
                    # A stream position is recorded for the next backend ...
                    await _until_row(data, turn_id, lambda row: row[0] is not None)
                    await _cut(proxy, ws, task_id)
                    await ws.send("agent.cancel", {"session_id": sid})
                    await _until(ws, task_id, "held", lambda s: (
                        (s["cancel_progress"] or {}).get("phase") == "link_down"))
                    # ... and the held cancel beside it, before the backend is killed.
                    await _until_row(data, turn_id, lambda row: row[1] is not None)
                srv.proc.send_signal(signal.SIGKILL)
                with trio.fail_after(15):
                    await srv.proc.wait()
            assert (await ctl.status())["turn"]["id"] == turn_id  # it runs on, unreached
            async with server_process(data, toml=toml) as srv, ws_client(srv) as ws:
                # The new backend has the held cancel: pending at once, still held.
                held = await _until(ws, task_id, "held again", lambda s: (
                    s["cancellation_pending"]
                    and (s["cancel_progress"] or {}).get("phase") == "link_down"))
                assert held["state"] == "RUNNING" and held["reachable"] is False
                assert held["cancel_progress"]["turn_id"] == turn_id
                await trio.sleep(1.5)
                assert (await ctl.status())["turn"]["id"] == turn_id
                assert (await _session(ws, task_id))["cancellation_pending"] is True
                proxy.restore()
                after = await _until(ws, task_id, "cancelled", lambda s: (
                    s["state"] == "WAITING_FOR_INPUT" and not s["cancellation_pending"]))
                assert after["reachable"] is True
                status = await ctl.status()
                assert not (status.get("turn") or {}).get("id"), status
                receipt = await ws.call("turn.receipt", {"session_id": sid, "turn_id": turn_id})
                receipt = receipt.get("receipt", receipt)
                assert receipt["outcome"] == "cancelled", receipt
                assert receipt["link_down_ms"] is not None and receipt["link_down_ms"] >= 2000
                listed = await ws.call("message.list", {"session_id": sid})
                states = [m for m in listed["messages"] if m["kind"] == "status"]
                assert states and states[-1]["metadata"].get("cancelled"), states


async def test_a_turn_that_ended_during_the_cut_is_reconciled_on_return(
    tmp_path: Path, agentctl: AgentctlFactory
) -> None:
    with trio.fail_after(120):
        async with agentctl("acp") as ctl, cut_proxy(ctl.url) as proxy, \
                server_process(tmp_path / "data", toml=_toml(proxy.url)) as srv, \
                ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, "remote")
            msg = await ws.call("message.add", {"session_id": sid, "content": "/delay 3000"})
            turn_id = msg["turn_id"]
            await agent_streaming(ws, sid, turn_id)
            await _cut(proxy, ws, task_id)
            cancel = await ws.send("agent.cancel", {"session_id": sid})
            await _until(ws, task_id, "held", lambda s: (
                (s["cancel_progress"] or {}).get("phase") == "link_down"))
            with trio.fail_after(20):  # the agent ends the turn on its own, unreached
                while ((await ctl.status()).get("turn") or {}).get("id"):
                    await trio.sleep(0.1)
            proxy.restore()
            frame = await cancel.wait(30)
            assert frame["type"] == "response", frame
            # Its end came with the replay: the turn is closed, nothing stays pending.
            after = await _until(ws, task_id, "settled", lambda s: (
                s["state"] == "WAITING_FOR_INPUT" and not s["cancellation_pending"]))
            assert after["reachable"] is True and after["current_turn_id"] is None
            listed = await ws.call("message.list", {"session_id": sid})
            text = "".join(m["content"] for m in listed["messages"]
                           if m["turn_id"] == turn_id and m["kind"] == "text"
                           and m["role"] == "agent")
            assert "chunk" in text  # what it streamed during the cut is in the transcript


async def test_a_host_silent_after_the_cancel_went_out_is_waited_for_not_escalated(
    tmp_path: Path, agentctl: AgentctlFactory
) -> None:
    toml = ("[timeouts]\ncancel_join_s = 1\ncancel_escalate_s = 3\n"
            + _toml("URL").split("\n", 2)[2])
    with trio.fail_after(120):
        async with agentctl("acp") as ctl, cut_proxy(ctl.url) as proxy, \
                server_process(tmp_path / "data", toml=toml.replace("URL", proxy.url)) as srv, \
                ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, "remote")
            await ws.call("session.subscribe", {"session_id": sid})
            # /slow: the agent ignores the cancel, so only escalation could end the turn.
            msg = await ws.call("message.add", {"session_id": sid, "content": "/slow 60000"})
            turn_id = msg["turn_id"]
            await agent_streaming(ws, sid, turn_id)
            cancel = await ws.send("agent.cancel", {"session_id": sid})

            def phases() -> list[str]:
                return [p["phase"] for p in ws.of("session.cancel.progress", sid)]

            with trio.fail_after(10):
                while "sent" not in phases():
                    await ws.changed()
            await _cut(proxy, ws, task_id)
            with trio.fail_after(20):
                while "link_down" not in phases():
                    await ws.changed()
            await trio.sleep(4)  # past cancel_escalate_s: still not escalated, unreached
            assert "escalated" not in phases() and not cancel.done.is_set(), phases()
            assert (await ctl.status())["turn"]["id"] == turn_id
            proxy.restore()
            frame = await cancel.wait(30)
            assert frame["type"] == "response", frame
            # Reached again, the cancel went out again and its bounds ran from there.
            assert frame["payload"]["outcome"] == "escalated", frame
            seen = phases()
            assert seen.index("link_down") < len(seen) - 1 - seen[::-1].index("sent"), seen
            assert seen[-1] == "escalated", seen
