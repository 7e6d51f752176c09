"""Real agents edit a project through their own tools; Turnvisor shows and undoes it
(issue 33 item 8, DESIGN.md §12).

The server is the real one (``running_server``, Hypercorn, SQLite) with a project
root; the agent CLI is the pinned one, in the default bubblewrap sandbox, pointed
at the fake provider, whose ``EditPlan`` makes the model ask for edits the way
the real API streams them (tests/fake_provider/edits.py): Codex's freeform
``apply_patch`` tool, Claude's ``Write``, ``Read`` and ``Edit``.  Everything goes
through the WebSocket API as a client would: ``task.create {project_dir}``,
``session.launch``, ``message.add``, ``permission.respond`` (the agent's edit
permissions answered as a user would), ``agent.cancel``, ``session.turn.changes``,
``turn.diff``, ``turn.revert``.

Checked: a turn's edit is listed with its +/- counts and shown in its diff; a turn
that edits several files, cancelled while the model pauses before its third
edit, is reverted byte for byte (hashes of the tree before the turn), the
transcript says so and the agent is told with its next prompt; and (Codex) the
sandboxed agent's conversation restores after a backend restart, after which
the files still revert.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.config import Config, Projects
from supervisor.turn.restore import RESTORE_FAILED_STATUS
from supervisor.workspace.turn_checkpoints import REVERTED_STATUS
from tests.fake_provider import FakeProvider
from tests.fake_provider.edits import EditPlan, FileEdit
from tests.support.git import git
from tests.support.leaks import kill_group
from tests.support.server import Server, running_server
from tests.support.ws import WsClient, ws_client

from .cli import AGENTS_DIR, find_cli
from .harness import START_S, assert_gone, descendants
from .homes import agents_toml, launch, profile_table, server_environ
from .test_end_to_end import E2E, _answer_permissions, _state, allow

pytestmark = [pytest.mark.agents, pytest.mark.slow]

per_agent = pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.skipif(
        find_cli(name) is None,
        reason=f"{name} CLI is not installed in {AGENTS_DIR} (run scripts/install_agents.sh)",
    ))
    for name in ("codex", "claude")
])
needs_codex = pytest.mark.skipif(
    find_cli("codex") is None,
    reason=f"codex CLI is not installed in {AGENTS_DIR} (run scripts/install_agents.sh)")

#: Codex offers its ``apply_patch`` tool only to models its own catalogue says
#: take it; the fake model is not one, so the profile names one that is (the
#: provider answers whatever the model is called).
CODEX_PATCH_MODEL = "gpt-5.5"
TEST_S = 90.0
MARKER = "PELICAN-4711"

NOTES = "first line\nsecond line\n"
NOTES_EDITED = "first line\nsecond line, edited\n"
README = "# app\n\nSome words.\n"
README_EDITED = "# app\n\nOther words.\nAnd one more line.\n"
APP = "def main():\n    return 1\n"
APP_EDITED = "def main():\n    return 2\n"
OLD = "to be removed\n"
NEW = "print('new')\n"


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(token_interval_s=0.05, n_tokens=3, wait_s=30.0) as p:
        yield p


# -- the project and its tree -----------------------------------------------------



def _project(path: Path) -> Path:
    """A git repository with a few committed files (what a user points a task at)."""
    (path / "src").mkdir(parents=True)
    for rel, text in (("notes.txt", NOTES), ("README.md", README), ("src/app.py", APP),
                      ("old.txt", OLD)):
        (path / rel).write_text(text)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", ".")
    git(path, "commit", "-qm", "first")
    return path.resolve()


def _hashes(root: Path) -> dict[str, str]:
    """Every file of the work tree (the user's ``.git`` aside) by its SHA-256."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


# -- the server -------------------------------------------------------------------

def _profile(data_dir: Path, name: str, provider: FakeProvider, tmp: Path,
             monkeypatch: pytest.MonkeyPatch, *, persist: bool = False) -> Config:
    """``DATA_DIR/turnvisor.toml`` pointing ``name`` at ``provider`` (as
    test_end_to_end's ``write_profile``; ``persist``: the agent keeps its
    conversations, for a restore)."""
    spec = launch(name, provider.url, tmp, persist=persist)
    assert spec is not None  # skipped at collection otherwise
    if name == "codex":
        codex_home = Path(spec.env["CODEX_HOME"])
        config = codex_home / "config.toml"
        config.write_text(config.read_text().replace('model = "fake-model"',
                                                     f'model = "{CODEX_PATCH_MODEL}"'))
        # Codex sandboxes each command and patch itself (bwrap, inside Turnvisor's)
        # through a helper it links under CODEX_HOME, and refuses to when CODEX_HOME
        # is under the temporary directory, as every pytest tmp_path is: then each
        # patch fails, and Codex asks to run it unsandboxed (a delete it does not
        # even ask for).  A user's ~/.codex is not under it; here TMPDIR moves.
        tmpdir = codex_home.parent / "tmp"
        tmpdir.mkdir()
        spec.env["TMPDIR"] = str(tmpdir)
    server_env = server_environ(spec)
    for key in list(os.environ):
        if key not in server_env:
            monkeypatch.delenv(key)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "turnvisor.toml").write_text(
        agents_toml({name: profile_table(spec, server_env)}))
    return Config.load(data_dir)


