"""The SQLite database: workspaces, tasks, task sessions, turns, messages, agent groups.

``Db`` is plain synchronous SQL on one connection (tested directly; callers
serialize: ``supervisor.store.Store`` runs it on a worker thread).  WAL journal,
``synchronous=NORMAL``: a committed message survives a crash of the backend
(SIGKILL), which is the promise; a power cut may lose the last transaction.

Turn closing is conditional (``WHERE state = 'running'``) and the session is
moved to WAITING_FOR_INPUT only if it still points at that turn, so whichever
path closes a turn first (the turn itself, a cancel's reconciliation, an
escalation, startup recovery) does it exactly once and never touches a
successor turn.
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from protocols.process import process_identity

from .models import (
    AgentSessionRef,
    Message,
    MessageKind,
    QueueEntry,
    QueueState,
    Role,
    Session,
    SessionState,
    StopReason,
    Task,
    Turn,
    TurnState,
)

__all__ = ["SCHEMA_VERSION", "ClosedRow", "Db", "QueueFull", "StoreError", "StoreUnavailable",
           "TurnClose", "new_id", "now", "storable"]


class StoreError(Exception):
    pass


class StoreUnavailable(StoreError):
    """The database did not take a write in time (locked elsewhere, disk trouble)."""


class SchemaTooNew(StoreError):
    """The database was written by a newer Turnvisor (a schema this one does not know)."""

    def __init__(self, version: int) -> None:
        super().__init__(f"database schema {version} is newer than this Turnvisor's "
                         f"({SCHEMA_VERSION})")
        self.version = version


class QueueFull(StoreError):
    """The session's queue already holds its maximum of entries."""


@dataclass(frozen=True)
class TurnClose:
    """One turn's close, as ``Db.close_turn`` takes it."""

    turn_id: str
    state: TurnState
    stop_reason: StopReason
    status: tuple[str, dict[str, Any]] | None = None
    session_state: SessionState = SessionState.WAITING_FOR_INPUT
    park_queue: bool = False
    text: tuple[Message, ...] = ()


#: (closed by this call, the status message added, the session if this call
#: moved it, the queue's state if this call parked it).
ClosedRow = tuple[bool, Message | None, Session | None, QueueState | None]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id() -> str:
    return str(uuid.uuid4())


