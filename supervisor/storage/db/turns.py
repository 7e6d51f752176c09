"""Turns: opened with the user's message, closed exactly once (with what the
close changes of the session and its queue), and a running turn's handover
position (agentctl's seq)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from ...models import Message, QueueState, Session, SessionState, StopReason, Turn, TurnState
from .messages import MessageRows
from .queues import QueueRows
from .sessions import SESSION_COLS, SessionRows, session_of
from .values import ClosedRow, TurnClose, new_id, now

__all__ = ["TurnRows"]


class TurnRows(SessionRows, MessageRows, QueueRows):
    def open_turn(self, session_id: str, prompt: str, *, resume_queue: bool = False,
                  client_message_id: str | None = None,
                  metadata: Mapping[str, Any] | None = None,
                  ) -> tuple[Turn, Message, Session, QueueState | None]:
        """Start a turn: the turn row, the user's message, session RUNNING — atomically.

        ``resume_queue``: in the same transaction, a parked queue resumes (a
        message the user sent directly); the queue's new state if it changed."""
        ts = now()
        turn = Turn(id=new_id(), session_id=session_id, state="running", stop_reason=None,
                    started_at=ts, ended_at=None)
        meta: dict[str, Any] = dict(metadata or {})  # (its attachments, mentions: §19)
        if client_message_id is not None:
            meta["client_message_id"] = client_message_id
        msg = Message(id=new_id(), session_id=session_id, turn_id=turn.id, role="user",
                      kind="text", content=prompt, metadata=meta, created_at=ts)
        with self._tx():
            self.conn.execute("INSERT INTO turns (id, session_id, state, stop_reason, "
                              "started_at, ended_at) VALUES (?, ?, 'running', NULL, ?, NULL)",
                              (turn.id, session_id, ts))
            self._insert_message(msg)
            self.conn.execute(
                "UPDATE task_sessions SET state = ?, current_turn_id = ?, updated_at = ? "
                "WHERE id = ?", (SessionState.RUNNING.value, turn.id, ts, session_id),
            )
            resumed = resume_queue and self._set_auto_run(session_id, True)
        session = self.get_session(session_id)
        assert session is not None
        return turn, msg, session, self.queue_state(session_id) if resumed else None

    def get_turn(self, turn_id: str) -> Turn | None:
        row = self.conn.execute("SELECT * FROM turns WHERE id = ?", (turn_id,)).fetchone()
        if row is None:
            return None
        return Turn(id=row["id"], session_id=row["session_id"],
                    state=cast(TurnState, row["state"]),
                    stop_reason=cast(StopReason | None, row["stop_reason"]),
                    started_at=row["started_at"], ended_at=row["ended_at"])

    def close_turn(
        self,
        turn_id: str,
        *,
        state: TurnState,
        stop_reason: StopReason,
        status: tuple[str, dict[str, Any]] | None = None,
        session_state: SessionState = SessionState.WAITING_FOR_INPUT,
        park_queue: bool = False,
        text: Sequence[Message] = (),
    ) -> ClosedRow:
        """Close a running turn exactly once.

        Returns (closed by this call, the status message added, the session
        if this call moved it, the queue's state if this call parked it).
        The session moves only if it still points at this turn: a successor
        turn is never touched.  ``park_queue`` parks the session's queue in
        the same transaction (one commit on the cancel path, not two), and
        ``text`` (messages grown by the turn's last streamed text) is written
        in it too, whether or not this call closes the turn.
        """
        return self.close_turns([TurnClose(turn_id, state, stop_reason, status, session_state,
                                           park_queue, tuple(text))])[0]

    def close_turns(self, closes: Sequence[TurnClose]) -> list[ClosedRow]:
        """``close_turn`` for each of ``closes``, in one transaction (one
        commit for turns that ended together: ``supervisor.storage.close_group``)."""
        ts = now()
        with self._tx():
            return [self._close_in_tx(close, ts) for close in closes]

    def _close_in_tx(self, close: TurnClose, ts: str) -> ClosedRow:
        """Inside a transaction.  What a close reads back comes from its own
        UPDATEs (RETURNING): no query of its own on the cancel's path."""
        if close.text:
            self._update_messages(close.text)
        rows = self.conn.execute(
            "UPDATE turns SET state = ?, stop_reason = ?, ended_at = ? "
            "WHERE id = ? AND state = 'running' RETURNING session_id",
            (close.state, close.stop_reason, ts, close.turn_id),
        ).fetchall()
        if not rows:
            return False, None, None, None
        session_id: str = rows[0]["session_id"]
        msg = None
        if close.status is not None:
            content, metadata = close.status
            msg = Message(id=new_id(), session_id=session_id, turn_id=close.turn_id,
                          role="system", kind="status", content=content,
                          metadata=metadata, created_at=ts)
            self._insert_message(msg)
        # Parked first: the session returned below shows the queue as it is now.
        parked = close.park_queue and self._set_auto_run(session_id, False)
        # DESIGN.md §15: the turn's end needs the person until seen (an error:
        # "failed"); a cancel is the person's own doing and adds nothing.
        moved = self.conn.execute(
            "UPDATE task_sessions SET state = ?, current_turn_id = NULL, updated_at = ?, "
            "attention = CASE ? WHEN 'cancelled' THEN attention WHEN 'failed' THEN 'failed' "
            "ELSE 'turn_ended' END "
            f"WHERE id = ? AND current_turn_id = ? RETURNING {SESSION_COLS}",
            (close.session_state.value, ts, close.state, session_id, close.turn_id),
        ).fetchall()
        return (True, msg, session_of(moved[0]) if moved else None,
                self.queue_state(session_id) if parked else None)

    def set_receipt(self, turn_id: str, receipt: dict[str, Any],
                    status: Message | None) -> Message | None:
        """DESIGN.md §18: the turn's stop receipt, and the same in its status
        message's metadata (that message as updated, to announce)."""
        with self._tx():
            self.conn.execute("UPDATE turns SET receipt = ? WHERE id = ?",
                              (json.dumps(receipt), turn_id))
            if status is None:
                return None
            msg = dataclasses.replace(status, metadata=status.metadata | {"receipt": receipt})
            self._update_messages([msg])
        return msg

    def set_turn_usage(self, turn_id: str, usage: dict[str, Any]) -> None:
        """DESIGN.md §19: the turn's context usage as the agent last reported it."""
        with self._tx():
            self.conn.execute("UPDATE turns SET usage = ? WHERE id = ?",
                              (json.dumps(usage), turn_id))

    def get_receipt(self, turn_id: str) -> tuple[str, dict[str, Any] | None] | None:
        """The turn's session and its receipt (None: no such turn)."""
        row = self.conn.execute("SELECT session_id, receipt FROM turns WHERE id = ?",
                                (turn_id,)).fetchone()
        if row is None:
            return None
        return row["session_id"], (json.loads(row["receipt"]) if row["receipt"] else None)

    def recent_receipts(self, limit: int) -> list[tuple[str, dict[str, Any]]]:
        """The latest ``limit`` receipts with their session's agent profile, newest first."""
        rows = self.conn.execute(
            "SELECT s.agent, t.receipt FROM turns t JOIN task_sessions s ON s.id = t.session_id "
            "WHERE t.receipt IS NOT NULL ORDER BY t.ended_at DESC LIMIT ?", (limit,)).fetchall()
        return [(row["agent"], json.loads(row["receipt"])) for row in rows]

    def set_turn_handover(self, turn_id: str, seq: int) -> None:
        """Turn ``turn_id``'s event stream is written down up to ``seq`` (never moves back)."""
        with self._tx():
            self.conn.execute(
                "INSERT INTO turn_handovers (turn_id, seq) VALUES (?, ?) ON CONFLICT(turn_id) "
                "DO UPDATE SET seq = MAX(seq, excluded.seq)", (turn_id, seq))

    def turn_handover(self, turn_id: str) -> int | None:
        """The recorded position of a running turn's event stream (None: none)."""
        row = self.conn.execute(
            "SELECT h.seq FROM turn_handovers h JOIN turns t ON t.id = h.turn_id "
            "WHERE h.turn_id = ? AND t.state = 'running'", (turn_id,)).fetchone()
        return None if row is None else int(row[0])

    def hold_turn_cancel(self, turn_id: str, accepted_at: float) -> bool:
        """A cancel of handed-over turn ``turn_id``, accepted at ``accepted_at``
        (unix seconds), waits for its agent's host (the first one is kept).
        False: no position is recorded for the turn (it cannot be taken over)."""
        with self._tx():
            cur = self.conn.execute(
                "UPDATE turn_handovers SET cancel_held_at = COALESCE(cancel_held_at, ?) "
                "WHERE turn_id = ?", (accepted_at, turn_id))
        return cur.rowcount > 0

    def turn_cancel_held(self, turn_id: str) -> float | None:
        """When a held cancel of running turn ``turn_id`` was accepted (None: none)."""
        row = self.conn.execute(
            "SELECT h.cancel_held_at FROM turn_handovers h JOIN turns t ON t.id = h.turn_id "
            "WHERE h.turn_id = ? AND t.state = 'running'", (turn_id,)).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def forget_turn_handovers(self) -> None:
        """Drop the positions of turns no longer running (once, at startup)."""
        with self._tx():
            self.conn.execute(
                "DELETE FROM turn_handovers WHERE turn_id IN "
                "(SELECT id FROM turns WHERE state != 'running')")
