"""Each session's queue of messages waiting for a turn (DESIGN.md §9).

Every change renumbers the session's positions 0..n-1 and bumps its
revision in the same transaction, and returns the committed snapshot."""

from __future__ import annotations

import json
from typing import Any

from ...models import Message, QueueEntry, QueueState
from .connection import Connection
from .values import QueueFull, new_id, now, storable

__all__ = ["QueueRows"]


def _parts(raw: str | None) -> dict[str, Any] | None:
    return json.loads(raw) if raw else None


class QueueRows(Connection):
    def queue_state(self, session_id: str) -> QueueState:
        row = self.conn.execute(
            "SELECT auto_run, revision FROM session_queues WHERE session_id = ?",
            (session_id,)).fetchone()
        rows = self.conn.execute(
            "SELECT * FROM queue_entries WHERE session_id = ? ORDER BY position",
            (session_id,)).fetchall()
        entries = tuple(QueueEntry(id=r["id"], session_id=session_id, content=r["content"],
                                   created_at=r["created_at"], position=i,
                                   client_message_id=r["client_message_id"],
                                   parts=_parts(r["parts"]))
                        for i, r in enumerate(rows))
        return QueueState(session_id=session_id, entries=entries,
                          auto_run=bool(row["auto_run"]) if row else True,
                          revision=int(row["revision"]) if row else 0)

    def _queue_commit(self, session_id: str, order: list[str] | None,
                      auto_run: bool | None = None) -> None:
        """Inside a transaction: write the new order (entry ids) and/or flag, bump the revision."""
        if order is not None:
            for i, entry_id in enumerate(order):
                self.conn.execute("UPDATE queue_entries SET position = ? WHERE id = ?",
                                  (i, entry_id))
        self.conn.execute(
            "INSERT INTO session_queues (session_id, auto_run, revision) VALUES (?, ?, 1) "
            "ON CONFLICT(session_id) DO UPDATE SET revision = revision + 1, "
            "auto_run = COALESCE(?, auto_run)",
            (session_id, 1 if auto_run is None else int(auto_run),
             None if auto_run is None else int(auto_run)))

    def _queue_ids(self, session_id: str) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT id FROM queue_entries WHERE session_id = ? ORDER BY position",
            (session_id,))]

    def queue_add(self, session_id: str, content: str, *, max_entries: int,
                  head: bool = False, entry_id: str | None = None,
                  created_at: str | None = None, client_message_id: str | None = None,
                  parts: dict[str, Any] | None = None,
                  ) -> tuple[QueueEntry, QueueState]:
        """Append (or, with ``head``, put first) an entry; ``QueueFull`` beyond ``max_entries``."""
        eid = entry_id or new_id()
        with self._tx():
            ids = self._queue_ids(session_id)
            if len(ids) >= max_entries:
                raise QueueFull(f"the queue already holds {max_entries} messages")
            self.conn.execute(
                "INSERT INTO queue_entries (id, session_id, content, position, created_at, "
                "client_message_id, parts) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (eid, session_id, storable(content), len(ids), created_at or now(),
                 client_message_id, json.dumps(parts) if parts else None))
            self._queue_commit(session_id, [eid, *ids] if head else None)
        state = self.queue_state(session_id)
        entry = next(e for e in state.entries if e.id == eid)
        return entry, state

    def queue_update(self, session_id: str, entry_id: str, content: str) -> QueueState | None:
        with self._tx():
            changed = self.conn.execute(
                "UPDATE queue_entries SET content = ? WHERE id = ? AND session_id = ?",
                (storable(content), entry_id, session_id)).rowcount
            if not changed:
                return None
            self._queue_commit(session_id, None)
        return self.queue_state(session_id)

    def queue_move(self, session_id: str, entry_id: str, position: int) -> QueueState | None:
        """Move an entry to ``position`` (clamped to the end)."""
        with self._tx():
            ids = self._queue_ids(session_id)
            if entry_id not in ids:
                return None
            ids.remove(entry_id)
            ids.insert(min(position, len(ids)), entry_id)
            self._queue_commit(session_id, ids)
        return self.queue_state(session_id)

    def queue_take(self, session_id: str, entry_id: str | None = None, *,
                   only_if_auto_run: bool = False) -> tuple[QueueEntry | None, QueueState]:
        """Remove and return an entry (by default the head); None if there is
        none (or, with ``only_if_auto_run``, if the queue is parked)."""
        with self._tx():
            ids = self._queue_ids(session_id)
            target = entry_id if entry_id is not None else (ids[0] if ids else None)
            taken: QueueEntry | None = None
            if target is not None and target in ids:
                if only_if_auto_run and not self.queue_state(session_id).auto_run:
                    return None, self.queue_state(session_id)
                row = self.conn.execute("SELECT * FROM queue_entries WHERE id = ?",
                                        (target,)).fetchone()
                taken = QueueEntry(id=row["id"], session_id=session_id,
                                   content=row["content"], created_at=row["created_at"],
                                   position=ids.index(target),
                                   client_message_id=row["client_message_id"],
                                   parts=_parts(row["parts"]))
                self.conn.execute("DELETE FROM queue_entries WHERE id = ?", (target,))
                ids.remove(target)
                self._queue_commit(session_id, ids)
        return taken, self.queue_state(session_id)

    def find_client_message(self, session_id: str,
                            client_message_id: str) -> Message | QueueEntry | None:
        """What an earlier ``message.add`` with this id made: the user message
        (started or steered), else the entry still queued."""
        row = self.conn.execute(
            "SELECT * FROM messages WHERE session_id = ? AND role = 'user' AND "
            "json_extract(metadata, '$.client_message_id') = ? ORDER BY seq LIMIT 1",
            (session_id, client_message_id)).fetchone()
        if row is not None:
            return Message.from_row(row)
        entry = next((e for e in self.queue_state(session_id).entries
                      if e.client_message_id == client_message_id), None)
        return entry

    def queue_set_auto_run(self, session_id: str, auto_run: bool) -> QueueState | None:
        """Set the flag; the new state if it changed, else None."""
        with self._tx():
            if not self._set_auto_run(session_id, auto_run):
                return None
        return self.queue_state(session_id)

    def _set_auto_run(self, session_id: str, auto_run: bool) -> bool:
        """Inside a transaction: set the flag if it differs; whether it changed."""
        row = self.conn.execute("SELECT auto_run FROM session_queues WHERE session_id = ?",
                                (session_id,)).fetchone()
        if (bool(row["auto_run"]) if row else True) == auto_run:
            return False
        self._queue_commit(session_id, None, auto_run)
        return True