@asynccontextmanager
async def _server(data_dir: Path, cfg: Config, root: Path) -> AsyncIterator[Server]:
    """``root``: the one project root, resolved."""
    async with running_server(data_dir, timeouts={"agent_start_s": START_S},
                              profiles=cfg.profiles,
                              projects=Projects(roots=(root,))) as srv:
        yield srv


def _sandboxed(pgid: int) -> bool:
    """The agent runs under bubblewrap: a ``bwrap`` in its process tree."""
    for pid in descendants(pgid) | {pgid}:
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/exe")) == "bwrap":
                return True
        except OSError:
            continue
    return False


@asynccontextmanager
async def _e2e_session(srv: Server, ws: WsClient, name: str, provider: FakeProvider,
                       pgids: set[int], seen: set[int], *, project: Path | None = None,
                       task_id: str = "", sid: str = "") -> AsyncIterator[E2E]:
    """A new session of ``name`` in a task on ``project``, or the existing ``sid``
    (after a restart: its agent starts with the next prompt), subscribed, its
    permission requests allowed over the WebSocket.  Every agent process group
    it runs in goes into ``pgids``, every process seen under one into ``seen``."""
    pgid = 0
    if not sid:
        assert project is not None
        task = await ws.call("task.create", {"title": f"edits {name}",
                                             "project_dir": str(project)})
        assert task["project_dir"] == str(project), task
        frame = await ws.request("session.launch", {"task_id": task["id"], "agent": name},
                                 timeout=START_S + 5)
        assert frame["type"] == "response", frame
        assert frame["payload"]["cwd"] == str(project), frame["payload"]
        task_id, sid = task["id"], frame["payload"]["id"]
        pgid = srv.sup.lifecycle.executions[sid].agent.pgid or 0
        assert pgid, "the launched agent has no process group"
        pgids.add(pgid)
    e = E2E(name=name, srv=srv, ws=ws, provider=provider, cwd=str(project or ""),
            task_id=task_id, sid=sid, pgid=pgid, policy=allow, seen_pids=seen)
    assert await ws.call("session.subscribe", {"session_id": sid}) == {"success": True}
    await e.wait(0, _state("WAITING_FOR_INPUT"), "the subscribe snapshot")

    async def scan() -> None:
        while True:
            ex = srv.sup.lifecycle.executions.get(sid)
            if ex is not None and ex.agent.pgid:
                e.pgid = ex.agent.pgid
                pgids.add(e.pgid)
                seen.update(descendants(e.pgid))
            await trio.sleep(0.25)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_answer_permissions, e)
        nursery.start_soon(scan)
        yield e
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def _agents_checked() -> AsyncIterator[tuple[set[int], set[int]]]:
    """(pgids, seen): after the block (its servers stopped) no process of any
    agent group in ``pgids`` or seen under one may be left."""
    pgids: set[int] = set()
    seen: set[int] = set()
    try:
        yield pgids, seen
        for pgid in pgids:
            await assert_gone(pgid, seen | {pgid})
    finally:
        for pgid in pgids:
            kill_group(pgid)


