"""DESIGN.md §12 through the WebSocket API with a real server and the real mock
agent: projects, a turn's changes and diff, revert (and its revert), cancel and
undo half-way through ``/edits 20``, worktree sessions, and a project whose git
config plants programs that must never run."""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.config import Projects
from tests.support.git import git
from tests.support.server import Server, running_server
from tests.support.sessions import launch_subscribed
from tests.support.ws import WsClient, is_turn_completed, ws_client

from .support import http


@pytest.fixture
def projects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "projects"
    root.mkdir()
    # The mock's own state must not live in the project (a revert would undo it).
    monkeypatch.setenv("MOCK_AGENT_STATE_DIR", str(tmp_path / "mock-state"))
    return root


@pytest.fixture
async def psrv(tmp_path: Path, projects: Path) -> AsyncIterator[Server]:
    async with running_server(tmp_path / "data",
                              projects=Projects(roots=(_real(projects),))) as srv:
        yield srv




def _repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("one\n")
    git(path, "add", "a.txt")
    git(path, "commit", "-qm", "first")
    return path


def _real(path: Path) -> Path:
    return path.resolve()


def _read(path: Path) -> str:
    return path.read_text()


def _exists(path: Path) -> bool:
    return path.exists()


def _plain_git_status(repo: Path, home: Path) -> None:
    subprocess.run(["git", "status"], cwd=repo, capture_output=True, check=False,
                   env={"PATH": os.environ["PATH"], "HOME": str(home)})


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


async def _task(ws: WsClient, project: str) -> dict[str, Any]:
    task: dict[str, Any] = await ws.call("task.create", {"title": "t", "project_dir": project})
    return task


async def _turn(ws: WsClient, sid: str, prompt: str) -> str:
    after = len(ws.notifications)
    msg = await ws.call("message.add", {"session_id": sid, "content": prompt})
    await ws.wait_for(is_turn_completed(sid), after=after, timeout=20)
    return str(msg["turn_id"])


def _changes(sid: str, turn_id: str) -> Any:
    return lambda f: (f["action"] == "session.turn.changes"
                      and f["payload"]["session_id"] == sid
                      and f["payload"]["turn_id"] == turn_id)


async def test_projects_are_limited_to_the_roots(psrv: Server, projects: Path,
                                                 tmp_path: Path) -> None:
    _repo(projects / "app")
    (projects / "plain").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (projects / "link-out").symlink_to(outside)
    with trio.fail_after(30):
        async with ws_client(psrv) as ws:
            listed = await ws.call("project.list")
            assert listed == {"roots": [str(_real(projects))], "recent": [],
                              "work_dir": str(psrv.data_dir / "work")}
            browsed = await ws.call("project.browse", {})
            assert browsed["dirs"] == [{"name": "app", "is_git": True},
                                       {"name": "plain", "is_git": False}]
            task = await _task(ws, "app")
            assert task["project_dir"] == str((projects / "app").resolve())
            assert (await ws.call("project.list"))["recent"] == [task["project_dir"]]
            for bad in (str(outside), "link-out", "../", "missing", "app/a.txt"):
                frame = await ws.request("task.create", {"title": "t", "project_dir": bad})
                assert frame["type"] == "error", bad
                assert frame["payload"]["code"] == "VALIDATION_ERROR", frame
            frame = await ws.request("project.browse", {"path": "link-out"})
            assert frame["payload"]["code"] == "VALIDATION_ERROR"
            plain = await ws.call("task.create", {"title": "no project"})
            assert plain["project_dir"] is None
            session = await launch_subscribed(ws, task["id"])
            assert session["cwd"] == task["project_dir"] and session["worktree"] is None


