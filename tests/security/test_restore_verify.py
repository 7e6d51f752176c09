"""``turnvisor restore`` verifies the backup's schema (issue 40, item 10).

The attack: a backup carrying a trigger (every new session's ``cwd`` set to a
root-owned directory) was restored as it was, and the server then ran with
it.  Here a genuine backup is made with ``turnvisor backup`` from the data
dir of a real ``turnvisor serve`` that ran a turn; each tampered copy of it
(an added trigger, view or index, a table's changed definition, a dropped or
redefined index, a lying schema version) is refused by the real command with
one line naming what differs, and the data dir's database is left as it was.
The genuine backup restores, and so does every kept old schema version.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures import make_schema_fixture as fx
from tests.support.serverproc import REPO_ROOT, start_blocking_server

TOKEN = "restore-verify-test-token-0123456789abcd"


def turnvisor(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("turnvisor")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "web"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=120,
                          check=False, stdin=subprocess.DEVNULL, cwd=REPO_ROOT)


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A backup of a real data dir: a server that ran a turn, stopped, backed up."""
    root = tmp_path_factory.mktemp("genuine")
    data = root / "data"
    server = start_blocking_server(data, token=TOKEN)
    try:
        ran = turnvisor("run", "--url", server.url, "--token", TOKEN, "--agent", "mock",
                        "hello", "--data-dir", str(data))
        assert ran.returncode == 0, ran.stderr
    finally:
        server.stop()
    backup = root / "backup.db"
    done = turnvisor("backup", str(backup), "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    return backup


@pytest.fixture
def target(genuine: Path, tmp_path: Path) -> Path:
    """A stopped data dir with a database of its own (the genuine one, restored)."""
    data = tmp_path / "target"
    done = turnvisor("restore", str(genuine), "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    return data


def tampered(genuine: Path, into: Path, *sql: str, writable_schema: bool = False) -> Path:
    path = into / "tampered.db"
    shutil.copy(genuine, path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        if writable_schema:
            conn.execute("PRAGMA writable_schema = ON")
        for statement in sql:
            conn.execute(statement)
    finally:
        conn.close()
    return path


def test_a_genuine_backup_restores(genuine: Path, target: Path) -> None:
    # Into a data dir that has a database: it is replaced (and kept beside).
    done = turnvisor("restore", str(genuine), "--data-dir", str(target))
    assert done.returncode == 0, done.stderr
    assert "(schema " in done.stdout and "1 tasks" in done.stdout, done.stdout
    assert "previous database is kept" in done.stdout
    conn = sqlite3.connect(target / "turnvisor.db")
    try:
        assert conn.execute("SELECT COUNT(*) FROM task_sessions").fetchone()[0] == 1
        assert conn.execute("SELECT COUNT(*) FROM messages WHERE role = 'user'"
                            ).fetchone()[0] == 1
    finally:
        conn.close()


ATTACKS: dict[str, tuple[list[str], bool, str]] = {
    # The attack seen: every new session pinned to a root-owned cwd.
    "trigger": (["CREATE TRIGGER pin_cwd AFTER INSERT ON task_sessions BEGIN "
                 "UPDATE task_sessions SET cwd = '/root' WHERE id = NEW.id; END"], False,
                "trigger pin_cwd on task_sessions is not in it"),
    "view": (["CREATE VIEW everything AS SELECT * FROM tasks"], False,
             "view everything is not in it"),
    "index": (["CREATE INDEX tasks_by_title ON tasks(title)"], False,
              "index tasks_by_title on tasks is not in it"),
    # Same columns, a default that sends new sessions elsewhere.
    "changed table": (["UPDATE sqlite_master SET sql = replace(sql, 'cwd TEXT,', "
                       "'cwd TEXT DEFAULT ''/root'',') WHERE name = 'task_sessions'"], True,
                      "table task_sessions differs"),
    "dropped index": (["DROP INDEX messages_by_session"], False,
                      "index messages_by_session is missing"),
    "redefined index": (["DROP INDEX tasks_by_workspace",
                         "CREATE INDEX tasks_by_workspace ON tasks(title)"], False,
                        "index tasks_by_workspace differs"),
    # Today's tables under an old version's number.
    "version lie": (["PRAGMA user_version = 5"], False, "schema 5 makes"),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_tampered_backup_is_refused(attack: str, genuine: Path, target: Path,
                                      tmp_path: Path) -> None:
    sql, writable, why = ATTACKS[attack]
    hostile = tampered(genuine, tmp_path, *sql, writable_schema=writable)
    db = target / "turnvisor.db"
    before = db.read_bytes()
    done = turnvisor("restore", str(hostile), "--data-dir", str(target))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("turnvisor: "), lines
    assert why in lines[0] and "refused, nothing replaced" in lines[0], lines[0]
    assert db.read_bytes() == before
    assert sorted(p.name for p in target.iterdir() if "restor" in p.name) == []


def test_an_analyzed_backup_restores(genuine: Path, target: Path, tmp_path: Path) -> None:
    # ANALYZE's statistics tables are SQLite's own, data only: not a difference.
    analyzed = tampered(genuine, tmp_path, "ANALYZE")
    done = turnvisor("restore", str(analyzed), "--data-dir", str(target))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("version", sorted(int(p.stem[1:]) for p in fx.FIXTURES.glob("v*.sql")))
def test_every_kept_old_schema_restores(version: int, tmp_path: Path) -> None:
    old = tmp_path / f"v{version}.db"
    fx.load(version, old)
    done = turnvisor("restore", str(old), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    assert f"(schema {version}," in done.stdout