def storable(text: str) -> str:
    """``text`` as SQLite can take it (UTF-8).  Agents' JSON may carry lone
    surrogates — a JavaScript agent that cuts a string between the halves of
    an emoji sends each half escaped — which have no UTF-8 form: pairs split
    across chunks are rejoined, halves left alone become U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE workspaces (
        id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL);
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        title TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
    CREATE INDEX tasks_by_workspace ON tasks(workspace_id, updated_at);
    CREATE TABLE task_sessions (
        id TEXT PRIMARY KEY, task_id TEXT NOT NULL REFERENCES tasks(id),
        agent TEXT NOT NULL, state TEXT NOT NULL, current_turn_id TEXT,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
    CREATE INDEX sessions_by_task ON task_sessions(task_id, updated_at);
    CREATE TABLE turns (
        id TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES task_sessions(id),
        state TEXT NOT NULL, stop_reason TEXT, started_at TEXT NOT NULL, ended_at TEXT);
    CREATE INDEX turns_by_session ON turns(session_id, started_at);
    CREATE TABLE messages (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
        session_id TEXT NOT NULL REFERENCES task_sessions(id), turn_id TEXT,
        role TEXT NOT NULL, kind TEXT NOT NULL, content TEXT NOT NULL,
        metadata TEXT NOT NULL, created_at TEXT NOT NULL);
    CREATE INDEX messages_by_session ON messages(session_id, seq);
    CREATE TABLE agent_groups (
        pgid INTEGER PRIMARY KEY, session_id TEXT NOT NULL, command TEXT NOT NULL,
        started_at TEXT NOT NULL);
    """,
    # The group leader's identity (protocols.process.process_identity): the
    # startup sweep kills a recorded group only while the id is still ours.
    "ALTER TABLE agent_groups ADD COLUMN leader TEXT;",
    # The agent's tag (protocols.process.AGENT_TAG_ENV): finds its tools after a
    # backend crash, whatever group or session they moved to.
    "ALTER TABLE agent_groups ADD COLUMN tag TEXT;",
    # Tasks and sessions a person renamed or put away (archived ones stay listed, marked).
    """
    ALTER TABLE tasks ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE task_sessions ADD COLUMN title TEXT;
    ALTER TABLE task_sessions ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
    """,
    # Session continuity (DESIGN.md §10): the agent's own conversation id (ACP
    # sessionId, Codex threadId; never our session id), with the profile and cwd
    # it lives under, so a fresh agent process can restore it.
    """
    ALTER TABLE task_sessions ADD COLUMN agent_session_id TEXT;
    ALTER TABLE task_sessions ADD COLUMN agent_profile TEXT;
    ALTER TABLE task_sessions ADD COLUMN agent_cwd TEXT;
    """,
    # DESIGN.md §9: each session's queue (ordered by position) and its auto-run
    # flag and revision (a session without a row: auto-run on, revision 0).
    """
    CREATE TABLE queue_entries (
        id TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES task_sessions(id),
        content TEXT NOT NULL, position INTEGER NOT NULL, created_at TEXT NOT NULL);
    CREATE INDEX queue_by_session ON queue_entries(session_id, position);
    CREATE TABLE session_queues (
        session_id TEXT PRIMARY KEY REFERENCES task_sessions(id),
        auto_run INTEGER NOT NULL, revision INTEGER NOT NULL);
    """,
    # A turn an agentctl at a configured URL runs (it outlives the backend): how
    # far its event stream is written down (agentctl's seq), so the next backend
    # takes the turn over from there instead of interrupting it.
    """
    CREATE TABLE turn_handovers (
        turn_id TEXT PRIMARY KEY REFERENCES turns(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL);
    """,
    # A task's sessions are listed by creation: an index on (task_id,
    # updated_at) was rewritten by every state change (each turn's open and
    # close, a cancel's commit) and served no query.
    """
    DROP INDEX sessions_by_task;
    CREATE INDEX sessions_by_task ON task_sessions(task_id, created_at);
    """,
    # DESIGN.md §14: a message.add's client_message_id, kept with what it made
    # (the user message's metadata, or the queue entry), so a repeat finds it.
    """
    ALTER TABLE queue_entries ADD COLUMN client_message_id TEXT;
    CREATE INDEX queue_by_client_id ON queue_entries(session_id, client_message_id)
        WHERE client_message_id IS NOT NULL;
    CREATE INDEX messages_by_client_id
        ON messages(session_id, json_extract(metadata, '$.client_message_id'))
        WHERE role = 'user';
    """,
    # DESIGN.md §12: a task's project directory (NULL: the data dir's work/), a
    # session's cwd and git worktree (JSON {path, branch, base_commit}), and the
    # checkpoints of every turn and revert (supervisor/turn_checkpoints.py).
    """
    ALTER TABLE tasks ADD COLUMN project_dir TEXT;
    ALTER TABLE task_sessions ADD COLUMN cwd TEXT;
    ALTER TABLE task_sessions ADD COLUMN worktree TEXT;
    CREATE TABLE turn_checkpoints (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
        session_id TEXT NOT NULL REFERENCES task_sessions(id) ON DELETE CASCADE,
        kind TEXT NOT NULL, before_commit TEXT, after_commit TEXT,
        created_at TEXT NOT NULL);
    CREATE INDEX turn_checkpoints_by_session ON turn_checkpoints(session_id, seq);
    """,
)
SCHEMA_VERSION = len(_MIGRATIONS)