async def test_changes_diff_revert_and_revert_of_the_revert(psrv: Server,
                                                            projects: Path) -> None:
    project = projects / "p"
    project.mkdir()
    (project / "keep.txt").write_text("original\n")
    with trio.fail_after(60):
        async with ws_client(psrv) as ws:
            task = await _task(ws, "p")
            sid = (await launch_subscribed(ws, task["id"]))["id"]
            before = _tree(project)
            t1 = await _turn(ws, sid, "/write keep.txt changed")
            changes = await ws.wait_for(_changes(sid, t1))
            assert changes["payload"]["files"] == [
                {"path": "keep.txt", "status": "modified", "additions": 1, "deletions": 1}]
            t2 = await _turn(ws, sid, "/write new/b.txt hello")
            await ws.wait_for(_changes(sid, t2))
            diff = await ws.call("turn.diff", {"session_id": sid, "turn_id": t2})
            assert "+hello" in diff["diff"] and diff["files"][0]["status"] == "added"
            whole = await ws.call("session.diff", {"session_id": sid})
            assert {f["path"] for f in whole["files"]} == {"keep.txt", "new/b.txt"}
            edited = _tree(project)

            reverted = await ws.call("turn.revert", {"session_id": sid, "turn_id": t1})
            assert reverted["later_turns"] == [t2]
            assert _tree(project) == before  # byte for byte, the new file gone
            assert not (project / "new").exists()
            status = await ws.wait_for(lambda f: f["action"] == "session.message.added"
                                       and f["payload"]["message"]["metadata"].get("reverted"))
            msg = status["payload"]["message"]
            assert msg["content"] == "Files restored to before this turn"
            assert msg["metadata"]["variant"] == "info"

            again = await ws.call("turn.revert", {"session_id": sid,
                                                  "turn_id": reverted["revert_id"]})
            assert again["success"] is True
            assert _tree(project) == edited  # the revert undone

            frame = await ws.request("turn.revert", {"session_id": sid, "turn_id": "nope"})
            assert frame["payload"]["code"] == "NOT_FOUND"

            # The agent is told with its next (prose) prompt; the mock echoes it back.
            await _turn(ws, sid, "hello")
            page = await ws.call("message.list", {"session_id": sid})
            said = [m["content"] for m in page["messages"] if m["role"] == "agent"]
            assert "the user restored the files" in said[-1]


async def test_revert_is_refused_while_a_turn_runs(psrv: Server, projects: Path) -> None:
    (projects / "p").mkdir()
    with trio.fail_after(60):
        async with ws_client(psrv) as ws:
            sid = (await launch_subscribed(ws, (await _task(ws, "p"))["id"]))["id"]
            t1 = await _turn(ws, sid, "/write a.txt x")
            await ws.wait_for(_changes(sid, t1))
            await ws.call("message.add", {"session_id": sid, "content": "/delay 5000"})
            frame = await ws.request("turn.revert", {"session_id": sid, "turn_id": t1})
            assert frame["payload"]["code"] == "CONFLICT", frame
            await ws.call("agent.cancel", {"session_id": sid})


async def test_cancel_half_way_then_undo(psrv: Server, projects: Path) -> None:
    project = projects / "p"
    project.mkdir()
    (project / "edit-1.txt").write_text("mine\n")
    before = _tree(project)
    with trio.fail_after(60):
        async with ws_client(psrv) as ws:
            sid = (await launch_subscribed(ws, (await _task(ws, "p"))["id"]))["id"]
            # A plain cancel half-way, then turn.revert.
            msg = await ws.call("message.add", {"session_id": sid, "content": "/edits 20"})
            while len(list(project.glob("edit-*.txt"))) < 4:
                await trio.sleep(0.05)
            answer = await ws.call("agent.cancel", {"session_id": sid})
            assert answer["outcome"] == "cancelled"
            await ws.wait_for(_changes(sid, msg["turn_id"]))
            half = _tree(project)
            assert half != before and len(half) < 20
            await ws.call("turn.revert", {"session_id": sid, "turn_id": msg["turn_id"]})
            assert _tree(project) == before

            # Cancel and undo in one request.
            msg = await ws.call("message.add", {"session_id": sid, "content": "/edits 20"})
            while len(list(project.glob("edit-*.txt"))) < 4:
                await trio.sleep(0.05)
            answer = await ws.call("agent.cancel", {"session_id": sid, "revert": True})
            assert answer["outcome"] == "cancelled" and answer["turn_id"] == msg["turn_id"]
            assert answer["reverted"]["turn_id"] == msg["turn_id"]
            assert _tree(project) == before
            idle = await ws.call("agent.cancel", {"session_id": sid, "revert": True})
            assert idle["outcome"] == "nothing_running" and "revert_error" in idle


