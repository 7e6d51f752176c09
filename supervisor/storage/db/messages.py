"""Messages: a session's transcript, oldest first."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...models import Message, MessageKind, Role
from .connection import Connection
from .values import new_id, now, storable

__all__ = ["MessageRows"]


class MessageRows(Connection):
    def _insert_message(self, msg: Message) -> None:
        self.conn.execute(
            "INSERT INTO messages (id, session_id, turn_id, role, kind, content, metadata, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (msg.id, msg.session_id, msg.turn_id, msg.role, msg.kind, storable(msg.content),
             json.dumps(msg.metadata), msg.created_at),
        )

    def add_message(
        self, session_id: str, turn_id: str | None, role: Role, kind: MessageKind, content: str,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        msg = Message(id=new_id(), session_id=session_id, turn_id=turn_id, role=role, kind=kind,
                      content=content, metadata=metadata or {}, created_at=now())
        with self._tx():
            self._insert_message(msg)
        return msg

    def update_message(self, msg: Message) -> None:
        self.update_messages([msg])

    def update_messages(self, msgs: Sequence[Message]) -> None:
        """Several messages' new content and metadata, in one transaction."""
        with self._tx():
            self._update_messages(msgs)

    def _update_messages(self, msgs: Sequence[Message]) -> None:
        self.conn.executemany(
            "UPDATE messages SET content = ?, metadata = ? WHERE id = ?",
            [(storable(m.content), json.dumps(m.metadata), m.id) for m in msgs])

    def list_messages(
        self, session_id: str, *, limit: int = 200, before: str | None = None
    ) -> list[Message]:
        """Oldest first; ``before`` is a message id (page backwards from it)."""
        if before is not None:
            rows = self.conn.execute(
                "SELECT * FROM messages WHERE session_id = ? AND seq < "
                "(SELECT seq FROM messages WHERE id = ?) ORDER BY seq DESC LIMIT ?",
                (session_id, before, limit),
            ).fetchall()
        else:
            rows = self.conn.execute(
                "SELECT * FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
                (session_id, limit),
            ).fetchall()
        return [Message.from_row(r) for r in reversed(rows)]

    def count_status_messages(self, turn_id: str) -> int:
        row = self.conn.execute(
            "SELECT COUNT(*) FROM messages WHERE turn_id = ? AND kind = 'status'", (turn_id,)
        ).fetchone()
        return int(row[0])
