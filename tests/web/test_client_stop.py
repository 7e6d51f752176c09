"""DESIGN.md §18 from a terminal: ``turnvisor run``'s Ctrl-C in steps (after the
running step, then now), ``turnvisor stop SESSION --after-step`` and ``turnvisor
stop --all`` — the real command in a subprocess against a real server running
the mock agent, real SIGINTs."""

from __future__ import annotations

import json
import signal
from typing import Any

import trio

from tests.support.server import Server
from tests.support.ws import WsClient, is_state, is_turn_completed, ws_client
from web.client.stop import receipt_line

from .support import launch, new_task
from .test_client_cli import cli, start


async def _tool_calls(ws: WsClient, sid: str) -> list[dict[str, Any]]:
    """The session's tool call messages as stored (the turn's whole record)."""
    messages = (await ws.call("message.list", {"session_id": sid}))["messages"]
    return [m for m in messages if m["kind"] == "tool_call"]


async def _only_session(ws: WsClient) -> str:
    [task] = (await ws.call("task.list"))["tasks"]
    [session] = (await ws.call("session.list", {"task_id": task["id"]}))["sessions"]
    return str(session["id"])


def _is_tool_running(sid: str) -> Any:
    def pred(f: dict[str, Any]) -> bool:
        msg = (f.get("payload") or {}).get("message") or {}
        return (f.get("action") in ("session.message.added", "session.message.updated")
                and msg.get("session_id") == sid and msg.get("kind") == "tool_call"
                and msg["metadata"].get("status") in ("pending", "in_progress"))
    return pred


async def test_first_ctrl_c_during_a_step_stops_after_it(server: Server) -> None:
    async with trio.open_nursery() as nursery:
        client = await start(nursery, "run", "/steps 3 800", server=server)
        await client.until(b"[tool]", "err")
        client.proc.send_signal(signal.SIGINT)
        await client.until(b"stopping after this step (", "err")
        with trio.fail_after(20):
            code = await client.proc.wait()
    err = client.err.decode()
    assert code == 3, err
    assert "Ctrl-C again to stop now" in err
    assert "[turn ended: cancelled]" in err
    # The client announces each tool call of its turn once: the next step never began.
    assert err.count("[tool]") == 1, err
    assert "1 tool call finished" in err.splitlines()[-1], err
    async with ws_client(server) as ws:
        [call] = await _tool_calls(ws, await _only_session(ws))
        assert call["metadata"]["status"] == "completed", call


async def test_second_ctrl_c_during_the_wait_stops_now(server: Server) -> None:
    # A long step: a turn that ends well before it would have finished was cut.
    async with trio.open_nursery() as nursery:
        client = await start(nursery, "run", "/steps 3 8000", server=server)
        await client.until(b"[tool]", "err")
        client.proc.send_signal(signal.SIGINT)
        await client.until(b"stopping after this step (", "err")
        pressed = trio.current_time()
        client.proc.send_signal(signal.SIGINT)
        await client.until(b"stopping now", "err")
        with trio.fail_after(20):
            code = await client.proc.wait()
        took = trio.current_time() - pressed
    err = client.err.decode()
    assert code == 3, err
    assert took < 6, (took, err)
    assert "cancel: cancelled in " in err and "[turn ended: cancelled]" in err, err
    assert err.count("[tool]") == 1, err
    last = err.splitlines()[-1]
    assert last.startswith("stopped") and "1 tool call cancelled" in last, err
    async with ws_client(server) as ws:
        [call] = await _tool_calls(ws, await _only_session(ws))
        assert call["metadata"]["status"] != "completed", call


async def test_stop_a_session_after_its_step(server: Server) -> None:
    async with ws_client(server) as ws:
        sid = await launch(ws, await new_task(ws))
        await ws.call("session.subscribe", {"session_id": sid})
        await ws.call("message.add", {"session_id": sid, "content": "/steps 3 800"})
        await ws.wait_for(_is_tool_running(sid))
        done = await cli("stop", "--after-step", sid, server=server)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert answer["success"] and answer["session_id"] == sid, answer
        receipt = answer["receipt"]
        assert receipt["when"] == "after_step" and receipt["by"] == "user", receipt
        assert len(receipt["tool_calls"]["finished"]) == 1, receipt
        assert receipt["tool_calls"]["cancelled"] == [], receipt
        [call] = await _tool_calls(ws, sid)
        assert call["metadata"]["status"] == "completed", call