# A session row with its task's workspace and its queue's summary, as a SELECT
# from task_sessions and as an UPDATE of it returns it (hence no join and no
# alias: the table's own name qualifies its columns in the subqueries).
_SESSION_COLS = (
    "id, task_id, (SELECT workspace_id FROM tasks t WHERE t.id = task_sessions.task_id) "
    "AS workspace_id, agent, state, current_turn_id, created_at, updated_at, title, archived, "
    "(SELECT COUNT(*) FROM queue_entries q WHERE q.session_id = task_sessions.id) "
    "AS queued_count, cwd, worktree, "
    "COALESCE((SELECT auto_run FROM session_queues sq WHERE sq.session_id = task_sessions.id), "
    "1) AS auto_run"
)
# A task with its live status: how many sessions, how many running a turn.
_TASK_SELECT = (
    "SELECT t.*, "
    "(SELECT COUNT(*) FROM task_sessions s WHERE s.task_id = t.id) AS session_count, "
    "(SELECT COUNT(*) FROM task_sessions s WHERE s.task_id = t.id AND s.state = 'RUNNING') "
    "AS running_count FROM tasks t"
)


def _session(row: sqlite3.Row) -> Session:
    return Session(
        id=row["id"], task_id=row["task_id"], workspace_id=row["workspace_id"],
        agent=row["agent"], state=SessionState(row["state"]),
        current_turn_id=row["current_turn_id"], created_at=row["created_at"],
        updated_at=row["updated_at"], title=row["title"], archived=bool(row["archived"]),
        queued_count=int(row["queued_count"]), auto_run=bool(row["auto_run"]),
        cwd=row["cwd"], worktree=json.loads(row["worktree"]) if row["worktree"] else None,
    )


def _task(row: sqlite3.Row) -> Task:
    return Task(id=row["id"], workspace_id=row["workspace_id"], title=row["title"],
                created_at=row["created_at"], updated_at=row["updated_at"],
                archived=bool(row["archived"]), session_count=row["session_count"],
                running_count=row["running_count"], project_dir=row["project_dir"])


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


