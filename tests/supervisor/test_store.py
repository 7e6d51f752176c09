"""Store: schema, exactly-once turn closing, successor turns, recovery."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from protocols.process import process_identity
from supervisor.models import SessionState
from supervisor.storage.db import SCHEMA_VERSION, Db
from supervisor.turn.recovery import RESTART_STATUS, recover


def _db(tmp_path: Path) -> tuple[Db, str]:
    db = Db(tmp_path / "t.db")
    ws = db.ensure_workspace("default")
    task = db.create_task(ws, "t")
    return db, db.create_session(task.id, "mock").id


def test_schema_is_versioned_and_reopens(tmp_path: Path) -> None:
    db = Db(tmp_path / "t.db")
    assert db.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()
    Db(tmp_path / "t.db").close()


def test_close_turn_is_exactly_once(tmp_path: Path) -> None:
    db, sid = _db(tmp_path)
    turn, _, session, _ = db.open_turn(sid, "hi")
    assert session.state is SessionState.RUNNING and session.current_turn_id == turn.id
    status = ("Turn cancelled by user", {"cancelled": True, "variant": "warning"})
    closed, msg, after, _ = db.close_turn(turn.id, state="cancelled",
                                          stop_reason="cancelled", status=status)
    assert closed and msg is not None and after is not None
    assert after.state is SessionState.WAITING_FOR_INPUT and after.current_turn_id is None
    again = db.close_turn(turn.id, state="cancelled", stop_reason="cancelled", status=status)
    assert again == (False, None, None, None)
    assert db.count_status_messages(turn.id) == 1


def test_the_close_parks_and_the_open_resumes_the_queue_in_their_transaction(
        tmp_path: Path) -> None:
    db, sid = _db(tmp_path)
    turn, _, _, resumed = db.open_turn(sid, "one", resume_queue=True)
    assert resumed is None  # a queue runs by default: nothing to resume
    _, _, _, parked = db.close_turn(turn.id, state="cancelled", stop_reason="cancelled",
                                    park_queue=True)
    assert parked is not None and parked.auto_run is False and parked.revision == 1
    assert db.queue_state(sid).auto_run is False
    turn, _, _, _ = db.open_turn(sid, "two")  # not asked to: stays parked
    assert db.queue_state(sid).auto_run is False
    _, _, _, again = db.close_turn(turn.id, state="cancelled", stop_reason="cancelled",
                                   park_queue=True)
    assert again is None  # already parked: no new revision to announce
    _, _, _, resumed = db.open_turn(sid, "three", resume_queue=True)
    assert resumed is not None and resumed.auto_run is True and resumed.revision == 2


def test_a_successor_turn_is_never_closed(tmp_path: Path) -> None:
    db, sid = _db(tmp_path)
    first, _, _, _ = db.open_turn(sid, "one")
    db.close_turn(first.id, state="completed", stop_reason="end_turn")
    second, _, _, _ = db.open_turn(sid, "two")
    # A late reconciliation of the first turn must not touch the second.
    assert db.close_turn(first.id, state="cancelled", stop_reason="cancelled")[0] is False
    session = db.get_session(sid)
    assert session is not None
    assert session.state is SessionState.RUNNING and session.current_turn_id == second.id
    assert db.get_turn(second.id).state == "running"  # type: ignore[union-attr]


def test_messages_page_backwards(tmp_path: Path) -> None:
    db, sid = _db(tmp_path)
    ids = [db.add_message(sid, None, "agent", "text", str(i)).id for i in range(5)]
    assert [m.content for m in db.list_messages(sid, limit=2)] == ["3", "4"]
    assert [m.content for m in db.list_messages(sid, limit=2, before=ids[3])] == ["1", "2"]


def test_recovery_reconciles_running_sessions_and_sweeps_groups(tmp_path: Path) -> None:
    db, sid = _db(tmp_path)
    turn, _, _, _ = db.open_turn(sid, "interrupted by a crash")
    # An orphaned agent group left by a dead backend.
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              process_group=0)
    db.record_agent_group(orphan.pid, sid, "sleep", leader=process_identity(orphan.pid))
    result = recover(db)
    assert result == {"swept_groups": 1, "reconciled_sessions": 1}
    assert orphan.wait(timeout=5) == -signal.SIGKILL
    session = db.get_session(sid)
    assert session is not None and session.state is SessionState.WAITING_FOR_INPUT
    msgs = db.list_messages(sid)
    assert msgs[-1].content == RESTART_STATUS
    assert db.get_turn(turn.id).state == "interrupted"  # type: ignore[union-attr]
    assert db.agent_groups() == []
    assert recover(db) == {"swept_groups": 0, "reconciled_sessions": 0}


def test_the_sessions_index_is_not_rewritten_by_state_changes(tmp_path: Path) -> None:
    """Sessions are listed by creation; an index on updated_at was moved by every
    turn's open and close (a page more in each of their commits)."""
    db, _ = _db(tmp_path)
    cols = [r["name"] for r in db.conn.execute("PRAGMA index_info(sessions_by_task)")]
    assert cols == ["task_id", "created_at"]
    plan = " ".join(r["detail"] for r in db.conn.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM task_sessions WHERE task_id = ? ORDER BY created_at",
        ("t",)))
    assert "sessions_by_task" in plan and "TEMP B-TREE" not in plan


def test_the_task_list_order_follows_activity_not_renames(tmp_path: Path) -> None:
    """A new task or a new session moves a task up; a rename or an archive does not."""
    db = Db(tmp_path / "t.db")
    ws = db.ensure_workspace("default")
    a, b, _c = (db.create_task(ws, name) for name in "abc")

    def order() -> list[str]:
        return [t.title for t in db.list_tasks([ws])]

    assert order() == ["c", "b", "a"]
    db.update_task(a.id, title="a2")
    db.update_task(b.id, archived=True)
    assert order() == ["c", "b", "a2"]
    time.sleep(0.002)  # stamps have milliseconds
    db.update_task(a.id, title="a3")
    renamed = db.get_task(a.id)
    assert renamed is not None and renamed.updated_at > renamed.to_dto()["active_at"]
    db.create_session(a.id, "mock")
    assert order() == ["a3", "c", "b"]
    db.close()
