"""``turnvisor run | cancel | watch | tasks | sessions`` (DESIGN.md §14): the
real command in a subprocess against a real server, real signals for Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import trio

from tests.support.server import Server
from tests.support.ws import is_state, is_turn_completed, ws_client

from .support import launch, new_task

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def command(*args: str, server: Server | None = None) -> list[str]:
    where = ["--url", server.url, "--token", server.token] if server is not None else []
    return [sys.executable, "-m", "web", args[0], *where, *args[1:]]


async def cli(*args: str, server: Server | None = None, env: dict[str, str] | None = None,
              within: float = 30) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(within):
        return await trio.run_process(command(*args, server=server), capture_stdout=True,
                                      capture_stderr=True, check=False, env=env or ENV)


class Running:
    """A client process whose output is read as it comes."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.out = b""
        self.err = b""

    async def read(self, stream: trio.abc.ReceiveStream, name: str) -> None:
        async for chunk in stream:
            setattr(self, name, getattr(self, name) + chunk)

    async def until(self, needle: bytes, name: str = "out", within: float = 20) -> None:
        with trio.fail_after(within):
            while needle not in getattr(self, name):
                await trio.sleep(0.05)


async def start(nursery: trio.Nursery, *args: str, server: Server) -> Running:
    proc = await trio.lowlevel.open_process(command(*args, server=server), env=ENV,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    running = Running(proc)
    assert proc.stdout is not None and proc.stderr is not None
    nursery.start_soon(running.read, proc.stdout, "out")
    nursery.start_soon(running.read, proc.stderr, "err")
    return running


async def test_run_streams_the_answer_and_the_lists_show_it(server: Server) -> None:
    done = await cli("run", "hello from the terminal", server=server)
    assert done.returncode == 0, done.stderr
    assert b"hello from the terminal" in done.stdout
    assert b"[turn ended: end_turn]" in done.stderr
    tasks = await cli("tasks", "--json", server=server)
    [task] = [json.loads(line) for line in tasks.stdout.splitlines()]
    assert task["title"] == "hello from the terminal"
    table = await cli("tasks", server=server)
    assert task["id"].encode() in table.stdout and b"TITLE" in table.stdout
    sessions = await cli("sessions", "--json", task["id"], server=server)
    [session] = [json.loads(line) for line in sessions.stdout.splitlines()]
    assert session["agent"] == "mock" and session["state"] == "WAITING_FOR_INPUT"


async def test_ctrl_c_cancels_the_turn_and_says_how_it_ended(server: Server) -> None:
    async with trio.open_nursery() as nursery:
        client = await start(nursery, "run", "/delay 30000", server=server)
        await client.until(b"chunk3")
        client.proc.send_signal(signal.SIGINT)
        with trio.fail_after(20):
            code = await client.proc.wait()
    assert code == 3, client.err
    err = client.err.decode()
    assert "cancel: cancelled in " in err and " ms" in err, err
    assert "[turn ended: cancelled]" in err
    # The agent lives on: the session takes the next prompt.
    async with ws_client(server) as ws:
        [task] = (await ws.call("task.list"))["tasks"]
        [session] = (await ws.call("session.list", {"task_id": task["id"]}))["sessions"]
        assert session["state"] == "WAITING_FOR_INPUT" and session["agent_live"]
        again = await cli("run", "--session", session["id"], "still there?", server=server)
        assert again.returncode == 0 and b"still there?" in again.stdout


async def test_a_second_ctrl_c_leaves_without_waiting(server: Server) -> None:
    async with trio.open_nursery() as nursery:
        # /slow ignores the cancel: the first Ctrl-C's cancel cannot settle soon.
        client = await start(nursery, "run", "/slow 30000", server=server)
        await client.until(b"chunk1")
        client.proc.send_signal(signal.SIGINT)
        await client.until(b"cancelling the turn", "err")
        client.proc.send_signal(signal.SIGINT)
        with trio.fail_after(5):
            code = await client.proc.wait()
    assert code == 130, client.err


async def test_cancel_and_watch_a_session(server: Server) -> None:
    async with ws_client(server) as ws, trio.open_nursery() as nursery:
        sid = await launch(ws, await new_task(ws))
        await ws.call("session.subscribe", {"session_id": sid})
        watcher = await start(nursery, "watch", sid, server=server)
        await watcher.until(b"session.state_changed")
        await ws.call("message.add", {"session_id": sid, "content": "/delay 30000"})
        await ws.wait_for(is_state(sid, "RUNNING"))
        done = await cli("cancel", sid, server=server)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert answer["success"] and answer["session_id"] == sid
        assert answer["latency_ms"] >= 0
        await ws.wait_for(is_turn_completed(sid))
        await watcher.until(b'"stop_reason": "cancelled"')
        watcher.proc.send_signal(signal.SIGINT)
        with trio.fail_after(10):
            assert await watcher.proc.wait() == 0
    lines = [json.loads(line) for line in watcher.out.splitlines()]
    assert {"session.cancellation_changed", "session.turn.completed"} <= {
        f["action"] for f in lines}


async def test_the_token_is_found_in_the_data_dir(server: Server, tmp_path: Path) -> None:
    # (The running server's own record, server.json, and the records an agent
    # plants: tests/security/test_cli_token.py, against a real `turnvisor serve`.)
    # Only a token file: the URL from the environment.
    only_token = tmp_path / "token-only"
    only_token.mkdir()
    (only_token / "token").write_text(server.token + "\n")
    done = await cli("tasks", "--data-dir", str(only_token),
                     env={**ENV, "TURNVISOR_URL": server.url})
    assert done.returncode == 0, done.stderr


async def test_failures_are_one_line(server: Server, tmp_path: Path) -> None:
    refused = await cli("tasks", "--url", server.url, "--token", "x" * 40,
                        "--data-dir", str(tmp_path))
    assert refused.returncode == 1
    assert refused.stderr.decode().strip().splitlines() == [
        f"turnvisor: {server.url} refused the token (401)"]
    nothing = await cli("tasks", "--url", "http://127.0.0.1:9", "--token", "x" * 40,
                        "--data-dir", str(tmp_path))
    assert nothing.returncode == 1
    assert len(nothing.stderr.decode().strip().splitlines()) == 1
    assert b"cannot reach" in nothing.stderr
    no_token = await cli("tasks", "--data-dir", str(tmp_path / "none"),
                         env={**{k: v for k, v in ENV.items() if k != "TURNVISOR_TOKEN"},
                              "TURNVISOR_URL": server.url})
    assert no_token.returncode == 1 and b"no token" in no_token.stderr
    unknown = await cli("cancel", "no-such-session", server=server)
    assert unknown.returncode == 1 and b"NOT_FOUND" in unknown.stderr