async def test_the_task_boot_says_whether_the_project_is_git(psrv: Server,
                                                           projects: Path) -> None:
    """The page offers "Own worktree" only where a worktree can be made."""
    _repo(projects / "app")
    (projects / "plain").mkdir()
    with trio.fail_after(30):
        async with ws_client(psrv) as ws, http(psrv) as h:
            tasks = [await _task(ws, "app"), await _task(ws, "plain"),
                     await ws.call("task.create", {"title": "no project"})]
            answers = [(await h.get(f"/api/v1/tasks/{t['id']}/boot")).json()["project_is_git"]
                       for t in tasks]
            assert answers == [True, False, False]


async def test_worktree_sessions_are_isolated_and_cleaned_up(psrv: Server,
                                                             projects: Path) -> None:
    repo = _repo(projects / "app")
    with trio.fail_after(60):
        async with ws_client(psrv) as ws:
            task = await _task(ws, "app")
            one = await launch_subscribed(ws, task["id"], worktree=True)
            two = await launch_subscribed(ws, task["id"], worktree=True)
            for s in (one, two):
                wt = s["worktree"]
                assert s["cwd"] == wt["path"] and wt["branch"].startswith("turnvisor/")
                assert wt["base_commit"] == git(repo, "rev-parse", "HEAD")
            await _turn(ws, one["id"], "/write a.txt from one")
            await _turn(ws, two["id"], "/write a.txt from two")
            assert _read(Path(one["cwd"], "a.txt")) == "from one\n"
            assert _read(Path(two["cwd"], "a.txt")) == "from two\n"
            assert _read(repo / "a.txt") == "one\n"  # the project itself untouched

            # A commit on one's branch: deleting it keeps the branch; two's goes.
            git(Path(one["cwd"]), "commit", "-qam", "agent work")
            await ws.call("session.delete", {"session_id": one["id"]})
            await ws.call("session.delete", {"session_id": two["id"]})
            assert not _exists(Path(one["cwd"])) and not _exists(Path(two["cwd"]))
            branches = git(repo, "branch", "--format=%(refname:short)").split()
            assert one["worktree"]["branch"] in branches
            assert two["worktree"]["branch"] not in branches
            assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1

            (projects / "plain").mkdir()
            plain = await _task(ws, "plain")
            frame = await ws.request("session.launch", {"task_id": plain["id"],
                                                        "worktree": True})
            assert frame["payload"]["code"] == "VALIDATION_ERROR"
            assert "not a git repository" in frame["payload"]["message"]
            sessions = await ws.call("session.list", {"task_id": plain["id"]})
            assert sessions["sessions"] == []  # nothing half-made


