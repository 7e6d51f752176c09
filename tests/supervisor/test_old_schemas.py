"""Every schema since the first opens with its data intact (issue 32, item 6).

``tests/fixtures/schemas/vN.sql`` is a database of schema N made by the
migrations' own history (``python -m tests.fixtures.make_schema_fixture N``);
each is loaded into a file, opened by today's ``Db`` (which migrates it) and
read back through its API.  A new migration without its fixture fails
``test_every_schema_version_has_a_fixture``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from supervisor.models import AgentSessionRef, SessionState
from supervisor.storage.db import SCHEMA_VERSION, Db
from tests.fixtures import make_schema_fixture as fx

VERSIONS = sorted(int(p.stem[1:]) for p in fx.FIXTURES.glob("v*.sql"))
#: The first version of each thing the fixtures hold (``_MIGRATIONS`` order).
LEADER, TAG, TITLES, AGENT_SESSION, QUEUES, HANDOVERS, CLIENT_IDS = 2, 3, 4, 5, 6, 7, 9
ATTENTION = 13
HELD_CANCELS = 17


def test_every_schema_version_has_a_fixture() -> None:
    missing = sorted(set(range(1, SCHEMA_VERSION + 1)) - set(VERSIONS))
    assert not missing, (
        f"no fixture for schema version(s) {missing}: run "
        f"`python -m tests.fixtures.make_schema_fixture {missing[-1]}` and commit "
        f"tests/fixtures/schemas/v{missing[-1]}.sql")
    assert max(VERSIONS) == SCHEMA_VERSION


def opened(version: int, tmp_path: Path) -> Db:
    path = tmp_path / f"v{version}.db"
    fx.load(version, path)
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == version
    finally:
        raw.close()
    return Db(path)


@pytest.mark.parametrize("version", VERSIONS)
def test_an_old_database_opens_with_its_data(version: int, tmp_path: Path) -> None:
    db = opened(version, tmp_path)
    try:
        assert db.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.conn.execute("PRAGMA foreign_key_check").fetchall() == []
        rows = fx.ROWS

        assert db.ensure_workspace("default") == fx.WS
        tasks = {t.id: t for t in db.list_tasks([fx.WS])}
        assert set(tasks) == {fx.TASK_A, fx.TASK_B}
        for row in rows["tasks"]:
            task = tasks[row["id"]]
            assert (task.title, task.created_at, task.updated_at) == (
                row["title"], row["created_at"], row["updated_at"])
            assert task.archived is (bool(row["archived"]) and version >= TITLES)
        assert (tasks[fx.TASK_A].session_count, tasks[fx.TASK_A].running_count) == (2, 1)

        sessions = {s.id: s for s in db.list_sessions(fx.TASK_A)}
        for row in rows["task_sessions"]:
            s = sessions[row["id"]]
            assert (s.agent, s.state, s.current_turn_id, s.created_at) == (
                row["agent"], SessionState(row["state"]), row["current_turn_id"],
                row["created_at"])
            assert s.title == (row["title"] if version >= TITLES else None)
            # DESIGN.md §15: what needed the person before the upgrade still does;
            # an older database had no such column (nothing was kept).
            assert s.attention == (row.get("attention") if version >= ATTENTION else None)
            ref = db.get_agent_session(row["id"])
            if version >= AGENT_SESSION and row["agent_session_id"] is not None:
                assert ref == AgentSessionRef(agent_session_id=row["agent_session_id"],
                                              profile=row["agent_profile"],
                                              cwd=row["agent_cwd"])
            else:
                assert ref is None

        for row in rows["turns"]:
            turn = db.get_turn(row["id"])
            assert turn is not None
            assert (turn.session_id, turn.state, turn.stop_reason, turn.ended_at) == (
                row["session_id"], row["state"], row["stop_reason"], row["ended_at"])
        assert db.count_status_messages(fx.T_DONE) == 1

        stored = db.list_messages(fx.S_IDLE) + db.list_messages(fx.S_RUN)
        assert [(m.id, m.session_id, m.turn_id, m.role, m.kind, m.content, m.metadata,
                 m.created_at) for m in stored] == [
            (r["id"], r["session_id"], r["turn_id"], r["role"], r["kind"], r["content"],
             json.loads(r["metadata"]), r["created_at"]) for r in rows["messages"]]

        group = rows["agent_groups"][0]
        assert db.agent_groups() == [(group["pgid"], group["session_id"], group["command"],
                                      group["tag"] if version >= TAG else None)]
        assert db.agent_group_leaders() == {
            group["pgid"]: group["leader"] if version >= LEADER else None}

        queue = db.queue_state(fx.S_IDLE)
        if version >= QUEUES:
            assert [(e.id, e.content, e.position, e.client_message_id)
                    for e in queue.entries] == [
                (r["id"], r["content"], r["position"],
                 r["client_message_id"] if version >= CLIENT_IDS else None)
                for r in rows["queue_entries"]]
            assert (queue.auto_run, queue.revision) == (False, 7)
        else:
            assert (queue.entries, queue.auto_run, queue.revision) == ((), True, 0)
        assert db.turn_handover(fx.T_OPEN) == (42 if version >= HANDOVERS else None)
        assert db.turn_cancel_held(fx.T_OPEN) == (
            1765000000.5 if version >= HELD_CANCELS else None)

        # And it works as a database of today: the writes and look-ups of a
        # running server (the client_message_id indexes came with version 9).
        turn, msg, session, _ = db.open_turn(fx.S_IDLE, "again", client_message_id="c-3")
        assert session.state is SessionState.RUNNING
        assert db.find_client_message(fx.S_IDLE, "c-3") == msg
        entry, _ = db.queue_add(fx.S_IDLE, "more", max_entries=10, client_message_id="c-4")
        assert db.find_client_message(fx.S_IDLE, "c-4") == entry
        closed, _, ended, _ = db.close_turn(turn.id, state="completed", stop_reason="end_turn")
        assert closed and ended is not None and ended.attention == "turn_ended"
        assert db.mark_seen(fx.S_IDLE) is not None
        assert db.get_session(fx.S_IDLE).attention is None  # type: ignore[union-attr]
        assert db.delete_task(fx.TASK_A)
        assert db.conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        db.close()


def test_the_script_refuses_a_version_that_does_not_exist(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert fx.main([str(SCHEMA_VERSION + 1)]) == 2
    assert f"1..{SCHEMA_VERSION}" in capsys.readouterr().err
