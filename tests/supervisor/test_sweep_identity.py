"""The startup sweep kills a recorded agent group only while its id is still
ours (issue 17, item 3): a pgid reused by an unrelated process survives."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from protocols.process import may_sweep, process_identity, start_ticks
from supervisor.storage.db import _MIGRATIONS, SCHEMA_VERSION, Db
from supervisor.turn.recovery import recover


def _db(tmp_path: Path) -> tuple[Db, str]:
    db = Db(tmp_path / "t.db")
    task = db.create_task(db.ensure_workspace("default"), "t")
    return db, db.create_session(task.id, "mock").id


def _sleeper() -> subprocess.Popen[bytes]:
    """An unrelated live process leading its own group (a shell job, say)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            process_group=0)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_start_ticks_counts_fields_after_the_last_parenthesis() -> None:
    tail = " ".join(str(n) for n in range(3, 53))  # fields 3..52 hold their own number
    assert start_ticks(f"123 (a) b) (c d) {tail}".encode()) == 22
    assert start_ticks(b"123 (x) S 1 2") is None
    me = process_identity(os.getpid())
    assert me is not None and me == process_identity(os.getpid())
    assert process_identity(2**22 + 12345) is None  # above pid_max: no such process


def test_the_rule() -> None:
    assert may_sweep("b:100", "b:100")       # our leader, still alive
    assert not may_sweep("b:100", "b:101")   # the pid was reused
    assert not may_sweep("b:100", "c:100")   # another boot
    assert not may_sweep(None, "b:100")      # no identity recorded: cannot tell
    assert may_sweep("b:100", None)          # leader gone: the group id is still ours
    assert may_sweep(None, None)


def test_a_reused_pgid_of_an_unrelated_process_survives(tmp_path: Path) -> None:
    db, sid = _db(tmp_path)
    unrelated = _sleeper()
    try:
        ident = process_identity(unrelated.pid)
        assert ident is not None
        boot, ticks = ident.rsplit(":", 1)
        # Forged: what a dead backend recorded for the agent that had this pid before.
        db.record_agent_group(unrelated.pid, sid, "codex app-server",
                              leader=f"{boot}:{int(ticks) - 1}")
        assert recover(db)["swept_groups"] == 0
        time.sleep(0.1)
        assert unrelated.poll() is None and _alive(unrelated.pid)
        assert db.agent_groups() == []  # forgotten all the same
    finally:
        unrelated.kill()
        unrelated.wait()


def test_our_group_is_killed_leader_alive_or_gone(tmp_path: Path) -> None:
    db, sid = _db(tmp_path)
    # Leader alive: identity read at record time (as the lifecycle records it).
    ours = _sleeper()
    db.record_agent_group(ours.pid, sid, "agent", leader=process_identity(ours.pid))
    # Leader gone, a member left in its group (an agent's child).
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 60 </dev/null >/dev/null 2>&1 & echo $!"],
        stdout=subprocess.PIPE, process_group=0)
    assert leader.stdout is not None
    with leader.stdout:
        member = int(leader.stdout.readline())
    db.record_agent_group(leader.pid, sid, "agent with a child",
                          leader=process_identity(leader.pid))
    leader.wait()
    assert _alive(member)
    assert recover(db)["swept_groups"] == 2
    assert ours.wait(timeout=5) == -signal.SIGKILL
    deadline = time.monotonic() + 5
    while _alive(member) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(member)


def test_rows_from_before_the_migration(tmp_path: Path) -> None:
    """A database of schema 1 gains the column; its rows have no identity, so
    a live process at that pid is not killed (it cannot be told apart)."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(f"{_MIGRATIONS[0]}; PRAGMA user_version = 1;")
    unrelated = _sleeper()
    try:
        conn.execute("INSERT INTO agent_groups VALUES (?, 's', 'old', 'then')", (unrelated.pid,))
        conn.commit()
        conn.close()
        db = Db(path)
        assert db.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.agent_group_leaders() == {unrelated.pid: None}
        assert recover(db)["swept_groups"] == 0
        assert unrelated.poll() is None
    finally:
        unrelated.kill()
        unrelated.wait()
