"""DESIGN.md §15 "no silent overwrite", through a real server and the real mock agent:
a revert keeps what changed after the turn that is not the session's own (a hand edit,
another session's agent in the same directory) unless the request names it;
``turn.revert.preview`` says beforehand what a revert changes; an undo of a revert
follows the same rules; a task with no project has checkpoints; ``session.diff`` is
the sum of the session's own turns; ``project.root.add`` is checked and kept."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.config import Config, Projects
from tests.support.server import Server, running_server
from tests.support.sessions import launch_subscribed
from tests.support.ws import WsClient, is_turn_completed, ws_client


@pytest.fixture
def projects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "projects"
    (root / "p").mkdir(parents=True)
    monkeypatch.setenv("MOCK_AGENT_STATE_DIR", str(tmp_path / "mock-state"))
    return root.resolve()


@pytest.fixture
async def psrv(tmp_path: Path, projects: Path) -> AsyncIterator[Server]:
    async with running_server(tmp_path / "data", projects=Projects(roots=(projects,))) as srv:
        yield srv


async def _turn(ws: WsClient, sid: str, prompt: str) -> str:
    after = len(ws.notifications)
    msg = await ws.call("message.add", {"session_id": sid, "content": prompt})
    await ws.wait_for(is_turn_completed(sid), after=after, timeout=20)
    turn_id = str(msg["turn_id"])
    # Its after-checkpoint is taken once it ended: its changes are announced then.
    await ws.wait_for(lambda f: f["action"] == "session.turn.changes"
                      and f["payload"]["turn_id"] == turn_id, timeout=20)
    return turn_id


async def _session(ws: WsClient, project: str | None) -> str:
    payload = {"title": "t"} | ({"project_dir": project} if project else {})
    task = await ws.call("task.create", payload)
    return str((await launch_subscribed(ws, task["id"]))["id"])


def _planned(preview: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    return {f["path"]: (f["action"], f["edited_since"]) for f in preview["files"]}


async def test_a_hand_edit_after_the_turn_survives_a_revert_unless_chosen(
        psrv: Server, projects: Path) -> None:
    a = projects / "p" / "a.txt"
    with trio.fail_after(90):
        async with ws_client(psrv) as ws:
            sid = await _session(ws, "p")
            t1 = await _turn(ws, sid, "/write a.txt from the agent")
            await _turn(ws, sid, "/write b.txt also the agent's")
            a.write_text(a.read_text() + "my own line\n")

            preview = await ws.call("turn.revert.preview", {"session_id": sid, "turn_id": t1})
            assert _planned(preview) == {"a.txt": ("deleted", True),
                                         "b.txt": ("deleted", False)}
            assert len(preview["later_turns"]) == 1
            assert a.read_text().endswith("my own line\n")  # a preview writes nothing

            kept = await ws.call("turn.revert", {"session_id": sid, "turn_id": t1})
            assert kept["kept"] == [{"path": "a.txt", "reason": "edited_since"}]
            assert kept["edited_since"] == ["a.txt"] and kept["deleted"] == ["b.txt"]
            assert a.read_text().endswith("my own line\n")
            assert not (projects / "p" / "b.txt").exists()

            # Undone through its revert_id (the same rules: nothing changed since).
            undo = await ws.call("turn.revert", {"session_id": sid,
                                                 "turn_id": kept["revert_id"]})
            assert undo["kept"] == [] and (projects / "p" / "b.txt").exists()
            assert a.read_text().endswith("my own line\n")

            # Chosen: the turn's start comes back (a.txt did not exist), and the
            # edit is in the safety checkpoint: undoing brings it back.
            gone = await ws.call("turn.revert", {"session_id": sid, "turn_id": t1,
                                                 "overwrite": ["a.txt"]})
            assert gone["kept"] == [] and gone["edited_since"] == ["a.txt"]
            assert not a.exists()
            await ws.call("turn.revert", {"session_id": sid, "turn_id": gone["revert_id"]})
            assert a.read_text().endswith("my own line\n")

            # Only what the revert would change is listed: a file already as it
            # was at the turn's start is not.
            (projects / "p" / "b.txt").unlink()
            again = await ws.call("turn.revert.preview", {"session_id": sid,
                                                          "turn_id": t1})
            assert _planned(again) == {"a.txt": ("deleted", True)}
            frame = await ws.request("turn.revert", {"session_id": sid, "turn_id": t1,
                                                     "overwrite": "everything"})
            assert frame["payload"]["code"] == "VALIDATION_ERROR"


async def test_another_sessions_edit_in_the_same_directory_is_kept_and_marked(
        psrv: Server, projects: Path) -> None:
    p = projects / "p"
    with trio.fail_after(90):
        async with ws_client(psrv) as ws:
            mine = await _session(ws, "p")
            other = await _session(ws, "p")
            t1 = await _turn(ws, mine, "/write a.txt mine")
            await _turn(ws, other, "/append a.txt theirs")
            await _turn(ws, other, "/write c.txt only theirs")
            await _turn(ws, mine, "/write b.txt mine too")

            whole = await ws.call("session.diff", {"session_id": mine})
            files = {f["path"]: f for f in whole["files"]}
            assert set(files) == {"a.txt", "b.txt"}  # c.txt is not this session's
            assert files["a.txt"].get("outside") is True
            assert not files["b.txt"].get("outside")
            assert "+mine" in whole["diff"] and "theirs" not in whole["diff"]

            # The other session's files are not this one's: a revert leaves them.
            preview = await ws.call("turn.revert.preview", {"session_id": mine, "turn_id": t1})
            assert _planned(preview) == {"a.txt": ("deleted", True),
                                         "b.txt": ("deleted", False),
                                         "c.txt": ("deleted", True)}
            answer = await ws.call("turn.revert", {"session_id": mine, "turn_id": t1})
            assert answer["kept"] == [{"path": "a.txt", "reason": "edited_since"},
                                      {"path": "c.txt", "reason": "edited_since"}]
            assert (p / "a.txt").read_text() == "mine\ntheirs\n"
            assert (p / "c.txt").exists() and not (p / "b.txt").exists()


async def test_cancel_and_undo_goes_through_the_same_rules(psrv: Server,
                                                          projects: Path) -> None:
    p = projects / "p"
    with trio.fail_after(90):
        async with ws_client(psrv) as ws:
            sid = await _session(ws, "p")
            await _turn(ws, sid, "/write notes.txt first")
            (p / "notes.txt").write_text("first\nby hand\n")  # before the next turn
            msg = await ws.call("message.add", {"session_id": sid, "content": "/edits 30"})
            while len(list(p.glob("edit-*.txt"))) < 3:
                await trio.sleep(0.05)
            # What the dialog shows while the turn runs: its own files, none edited
            # since (the turn is still writing: all of it is the turn's).
            preview = await ws.call("turn.revert.preview",
                                    {"session_id": sid, "turn_id": msg["turn_id"]})
            assert preview["files"] and all(
                f["action"] == "deleted" and not f["edited_since"] for f in preview["files"])
            frame = await ws.request("agent.cancel", {"session_id": sid, "revert": True,
                                                      "overwrite": 3})
            assert frame["payload"]["code"] == "VALIDATION_ERROR"
            answer = await ws.call("agent.cancel", {"session_id": sid, "revert": True,
                                                    "overwrite": []})
            assert answer["reverted"]["turn_id"] == msg["turn_id"]
            assert answer["reverted"]["kept"] == []
            assert not list(p.glob("edit-*.txt"))
            assert (p / "notes.txt").read_text() == "first\nby hand\n"


async def test_a_default_task_has_checkpoints_and_its_turn_can_be_undone(
        psrv: Server) -> None:
    with trio.fail_after(60):
        async with ws_client(psrv) as ws:
            sid = await _session(ws, None)
            t1 = await _turn(ws, sid, "/write a.txt hello")
            [made] = list((psrv.data_dir / "work").rglob("a.txt"))
            diff = await ws.call("turn.diff", {"session_id": sid, "turn_id": t1})
            assert [f["path"] for f in diff["files"]] == ["a.txt"]
            answer = await ws.call("turn.revert", {"session_id": sid, "turn_id": t1})
            assert answer["deleted"] == ["a.txt"] and not made.exists()
            await ws.call("turn.revert", {"session_id": sid, "turn_id": answer["revert_id"]})
            assert made.read_text() == "hello\n"


async def test_project_root_add_is_checked_kept_and_read_at_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    extra = (tmp_path / "elsewhere").resolve()
    root = (tmp_path / "root").resolve()
    root.mkdir()
    (extra / "proj").mkdir(parents=True)
    with trio.fail_after(60):
        async with running_server(data, projects=Projects(roots=(root,))) as srv, \
                ws_client(srv) as ws:
            for bad, why in ((str(tmp_path), "contains"), (str(data / "work"), "inside"),
                             (str(tmp_path / "missing"), "does not exist"),
                             ("relative/dir", "absolute")):
                frame = await ws.request("project.root.add", {"path": bad})
                assert frame["payload"]["code"] == "VALIDATION_ERROR", frame
                message = frame["payload"]["message"]
                assert why in message and "\n" not in message, message
            added = await ws.call("project.root.add", {"path": str(extra)})
            assert added["root"] == str(extra) and str(extra) in added["roots"]
            listing = await ws.call("project.list", {})
            assert str(extra) in listing["roots"]
            browsed = await ws.call("project.browse", {"path": str(extra)})
            assert [d["name"] for d in browsed["dirs"]] == ["proj"]
            task = await ws.call("task.create", {"title": "t", "project_dir": str(extra / "proj")})
            assert task["project_dir"] == str(extra / "proj")
    saved = json.loads((data / "project-roots.json").read_text())
    assert saved == {"roots": [str(extra)]}
    # Read at the next start, next to the configuration's roots.
    assert extra in Config.load(data).projects.roots
