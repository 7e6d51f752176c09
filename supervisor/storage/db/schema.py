"""The schema: its migrations, in order (``PRAGMA user_version`` counts how
many have run), and the refusal of a database a newer Turnvisor wrote."""

from __future__ import annotations

import sqlite3

from .values import StoreError

__all__ = ["SCHEMA_VERSION", "SchemaTooNew", "migrate"]


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
    # checkpoints of every turn and revert (supervisor/workspace/turn_checkpoints.py).
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
    # DESIGN.md §12: the agent's own id of a checkpointed turn (Codex's turn id),
    # so a revert can drop that turn from the agent's history (thread/revert).
    "ALTER TABLE turn_checkpoints ADD COLUMN agent_turn_id TEXT;",
    # DESIGN.md §17: the project directory's identity ("device:inode") when the
    # task was made; every launch checks the directory it binds is that one.
    "ALTER TABLE tasks ADD COLUMN project_identity TEXT;",
    # DESIGN.md §15: what of a session needs the person until they see it
    # ('turn_ended' or 'failed'; NULL: nothing), so a reload, another tab and
    # the phone show it (an approval waiting is live: supervisor/notify.py).
    "ALTER TABLE task_sessions ADD COLUMN attention TEXT;",
    # DESIGN.md §18: a stopped turn's receipt (JSON: what the stop did and what
    # still ran), also the source of each agent's measured cancel figures.
    "ALTER TABLE turns ADD COLUMN receipt TEXT;",
    # DESIGN.md §19: the options the person chose for a session (JSON {option id:
    # value}, re-applied to every agent the session starts), whether its title is
    # the agent's (an agent's title never replaces the person's), and each turn's
    # context usage as the agent last reported it (JSON).
    """
    ALTER TABLE task_sessions ADD COLUMN options TEXT;
    ALTER TABLE task_sessions ADD COLUMN title_by_agent INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE turns ADD COLUMN usage TEXT;
    """,
    # DESIGN.md §19: what a person uploaded (the file lies in the data dir under
    # its sha256; the row says whose it is and what it is), and the attachments
    # and mentions a queued message carries to its turn (JSON {attachments:
    # [ids], mentions: [paths]}; NULL: none).
    """
    CREATE TABLE attachments (
        id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        sha256 TEXT NOT NULL, name TEXT NOT NULL, mime TEXT NOT NULL,
        size INTEGER NOT NULL, created_at TEXT NOT NULL);
    CREATE INDEX attachments_by_hash ON attachments(workspace_id, sha256);
    ALTER TABLE queue_entries ADD COLUMN parts TEXT;
    """,
    # DESIGN.md §20: a cancel held for a remote agent's host that did not answer
    # (when it was accepted, unix seconds; NULL: none): the next backend that
    # takes the turn over sends it.
    """
    ALTER TABLE turn_handovers ADD COLUMN cancel_held_at REAL;
    """,
)
SCHEMA_VERSION = len(_MIGRATIONS)


class SchemaTooNew(StoreError):
    """The database was written by a newer Turnvisor (a schema this one does not know)."""

    def __init__(self, version: int) -> None:
        super().__init__(f"database schema {version} is newer than this Turnvisor's "
                         f"({SCHEMA_VERSION})")
        self.version = version


def migrate(conn: sqlite3.Connection) -> None:
    """Run the migrations this database has not had, each in its own transaction."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(version)
    for i in range(version, SCHEMA_VERSION):
        # executescript commits first, so the transaction is spelled out in the script.
        conn.executescript(
            f"BEGIN IMMEDIATE; {_MIGRATIONS[i]}; PRAGMA user_version = {i + 1}; COMMIT;"
        )