def _changes_of(turn_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: (f["action"] == "session.turn.changes"
                      and f["payload"]["turn_id"] == turn_id)


def _posts_since(provider: FakeProvider, seen: int) -> list[str]:
    return [repr(body) for verb, _, body in provider.requests[seen:]
            if verb == "POST" and body is not None]


async def _edit_turn(e: E2E, prompt: str) -> tuple[str, list[dict[str, Any]]]:
    """An ``EDIT`` turn to its end: its id and the files its changes list."""
    mark, turn_id = await e.prompt(prompt)
    assert await e.turn_end(mark, turn_id) == "end_turn"
    changes = await e.wait(mark, _changes_of(turn_id), "the turn's session.turn.changes")
    return turn_id, list(changes["payload"]["files"])


# -- the tests ----------------------------------------------------------------------

@per_agent
async def test_an_agents_edits_are_listed_and_a_turn_cancelled_half_way_reverts(
    name: str, provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _project(tmp_path / "projects" / "app")
    root = project.parent
    # Codex keeps its threads, as a user's does (an ephemeral thread refuses
    # thread/revert: the agent would be told of a revert in words instead).
    cfg = _profile(tmp_path / "data", name, provider, tmp_path, monkeypatch,
                   persist=name == "codex")
    original = _hashes(project)
    with trio.fail_after(TEST_S):
        async with _agents_checked() as (pgids, seen), \
                _server(tmp_path / "data", cfg, root) as srv, ws_client(srv) as ws, \
                _e2e_session(srv, ws, name, provider, pgids, seen, project=project) as e:
            assert _sandboxed(e.pgid), f"{name} does not run under bwrap"

            # (a) One edit through the agent's own tool: listed, and in the diff.
            provider.edit_plan = EditPlan(str(project), (
                FileEdit("notes.txt", NOTES, NOTES_EDITED),))
            t1, files = await _edit_turn(e, "EDIT: update the notes")
            assert (project / "notes.txt").read_text() == NOTES_EDITED
            assert files == [{"path": "notes.txt", "status": "modified", "additions": 1,
                              "deletions": 1}], files
            diff = await ws.call("turn.diff", {"session_id": e.sid, "turn_id": t1})
            assert "-second line\n+second line, edited\n" in diff["diff"], diff["diff"]
            # Claude asks before each Write and Edit (its default mode), answered over
            # the WebSocket; Codex applies a patch inside its workspace sandbox unasked.
            asked = [p["title"] for p, _ in e.answered]
            assert asked == (["Edit notes.txt"] if name == "claude" else []), asked

            # (b) Several edits; cancelled while the model pauses before the third.
            after_t1 = _hashes(project)
            second = (FileEdit("old.txt", OLD, None) if name == "codex"  # Claude cannot delete
                      else FileEdit("README.md", README, README_EDITED))
            provider.edit_plan = EditPlan(str(project), (
                FileEdit("src/new.py", None, NEW), second,
                FileEdit("src/app.py", APP, APP_EDITED)), wait_before=2)
            mark, t2 = await e.prompt("EDIT: change several files")
            await e.wait_streams(lambda s: any(r.mode == "wait" and r.open for r in s),
                                 "the model's pause before the third edit")
            assert (project / "src/new.py").read_text() == NEW
            assert (project / second.path).exists() == (second.after is not None)
            await e.cancel()
            assert await e.turn_end(mark, t2) == "cancelled"
            changes = await e.wait(mark, _changes_of(t2), "the cancelled turn's changes")
            listed = {f["path"]: f["status"] for f in changes["payload"]["files"]}
            assert listed == {"src/new.py": "added",
                              second.path: "deleted" if second.after is None else "modified"}
            assert (project / "src/app.py").read_text() == APP  # never reached
            asked = [p["title"] for p, _ in e.answered[1:]]
            assert asked == (["Write src/new.py", "Edit README.md"] if name == "claude"
                             else []), asked

            reverted = await ws.call("turn.revert", {"session_id": e.sid, "turn_id": t2})
            assert reverted["later_turns"] == [], reverted
            assert _hashes(project) == after_t1, "the revert did not restore the tree"
            status = [m for m in await e.messages()
                      if m["kind"] == "status" and m["metadata"].get("reverted")]
            assert [(m["content"], m["metadata"]["turn_id"]) for m in status] == [
                (REVERTED_STATUS, t2)], status

            # The agent is told with its next prompt: Codex drops the reverted turn
            # from its thread (thread/revert: the model no longer sees it), Claude
            # gets a note in front of the prompt.
            seen_requests = len(provider.requests)
            mark, t3 = await e.prompt("QUICK: what now?")
            assert await e.turn_end(mark, t3) == "end_turn"
            asked = [b for b in _posts_since(provider, seen_requests) if "what now?" in b]
            assert asked, "the model was not asked"
            told = [m["metadata"]["revert_told"] for m in await e.messages()
                    if m["metadata"].get("revert_told")]
            if name == "codex":
                assert told == ["rewound"], told
                assert not any("change several files" in b for b in asked), asked[-1:]
                assert not any("the user restored the files" in b for b in asked), asked[-1:]
                assert any("update the notes" in b for b in asked), asked[-1:]  # kept
            else:
                assert told == ["note"], told
                assert any("the user restored the files" in b for b in asked), asked[-1:]

            # Back to where the user started: their repository sees no change.
            await ws.call("turn.revert", {"session_id": e.sid, "turn_id": t1})
            assert _hashes(project) == original
            assert git(project, "status", "--porcelain") == ""
            e.assert_same_agent()


@needs_codex
async def test_sandboxed_codex_restores_its_conversation_after_a_backend_restart(
    provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "codex"
    project = _project(tmp_path / "projects" / "app")
    root = project.parent
    data_dir = tmp_path / "data"
    cfg = _profile(data_dir, name, provider, tmp_path, monkeypatch, persist=True)
    original = _hashes(project)
    provider.edit_plan = EditPlan(str(project), (FileEdit("notes.txt", NOTES, NOTES_EDITED),))
    with trio.fail_after(TEST_S):
        async with _agents_checked() as (pgids, seen):
            async with _server(data_dir, cfg, root) as srv, ws_client(srv) as ws, \
                    _e2e_session(srv, ws, name, provider, pgids, seen, project=project) as e:
                assert _sandboxed(e.pgid), "codex does not run under bwrap"
                first_pgid, sid, task_id = e.pgid, e.sid, e.task_id
                t1, files = await _edit_turn(e, f"EDIT: remember the word {MARKER}, then "
                                                "update the notes")
                assert [f["path"] for f in files] == ["notes.txt"]
            # The backend is gone, and the agent with it.
            await assert_gone(first_pgid, seen | {first_pgid})

            seen_requests = len(provider.requests)
            async with _server(data_dir, cfg, root) as srv, ws_client(srv) as ws, \
                    _e2e_session(srv, ws, name, provider, pgids, seen, task_id=task_id,
                                 sid=sid) as e:
                mark, t2 = await e.prompt("QUICK: which word did I ask you to remember?")
                assert await e.turn_end(mark, t2) == "end_turn"
                ex = srv.sup.lifecycle.executions.get(sid)
                assert ex is not None and ex.agent.pgid not in (None, first_pgid), \
                    "the turn after the restart did not start a new agent"
                pgids.add(ex.agent.pgid)
                seen.update(descendants(ex.agent.pgid))
                assert _sandboxed(ex.agent.pgid), "the restarted agent does not run under bwrap"
                asked = [b for b in _posts_since(provider, seen_requests)
                         if "which word did I ask you" in b]
                assert asked, "the provider never got the prompt after the restart"
                assert any(MARKER in b for b in asked), \
                    "the restored conversation forgot the turn before the restart"
                assert not [m for m in await e.messages()
                            if m["content"] == RESTORE_FAILED_STATUS]

                # The checkpoints outlived the restart too.
                reverted = await ws.call("turn.revert", {"session_id": sid, "turn_id": t1})
                assert reverted["later_turns"] == [t2], reverted
                assert _hashes(project) == original
                assert git(project, "status", "--porcelain") == ""