class Db:
    """Synchronous access to the database (one connection; callers serialize)."""

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
        self._migrate()

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

    def _migrate(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(version)
        for i in range(version, SCHEMA_VERSION):
            # executescript commits first, so the transaction is spelled out in the script.
            self.conn.executescript(
                f"BEGIN IMMEDIATE; {_MIGRATIONS[i]}; PRAGMA user_version = {i + 1}; COMMIT;"
            )

    def _tx(self) -> _Tx:
        return _Tx(self)

    # -- workspaces and tasks -----------------------------------------------

    def ensure_workspace(self, name: str) -> str:
        row = self.conn.execute("SELECT id FROM workspaces WHERE name = ?", (name,)).fetchone()
        if row:
            return str(row["id"])
        wid = new_id()
        with self._tx():
            self.conn.execute("INSERT INTO workspaces VALUES (?, ?, ?)", (wid, name, now()))
        return wid

    def create_task(self, workspace_id: str, title: str,
                    project_dir: str | None = None) -> Task:
        ts = now()
        task = Task(id=new_id(), workspace_id=workspace_id, title=title,
                    created_at=ts, updated_at=ts, project_dir=project_dir)
        with self._tx():
            self.conn.execute(
                "INSERT INTO tasks (id, workspace_id, title, created_at, updated_at, "
                "project_dir) VALUES (?, ?, ?, ?, ?, ?)",
                (task.id, workspace_id, title, ts, ts, project_dir))
        return task

    def get_task(self, task_id: str) -> Task | None:
        row = self.conn.execute(f"{_TASK_SELECT} WHERE t.id = ?", (task_id,)).fetchone()
        return _task(row) if row else None

    def list_tasks(self, workspace_ids: Iterable[str]) -> list[Task]:
        ids = list(workspace_ids)
        marks = ",".join("?" * len(ids))
        rows = self.conn.execute(
            f"{_TASK_SELECT} WHERE t.workspace_id IN ({marks}) ORDER BY t.updated_at DESC", ids
        ).fetchall()
        return [_task(r) for r in rows]

    def update_task(self, task_id: str, *, title: str | None = None,
                    archived: bool | None = None) -> Task | None:
        """Rename and/or (un)archive; None if there is no such task."""
        with self._tx():
            changed = self.conn.execute(
                "UPDATE tasks SET title = COALESCE(?, title), "
                "archived = COALESCE(?, archived), updated_at = ? WHERE id = ?",
                (title, None if archived is None else int(archived), now(), task_id),
            ).rowcount
        return self.get_task(task_id) if changed else None

    def delete_task(self, task_id: str) -> bool:
        """The task, its sessions and everything they hold (False: no such task)."""
        with self._tx():
            for (session_id,) in self.conn.execute(
                    "SELECT id FROM task_sessions WHERE task_id = ?", (task_id,)).fetchall():
                self._delete_session_rows(session_id)
            return self.conn.execute("DELETE FROM tasks WHERE id = ?",
                                     (task_id,)).rowcount > 0

    # -- sessions -----------------------------------------------------------

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
            f"SELECT {_SESSION_COLS} FROM task_sessions WHERE id = ?", (session_id,),
        ).fetchone()
        return _session(row) if row else None

    def list_sessions(self, task_id: str) -> list[Session]:
        rows = self.conn.execute(
            f"SELECT {_SESSION_COLS} FROM task_sessions WHERE task_id = ? ORDER BY created_at",
            (task_id,),
        ).fetchall()
        return [_session(r) for r in rows]

    def update_session(self, session_id: str, *, title: str | None = None,
                       archived: bool | None = None) -> Session | None:
        """Rename (an empty title clears it) and/or (un)archive; None if not found."""
        with self._tx():
            changed = self.conn.execute(
                "UPDATE task_sessions SET title = CASE WHEN ? THEN NULLIF(?, '') ELSE title END, "
                "archived = COALESCE(?, archived), updated_at = ? WHERE id = ?",
                (title is not None, title or "", None if archived is None else int(archived),
                 now(), session_id),
            ).rowcount
        return self.get_session(session_id) if changed else None

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
            f"SELECT {_SESSION_COLS} FROM task_sessions WHERE state IN ({marks})", values,
        ).fetchall()
        return [_session(r) for r in rows]

    def set_session_state(
        self, session_id: str, state: SessionState, *, only_from: Iterable[SessionState] = ()
    ) -> Session | None:
        """Set the state; with ``only_from``, only if the current state is one of them.
        Returns the session as it now is if this call changed it, else None."""
        allowed = [s.value for s in only_from]
        with self._tx():
            if allowed:
                marks = ",".join("?" * len(allowed))
                changed = self.conn.execute(
                    f"UPDATE task_sessions SET state = ?, updated_at = ? "
                    f"WHERE id = ? AND state IN ({marks})",
                    (state.value, now(), session_id, *allowed),
                ).rowcount
            else:
                changed = self.conn.execute(
                    "UPDATE task_sessions SET state = ?, updated_at = ? WHERE id = ?",
                    (state.value, now(), session_id),
                ).rowcount
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

    # -- turns --------------------------------------------------------------

    def open_turn(self, session_id: str, prompt: str, *, resume_queue: bool = False,
                  client_message_id: str | None = None,
                  ) -> tuple[Turn, Message, Session, QueueState | None]:
        """Start a turn: the turn row, the user's message, session RUNNING — atomically.

        ``resume_queue``: in the same transaction, a parked queue resumes (a
        message the user sent directly); the queue's new state if it changed."""
        ts = now()
        turn = Turn(id=new_id(), session_id=session_id, state="running", stop_reason=None,
                    started_at=ts, ended_at=None)
        meta = {} if client_message_id is None else {"client_message_id": client_message_id}
        msg = Message(id=new_id(), session_id=session_id, turn_id=turn.id, role="user",
                      kind="text", content=prompt, metadata=meta, created_at=ts)
        with self._tx():
            self.conn.execute("INSERT INTO turns VALUES (?, ?, 'running', NULL, ?, NULL)",
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
        commit for turns that ended together: ``supervisor.close_group``)."""
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
        moved = self.conn.execute(
            "UPDATE task_sessions SET state = ?, current_turn_id = NULL, updated_at = ? "
            f"WHERE id = ? AND current_turn_id = ? RETURNING {_SESSION_COLS}",
            (close.session_state.value, ts, session_id, close.turn_id),
        ).fetchall()
        return (True, msg, _session(moved[0]) if moved else None,
                self.queue_state(session_id) if parked else None)

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

    def forget_turn_handovers(self) -> None:
        """Drop the positions of turns no longer running (once, at startup)."""
        with self._tx():
            self.conn.execute(
                "DELETE FROM turn_handovers WHERE turn_id IN "
                "(SELECT id FROM turns WHERE state != 'running')")

    # -- messages -----------------------------------------------------------

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

    # -- queues (DESIGN.md §9) ------------------------------------------------
    #
    # Every change renumbers the session's positions 0..n-1 and bumps its
    # revision in the same transaction, and returns the committed snapshot.

    def queue_state(self, session_id: str) -> QueueState:
        row = self.conn.execute(
            "SELECT auto_run, revision FROM session_queues WHERE session_id = ?",
            (session_id,)).fetchone()
        rows = self.conn.execute(
            "SELECT * FROM queue_entries WHERE session_id = ? ORDER BY position",
            (session_id,)).fetchall()
        entries = tuple(QueueEntry(id=r["id"], session_id=session_id, content=r["content"],
                                   created_at=r["created_at"], position=i,
                                   client_message_id=r["client_message_id"])
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
                  ) -> tuple[QueueEntry, QueueState]:
        """Append (or, with ``head``, put first) an entry; ``QueueFull`` beyond ``max_entries``."""
        eid = entry_id or new_id()
        with self._tx():
            ids = self._queue_ids(session_id)
            if len(ids) >= max_entries:
                raise QueueFull(f"the queue already holds {max_entries} messages")
            self.conn.execute(
                "INSERT INTO queue_entries (id, session_id, content, position, created_at, "
                "client_message_id) VALUES (?, ?, ?, ?, ?, ?)",
                (eid, session_id, storable(content), len(ids), created_at or now(),
                 client_message_id))
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
                                   client_message_id=row["client_message_id"])
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

    # -- agent process groups (swept at startup) ----------------------------

    def record_agent_group(self, pgid: int, session_id: str, command: str,
                           tag: str | None = None, *, leader: str | None = None) -> None:
        """``leader``: the group leader's identity; by default read now (the
        leader is our child, not yet reaped, so the pid is still its own)."""
        leader = leader if leader is not None else process_identity(pgid)
        with self._tx():
            self.conn.execute(
                "INSERT OR REPLACE INTO agent_groups "
                "(pgid, session_id, command, started_at, leader, tag) VALUES (?, ?, ?, ?, ?, ?)",
                (pgid, session_id, command, now(), leader, tag))

    def forget_agent_group(self, pgid: int) -> None:
        with self._tx():
            self.conn.execute("DELETE FROM agent_groups WHERE pgid = ?", (pgid,))

    def agent_groups(self) -> list[tuple[int, str, str, str | None]]:
        """(pgid, session id, command, tag) of every agent recorded as running."""
        rows = self.conn.execute(
            "SELECT pgid, session_id, command, tag FROM agent_groups").fetchall()
        return [(int(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows]

    def agent_group_leaders(self) -> dict[int, str | None]:
        """pgid → its leader's recorded identity (None: recorded without one)."""
        rows = self.conn.execute("SELECT pgid, leader FROM agent_groups").fetchall()
        return {int(r[0]): r[1] for r in rows}


class _Tx:
    """BEGIN IMMEDIATE … COMMIT/ROLLBACK (writers take the lock up front, so a
    busy database fails fast at BEGIN rather than mid-transaction)."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.conn.execute("ROLLBACK" if exc_type else "COMMIT")
        if not exc_type:
            self.db.commits += 1
