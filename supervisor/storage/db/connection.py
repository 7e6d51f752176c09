"""The connection: the file made private, SQLite's settings, the migrations
run, and the one transaction shape (``_Tx``).  The row modules build on it."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from .schema import migrate

__all__ = ["Checkpointer", "Connection", "private_file"]


def private_file(path: Path | str) -> None:
    """Create the database file 0600 before SQLite opens it (or make an old
    one so): SQLite gives its -wal and -shm files the database's mode."""
    if str(path) == ":memory:" or str(path).startswith("file:"):
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        if side.is_file():
            os.chmod(side, 0o600)


class Checkpointer:
    """A connection of its own that checkpoints the WAL (``Db.hand_over_checkpoints``):
    a passive checkpoint copies what it can without blocking the writers.  Kept
    open for the store's life (SQLite keeps a closed connection's descriptor
    while another connection of the process holds a lock on the file)."""

    def __init__(self, path: Path | str) -> None:
        self.conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        # Opens the WAL now (its descriptor then stays the same for the store's life).
        self.checkpoint()

    def checkpoint(self) -> None:
        self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def close(self) -> None:
        self.conn.close()



class Connection:
    """One SQLite connection with Turnvisor's settings (callers serialize)."""

    def __init__(self, path: Path | str, *, busy_timeout_s: float = 30.0) -> None:
        self.path = path
        private_file(path)
        self.conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        # How long a write waits for a lock another connection holds (a backup, a
        # sqlite3 shell) before it fails: long enough to ride out seconds of
        # contention rather than fail a turn's write.
        self.busy_timeout_s = busy_timeout_s
        self.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.execute("PRAGMA foreign_keys = ON")
        #: Transactions committed on this connection (the checkpointer's pace).
        self.commits = 0
        migrate(self.conn)

    def close(self) -> None:
        self.conn.close()

    def fail_fast(self) -> None:
        """From now on a statement that meets another connection's lock fails
        at once (``database is locked``) instead of waiting ``busy_timeout``:
        the store waits (and retries) off the Trio thread itself."""
        self.conn.execute("PRAGMA busy_timeout = 0")

    def hand_over_checkpoints(self) -> None:
        """From now on the WAL is checkpointed by ``checkpoint`` on another
        connection, not by whichever commit crosses SQLite's threshold (that
        commit would take tens of milliseconds)."""
        self.conn.execute("PRAGMA wal_autocheckpoint = 0")

    def _tx(self) -> _Tx:
        return _Tx(self)


class _Tx:
    """BEGIN IMMEDIATE … COMMIT/ROLLBACK (writers take the lock up front, so a
    busy database fails fast at BEGIN rather than mid-transaction)."""

    def __init__(self, db: Connection) -> None:
        self.db = db
        self.conn = db.conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.conn.execute("ROLLBACK" if exc_type else "COMMIT")
        if not exc_type:
            self.db.commits += 1
