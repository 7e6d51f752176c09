"""tests/support/wal.py counts the transactions in a SQLite write-ahead log:
one per commit whatever its size, none for a rollback, and no count across a
checkpoint that reset the log."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.support.wal import WalCommits


def _db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE t (x)")
    return conn


def test_each_commit_is_one_and_a_rollback_none(tmp_path: Path) -> None:
    conn = _db(tmp_path / "t.db")
    wal = WalCommits(tmp_path / "t.db")
    for _ in range(3):
        conn.execute("INSERT INTO t VALUES (?)", ("x" * 20000,))  # pages over several frames
    assert wal.since() == 3
    conn.execute("BEGIN")
    for i in range(50):
        conn.execute("INSERT INTO t VALUES (?)", (i,))
    conn.execute("COMMIT")
    assert wal.since() == 4
    conn.execute("BEGIN")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.execute("ROLLBACK")
    assert wal.since() == 4
    conn.close()


def test_a_checkpoint_that_reset_the_log_fails_the_count(tmp_path: Path) -> None:
    conn = _db(tmp_path / "t.db")
    wal = WalCommits(tmp_path / "t.db")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("INSERT INTO t VALUES (2)")
    with pytest.raises(AssertionError, match="reset by a checkpoint"):
        wal.since()
    conn.close()