async def _running(ws: WsClient, task_id: str) -> tuple[str, str]:
    sid = await launch(ws, task_id)
    await ws.call("session.subscribe", {"session_id": sid})
    answer = await ws.call("message.add", {"session_id": sid, "content": "/delay 30000"})
    await ws.wait_for(is_state(sid, "RUNNING"))
    return sid, str(answer["turn_id"])


async def test_stop_all_stops_every_running_turn(server: Server) -> None:
    async with ws_client(server) as ws:
        task = await new_task(ws)
        turns = dict([await _running(ws, task), await _running(ws, task)])
        done = await cli("stop", "--all", server=server)
        assert done.returncode == 0, done.stderr
        header, *rows = done.stdout.decode().splitlines()
        assert header.split() == ["SESSION", "TURN", "OUTCOME", "LATENCY"]
        # session, turn, outcome, "13 ms"
        got = {r.split()[0]: r.split()[1:] for r in rows}
        assert set(got) == set(turns), done.stdout
        for sid, (turn, outcome, ms, unit) in got.items():
            assert turn == turns[sid] and outcome == "cancelled", got
            assert float(ms) >= 0 and unit == "ms", got
            await ws.wait_for(is_turn_completed(sid))
            [completed] = ws.of("session.turn.completed", sid)
            assert completed["stop_reason"] == "cancelled", completed
        # Nothing runs now: said so, and nothing is stopped.
        idle = await cli("stop", "--all", server=server)
        assert idle.returncode == 0 and idle.stdout == b"no turn was running\n", idle
        # --json: each session's object with its receipt.
        again = dict([await _running(ws, task)])
        as_json = await cli("stop", "--all", "--json", server=server)
        assert as_json.returncode == 0, as_json.stderr
        [stopped] = [json.loads(line) for line in as_json.stdout.splitlines()]
        assert {stopped["session_id"]: stopped["turn_id"]} == again, stopped
        assert stopped["receipt"]["by"] == "stop_all", stopped


async def test_stop_takes_a_session_or_all_never_both() -> None:
    for args, says in ((("stop",), b"name a SESSION, or pass --all"),
                       (("stop", "--all", "some-session"), b"takes no SESSION"),
                       (("stop", "--all", "--after-step"), b"takes no SESSION"),
                       (("stop", "--json", "some-session"), b"--json goes with --all")):
        # Refused before any server is looked for: no --url, no data dir needed.
        done = await cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert says in done.stderr, (args, done.stderr)
        assert len(done.stderr.decode().strip().splitlines()) == 2  # usage, the error


def test_the_receipt_line_names_what_stopped_and_what_still_runs() -> None:
    receipt = {"turn_id": "t", "outcome": "escalated", "by": "user", "when": "now",
               "confirmed_ms": 12.6, "tool_calls": {"finished": [], "cancelled": ["a", "b"]},
               "subagents": {"stopped": ["s"], "running": ["r1", "r2"]}, "queue_parked": 1,
               "files_changed": 3, "revertible": True,
               "strays": [{"pid": 41, "command": "sleep 60"}]}
    assert receipt_line(receipt) == (
        "stopped (escalated) in 13 ms · 2 tool calls cancelled · 1 subagent stopped · "
        "2 subagents still running · 1 queued prompt parked · 3 files changed (revertible) · "
        "1 process still running (41 sleep 60)")
    # Not known yet (null) or nothing: left out.
    assert receipt_line({"outcome": "cancelled", "confirmed_ms": None, "files_changed": None,
                         "tool_calls": {"finished": ["x"], "cancelled": ["y"]},
                         "strays": None}) == "stopped · 1 tool call finished · 1 cancelled"
