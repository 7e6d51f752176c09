"""The ``turn_checkpoints`` rows (DESIGN.md §12): per session, in order, each turn's
checkpoints before and after it, and each revert's (before: its safety checkpoint,
after: the checkpoint it restored).  Synchronous; called through ``Store.call``."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Literal

from ..storage.db import Db, now

__all__ = ["Entry", "add_entry", "entries", "entry", "set_after", "set_agent_turn"]

Kind = Literal["turn", "revert"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    seq: int
    id: str
    session_id: str
    kind: Kind
    before_commit: str | None
    after_commit: str | None
    #: The agent's own id of the turn (Codex), for a rewind of its history.
    agent_turn_id: str | None = None


def _entry(r: sqlite3.Row) -> Entry:
    return Entry(seq=r["seq"], id=r["id"], session_id=r["session_id"], kind=r["kind"],
                 before_commit=r["before_commit"], after_commit=r["after_commit"],
                 agent_turn_id=r["agent_turn_id"])


def add_entry(db: Db, entry_id: str, session_id: str, kind: Kind, before: str | None,
              after: str | None = None) -> None:
    with db._tx():
        db.conn.execute(
            "INSERT OR REPLACE INTO turn_checkpoints (id, session_id, kind, before_commit, "
            "after_commit, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (entry_id, session_id, kind, before, after, now()))


def set_after(db: Db, entry_id: str, after: str) -> None:
    with db._tx():
        db.conn.execute("UPDATE turn_checkpoints SET after_commit = ? WHERE id = ?",
                        (after, entry_id))


def set_agent_turn(db: Db, entry_id: str, agent_turn_id: str) -> None:
    with db._tx():
        db.conn.execute("UPDATE turn_checkpoints SET agent_turn_id = ? WHERE id = ?",
                        (agent_turn_id, entry_id))


def entry(db: Db, session_id: str, entry_id: str) -> Entry | None:
    row = db.conn.execute("SELECT * FROM turn_checkpoints WHERE session_id = ? AND id = ?",
                          (session_id, entry_id)).fetchone()
    return _entry(row) if row else None


def entries(db: Db, session_id: str) -> list[Entry]:
    rows = db.conn.execute("SELECT * FROM turn_checkpoints WHERE session_id = ? ORDER BY seq",
                           (session_id,)).fetchall()
    return [_entry(r) for r in rows]
