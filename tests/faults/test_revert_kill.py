"""DESIGN.md §12 fault: a real ``turnvisor serve`` SIGKILLed during a revert of many
files.  The tree is never left half-restored: the next start finishes the revert
(the engine's journal) before any turn runs and says so in the session."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import trio

from tests.support.serverproc import server_process
from tests.support.ws import is_turn_completed, ws_client

FILES = 3000


def _write_all(root: Path, word: str) -> None:
    for i in range(FILES):
        (root / f"f{i:04d}.txt").write_text(f"{word} {i}\n" + "x" * 4000)


def _count(root: Path, word: str) -> int:
    return sum(1 for i in range(FILES)
               if (root / f"f{i:04d}.txt").read_text().startswith(f"{word} "))


async def test_a_kill_during_a_revert_is_finished_at_the_next_start(tmp_path: Path) -> None:
    project = tmp_path / "projects" / "big"
    project.mkdir(parents=True)
    await trio.to_thread.run_sync(_write_all, project, "orig")
    data_dir = tmp_path / "data"
    toml = f'[projects]\nroots = ["{tmp_path / "projects"}"]\n'
    env = {**os.environ, "MOCK_AGENT_STATE_DIR": str(tmp_path / "mock-state")}
    caught = -1
    with trio.fail_after(120):
        async with server_process(data_dir, toml=toml, base_env=env) as srv, \
                ws_client(srv) as ws:
            task = await ws.call("task.create", {"title": "t", "project_dir": "big"})
            session = await ws.call("session.launch", {"task_id": task["id"]})
            sid = session["id"]
            await ws.call("session.subscribe", {"session_id": sid})
            msg = await ws.call("message.add", {"session_id": sid,
                                                "content": "/write new.txt hi"})
            await ws.wait_for(is_turn_completed(sid), timeout=30)
            await ws.wait_for(lambda f: f["action"] == "session.turn.changes",
                              timeout=30)
            # Edits after the turn (as by hand): the revert is told to restore all of
            # them (DESIGN.md §15: else it would keep them), and so is its recovery.
            await trio.to_thread.run_sync(_write_all, project, "new")
            await ws.send("turn.revert", {"session_id": sid, "turn_id": msg["turn_id"],
                                          "overwrite": "all"})
            while True:
                caught = await trio.to_thread.run_sync(_count, project, "orig")
                if caught > 0:
                    break
                await trio.lowlevel.checkpoint()
            srv.proc.send_signal(signal.SIGKILL)
            await srv.proc.wait()
        async with server_process(data_dir, toml=toml, base_env=env) as srv, \
                ws_client(srv) as ws:
            page = await ws.call("message.list", {"session_id": sid})
            recovered = [m for m in page["messages"] if m["metadata"].get("recovered")]
    assert recovered, page
    assert recovered[-1]["metadata"]["variant"] == "warning"
    # Whole: every file as at the turn's start, the turn's own file gone.
    assert await trio.to_thread.run_sync(_count, project, "orig") == FILES
    assert not await trio.to_thread.run_sync((project / "new.txt").exists)
    print(f"killed with {caught} of {FILES} files restored")