async def test_planted_git_programs_never_run(psrv: Server, projects: Path,
                                              tmp_path: Path) -> None:
    repo = _repo(projects / "evil")
    marker = tmp_path / "ran"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\ncat\n")
    script.chmod(0o755)
    hooks = repo / ".git" / "evil-hooks"
    hooks.mkdir()
    for hook in ("post-checkout", "reference-transaction", "pre-commit"):
        (hooks / hook).write_text(f"#!/bin/sh\necho hook >> {marker}\n")
        (hooks / hook).chmod(0o755)
    with (repo / ".git" / "config").open("a") as cfg:
        cfg.write(f"[core]\n\tfsmonitor = {script}\n\thooksPath = {hooks}\n"
                  f"[filter \"evil\"]\n\tclean = {script}\n\tsmudge = {script}\n"
                  f"\trequired = true\n[diff]\n\texternal = {script}\n"
                  f"[diff \"evil\"]\n\ttextconv = {script}\n")
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    with trio.fail_after(60):
        async with ws_client(psrv) as ws:
            task = await _task(ws, "evil")
            sid = (await launch_subscribed(ws, task["id"]))["id"]
            t1 = await _turn(ws, sid, "/write a.txt planted")
            await ws.wait_for(_changes(sid, t1))
            await ws.call("turn.diff", {"session_id": sid, "turn_id": t1})
            await ws.call("turn.revert", {"session_id": sid, "turn_id": t1})
            assert (repo / "a.txt").read_text() == "one\n"
            wt = await launch_subscribed(ws, task["id"], worktree=True)
            await _turn(ws, wt["id"], "/write b.txt in the worktree")
            await ws.call("session.delete", {"session_id": wt["id"]})
    assert not marker.exists(), marker.read_text()
    # The plant is live: plain git runs it (so the assertion above can fail).
    _plain_git_status(repo, tmp_path)
    assert marker.exists()


async def test_a_revert_rewinds_codex_history_and_tells_an_acp_agent(psrv: Server,
                                                                   projects: Path) -> None:
    """DESIGN.md §12: the agent is told of a revert.  The mock's Codex dialect
    drops the reverted turns from its thread (``thread/revert``: its /recall no
    longer lists them); the ACP dialect gets the note with its next prose prompt."""
    (projects / "p").mkdir()
    with trio.fail_after(60):
        async with ws_client(psrv) as ws:
            task = await _task(ws, "p")
            sid = (await launch_subscribed(ws, task["id"], "mock-codex"))["id"]
            await _turn(ws, sid, "/write a.txt one")
            t2 = await _turn(ws, sid, "/write b.txt two")
            await ws.wait_for(_changes(sid, t2))
            await _turn(ws, sid, "/write c.txt three")
            await ws.call("turn.revert", {"session_id": sid, "turn_id": t2})
            assert sorted(p.name for p in (projects / "p").iterdir()) == ["a.txt"]
            t4 = await _turn(ws, sid, "/recall")
            page = await ws.call("message.list", {"session_id": sid})
            said = [m["content"] for m in page["messages"] if m["role"] == "agent"]
            assert said[-1] == "recall: /write a.txt one"
            [told] = [m for m in page["messages"] if m["metadata"].get("revert_told")]
            assert told["turn_id"] == t4 and told["metadata"]["revert_told"] == "rewound"
            assert told["content"] == ("The agent's conversation was rewound to before the "
                                       "reverted turn")
            # Told once: the next prose prompt carries no note.
            await _turn(ws, sid, "hello")
            page = await ws.call("message.list", {"session_id": sid})
            said = [m["content"] for m in page["messages"] if m["role"] == "agent"]
            assert "restored the files" not in said[-1]

            acp = (await launch_subscribed(ws, task["id"]))["id"]
            a1 = await _turn(ws, acp, "/write d.txt four")
            await ws.wait_for(_changes(acp, a1))
            await ws.call("turn.revert", {"session_id": acp, "turn_id": a1})
            await _turn(ws, acp, "/recall")  # a slash command: the note waits
            await _turn(ws, acp, "hello")
            page = await ws.call("message.list", {"session_id": acp})
            said = [m["content"] for m in page["messages"] if m["role"] == "agent"]
            assert "recall: /write d.txt four" in said  # ACP keeps its history
            assert "the user restored the files" in said[-1]
            [told] = [m for m in page["messages"] if m["metadata"].get("revert_told")]
            assert told["metadata"]["revert_told"] == "note"
