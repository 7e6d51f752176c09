"""Task sessions: their rows, states, and the agent conversation each one keeps."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable

from ...models import AgentSessionRef, Session, SessionState
from .connection import Connection
from .values import new_id, now

__all__ = ["SESSION_COLS", "SessionRows", "session_of"]

# A session row with its task's workspace and its queue's summary, as a SELECT
# from task_sessions and as an UPDATE of it returns it (hence no join and no
# alias: the table's own name qualifies its columns in the subqueries).
SESSION_COLS = (
    "id, task_id, (SELECT workspace_id FROM tasks t WHERE t.id = task_sessions.task_id) "
    "AS workspace_id, agent, state, current_turn_id, created_at, updated_at, title, archived, "
    "(SELECT COUNT(*) FROM queue_entries q WHERE q.session_id = task_sessions.id) "
    "AS queued_count, cwd, worktree, attention, options, title_by_agent, "
    "COALESCE((SELECT auto_run FROM session_queues sq WHERE sq.session_id = task_sessions.id), "
    "1) AS auto_run"
)


def session_of(row: sqlite3.Row) -> Session:
    return Session(
        id=row["id"], task_id=row["task_id"], workspace_id=row["workspace_id"],
        agent=row["agent"], state=SessionState(row["state"]),
        current_turn_id=row["current_turn_id"], created_at=row["created_at"],
        updated_at=row["updated_at"], title=row["title"], archived=bool(row["archived"]),
        queued_count=int(row["queued_count"]), auto_run=bool(row["auto_run"]),
        cwd=row["cwd"], worktree=json.loads(row["worktree"]) if row["worktree"] else None,
        attention=row["attention"],
        options=json.loads(row["options"]) if row["options"] else {},
        title_by_agent=bool(row["title_by_agent"]),
    )



class SessionRows(Connection):
    def create_session(self, task_id: str, agent: str, *, session_id: str | None = None,
                       cwd: str | None = None,
                       worktree: dict[str, str] | None = None) -> Session:
        ts = now()
        sid = session_id or new_id()
        with self._tx():
            self.conn.execute(
                "INSERT INTO task_sessions (id, task_id, agent, state, current_turn_id, "
                "created_at, updated_at, cwd, worktree) VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?)",
                (sid, task_id, agent, SessionState.CREATED.value, ts, ts, cwd,
                 json.dumps(worktree) if worktree else None),
            )
            self.conn.execute("UPDATE tasks SET updated_at = ? WHERE id = ?", (ts, task_id))
        session = self.get_session(sid)
        assert session is not None
        return session

    def get_session(self, session_id: str) -> Session | None:
        row = self.conn.execute(
            f"SELECT {SESSION_COLS} FROM task_sessions WHERE id = ?", (session_id,),
        ).fetchone()
        return session_of(row) if row else None

    def list_sessions(self, task_id: str) -> list[Session]:
        rows = self.conn.execute(
            f"SELECT {SESSION_COLS} FROM task_sessions WHERE task_id = ? ORDER BY created_at",
            (task_id,),
        ).fetchall()
        return [session_of(r) for r in rows]

    def update_session(self, session_id: str, *, title: str | None = None,
                       archived: bool | None = None) -> Session | None:
        """Rename (an empty title clears it) and/or (un)archive; None if not found."""
        with self._tx():
            changed = self.conn.execute(
                "UPDATE task_sessions SET title = CASE WHEN ? THEN NULLIF(?, '') ELSE title END, "
                "title_by_agent = CASE WHEN ? THEN 0 ELSE title_by_agent END, "
                "archived = COALESCE(?, archived), updated_at = ? WHERE id = ?",
                (title is not None, title or "", title is not None,
                 None if archived is None else int(archived), now(), session_id),
            ).rowcount
        return self.get_session(session_id) if changed else None

    def set_agent_title(self, session_id: str, title: str) -> Session | None:
        """DESIGN.md §19: the agent's title for the session, unless the person
        named it; the session if it changed."""
        with self._tx():
            changed = self.conn.execute(
                "UPDATE task_sessions SET title = ?, title_by_agent = 1, updated_at = ? "
                "WHERE id = ? AND (title IS NULL OR title_by_agent = 1) AND "
                "title IS NOT ?", (title, now(), session_id, title)).rowcount
        return self.get_session(session_id) if changed else None

    def choose_option(self, session_id: str, option_id: str, value: str) -> Session | None:
        """DESIGN.md §19: the person's choice of ``option_id``, kept with the session."""
        with self._tx():
            row = self.conn.execute("SELECT options FROM task_sessions WHERE id = ?",
                                    (session_id,)).fetchone()
            if row is None:
                return None
            chosen = json.loads(row["options"]) if row["options"] else {}
            chosen[option_id] = value
            self.conn.execute("UPDATE task_sessions SET options = ? WHERE id = ?",
                              (json.dumps(chosen), session_id))
        return self.get_session(session_id)

    def delete_session(self, session_id: str) -> bool:
        with self._tx():
            return self._delete_session_rows(session_id)

    def _delete_session_rows(self, session_id: str) -> bool:
        # Children first (foreign keys are on); agent groups are the lifecycle's to forget.
        self.conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
        self.conn.execute("DELETE FROM queue_entries WHERE session_id = ?", (session_id,))
        self.conn.execute("DELETE FROM session_queues WHERE session_id = ?", (session_id,))
        self.conn.execute("DELETE FROM turn_checkpoints WHERE session_id = ?", (session_id,))
        self.conn.execute("DELETE FROM turns WHERE session_id = ?", (session_id,))
        return self.conn.execute("DELETE FROM task_sessions WHERE id = ?",
                                 (session_id,)).rowcount > 0

    def sessions_in_states(self, states: Iterable[SessionState]) -> list[Session]:
        values = [s.value for s in states]
        marks = ",".join("?" * len(values))
        rows = self.conn.execute(
            f"SELECT {SESSION_COLS} FROM task_sessions WHERE state IN ({marks})", values,
        ).fetchall()
        return [session_of(r) for r in rows]

    def set_session_state(
        self, session_id: str, state: SessionState, *, only_from: Iterable[SessionState] = ()
    ) -> Session | None:
        """Set the state; with ``only_from``, only if the current state is one of them.
        Returns the session as it now is if this call changed it, else None."""
        allowed = [s.value for s in only_from]
        # DESIGN.md §15: a session that failed (its agent did not start) needs
        # the person until they see it.
        sets = ("state = ?, updated_at = ?, attention = CASE WHEN ? THEN 'failed' "
                "ELSE attention END")
        values = (state.value, now(), state is SessionState.FAILED)
        with self._tx():
            if allowed:
                marks = ",".join("?" * len(allowed))
                changed = self.conn.execute(
                    f"UPDATE task_sessions SET {sets} WHERE id = ? AND state IN ({marks})",
                    (*values, session_id, *allowed),
                ).rowcount
            else:
                changed = self.conn.execute(
                    f"UPDATE task_sessions SET {sets} WHERE id = ?", (*values, session_id),
                ).rowcount
        return self.get_session(session_id) if changed else None

    def mark_seen(self, session_id: str) -> Session | None:
        """DESIGN.md §15 ``session.seen``: what the session had to say was seen.
        The session if this cleared something, else None (nothing to announce).
        Its ``updated_at`` stays: seeing a session changes nothing in it."""
        with self._tx():
            changed = self.conn.execute(
                "UPDATE task_sessions SET attention = NULL "
                "WHERE id = ? AND attention IS NOT NULL", (session_id,)).rowcount
        return self.get_session(session_id) if changed else None

    def set_agent_session(self, session_id: str, ref: AgentSessionRef) -> None:
        with self._tx():
            self.conn.execute(
                "UPDATE task_sessions SET agent_session_id = ?, agent_profile = ?, "
                "agent_cwd = ? WHERE id = ?",
                (ref.agent_session_id, ref.profile, ref.cwd, session_id))

    def get_agent_session(self, session_id: str) -> AgentSessionRef | None:
        row = self.conn.execute(
            "SELECT agent_session_id, agent_profile, agent_cwd FROM task_sessions "
            "WHERE id = ?", (session_id,)).fetchone()
        if row is None or row[0] is None:
            return None
        return AgentSessionRef(agent_session_id=str(row[0]), profile=str(row[1] or ""),
                               cwd=str(row[2] or ""))
