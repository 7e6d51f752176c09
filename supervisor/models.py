"""Rows of the store as plain values, and their wire DTOs (DESIGN.md §5)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypeAlias, cast

from protocols.events import StopReason

__all__ = [
    "CANCELLED_STATUS",
    "INTERRUPTED_STATUS",
    "AgentSessionRef",
    "Message",
    "MessageKind",
    "QueueEntry",
    "QueueState",
    "Role",
    "Session",
    "SessionState",
    "StopReason",
    "Task",
    "TextAppend",
    "Turn",
    "TurnState",
    "utf16_len",
]

#: Who wrote a message.
Role: TypeAlias = Literal["user", "agent", "system"]
#: What a message is.
MessageKind: TypeAlias = Literal["text", "tool_call", "permission", "plan", "status", "subagent"]
#: A turn row's state: running until closed; ``interrupted`` = closed by a restart.
TurnState: TypeAlias = Literal["running", "completed", "cancelled", "failed", "interrupted"]


class SessionState(StrEnum):
    CREATED = "CREATED"
    STARTING = "STARTING"
    #: A turn is running (the only state in which cancel has work to do).
    RUNNING = "RUNNING"
    WAITING_FOR_INPUT = "WAITING_FOR_INPUT"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


#: The status message of a turn the user cancelled (exactly one per turn).
CANCELLED_STATUS = "Turn cancelled by user"
#: The status message of a turn a "send now" replaced (DESIGN.md §9).
INTERRUPTED_STATUS = "Turn interrupted by a new message"


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    id: str
    workspace_id: str
    title: str
    created_at: str
    updated_at: str
    archived: bool = False
    #: Its sessions, and how many of them run a turn now (the task list's live status).
    session_count: int = 0
    running_count: int = 0
    #: DESIGN.md §12: the directory its sessions work in (None: the data dir's work/).
    project_dir: str | None = None
    #: DESIGN.md §17: ``project_dir``'s (device, inode) when the task was made.
    project_identity: tuple[int, int] | None = None
    #: When it was made or last given a session (None: its created_at): the task
    #: list's order, which a rename or an archive does not change.
    active_at: str | None = None
    #: DESIGN.md §15: its sessions whose agent failed to start (FAILED), and
    #: those whose stored attention waits to be seen, oldest first:
    #: ``{session_id, attention, agent, title}`` each.
    failed_count: int = 0
    attention: tuple[dict[str, Any], ...] = ()

    def to_dto(self) -> dict[str, Any]:
        return {
            "id": self.id, "workspace_id": self.workspace_id, "title": self.title,
            "created_at": self.created_at, "updated_at": self.updated_at,
            "archived": self.archived, "session_count": self.session_count,
            "running_count": self.running_count, "project_dir": self.project_dir,
            "active_at": self.active_at or self.created_at,
            "failed_count": self.failed_count,
            "attention_sessions": [dict(a) for a in self.attention],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    id: str
    task_id: str
    workspace_id: str
    agent: str
    state: SessionState
    current_turn_id: str | None
    created_at: str
    updated_at: str
    #: The person's name for it (None: the UI names it after its agent).
    title: str | None = None
    archived: bool = False
    #: Entries in the session's queue, and whether its head runs when a turn
    #: ends (DESIGN.md §9).
    queued_count: int = 0
    auto_run: bool = True
    #: DESIGN.md §12: the directory its agent works in (None: its profile's
    #: default), and its own git worktree ({path, branch, base_commit}) if it has one.
    cwd: str | None = None
    worktree: dict[str, str] | None = None
    #: DESIGN.md §15, stored until seen: ``turn_ended``, ``failed`` or None
    #: (the DTO's ``attention`` says ``approval`` over it while one waits).
    attention: str | None = None
    #: DESIGN.md §19: the options the person chose ({option id: value}), and
    #: whether ``title`` is the agent's (it never replaces the person's).
    options: dict[str, str] = field(default_factory=dict, hash=False)
    title_by_agent: bool = False

    def to_dto(self, pending: bool, revision: int, agent_live: bool = False,
               protocol: str | None = None) -> dict[str, Any]:
        """Full and summary DTOs alike carry explicit cancellation and queue values, and
        whether the session's agent process is running (``agent_live``: false
        before its first start and once stopped idle, crashed or restarted;
        the next prompt starts one and restores the conversation).
        ``protocol``: ``acp/1``, ``acp/2`` or ``codex`` (DESIGN.md §13), None
        while an ``acp_version = "auto"`` agent has not negotiated yet."""
        return {
            "id": self.id, "task_id": self.task_id, "state": self.state.value,
            "agent": self.agent, "created_at": self.created_at, "updated_at": self.updated_at,
            "cancellation_pending": pending, "cancellation_revision": revision,
            "title": self.title, "archived": self.archived,
            "agent_live": agent_live, "protocol": protocol,
            "queued_count": self.queued_count, "auto_run": self.auto_run,
            "current_turn_id": self.current_turn_id,
            "cwd": self.cwd, "worktree": self.worktree, "attention": self.attention,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSessionRef:
    """What a fresh agent process needs to reopen a session's conversation
    (DESIGN.md §10)."""

    #: The agent's own conversation id (ACP ``sessionId``, Codex ``threadId``).
    agent_session_id: str
    #: The agent profile and the working directory it ran under.
    profile: str
    cwd: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    id: str
    session_id: str
    state: TurnState
    stop_reason: StopReason | None
    started_at: str
    ended_at: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    id: str
    session_id: str
    turn_id: str | None
    role: Role
    kind: MessageKind
    content: str
    metadata: dict[str, Any]
    created_at: str

    def to_dto(self) -> dict[str, Any]:
        return {
            "id": self.id, "session_id": self.session_id, "turn_id": self.turn_id,
            "role": self.role, "kind": self.kind, "content": self.content,
            "metadata": self.metadata, "created_at": self.created_at,
        }

    @staticmethod
    def from_row(row: Any) -> Message:
        return Message(
            id=row["id"], session_id=row["session_id"], turn_id=row["turn_id"],
            role=cast(Role, row["role"]), kind=cast(MessageKind, row["kind"]),
            content=row["content"],
            metadata=json.loads(row["metadata"]), created_at=row["created_at"],
        )


def utf16_len(text: str) -> int:
    """``text``'s length in UTF-16 code units: what a JavaScript string's
    ``length`` counts (an emoji beyond the BMP is 2), the unit of
    ``TextAppend.offset``.  A lone surrogate counts 1, as in JavaScript and as
    the U+FFFD the store writes in its place (``db.storable``)."""
    if text.isascii():  # O(1) in CPython: the string knows it is ASCII
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@dataclass(frozen=True, slots=True)
class TextAppend:
    """How a streamed text message grew: ``text`` added at ``offset``, the
    UTF-16 length (``utf16_len``) of its content before, as stored."""

    offset: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueEntry:
    """A message waiting for its turn; ``position`` is its 0-based place."""

    id: str
    session_id: str
    content: str
    created_at: str
    position: int
    #: The ``message.add`` that queued it (DESIGN.md §14), carried to its turn.
    client_message_id: str | None = None
    #: Its attachments and mentions (DESIGN.md §19; supervisor.workspace.attachments'
    #: PromptRefs as stored), carried to its turn.
    parts: dict[str, Any] | None = None

    def to_dto(self) -> dict[str, Any]:
        parts = self.parts or {}
        return {"id": self.id, "session_id": self.session_id, "content": self.content,
                "created_at": self.created_at, "position": self.position,
                "client_message_id": self.client_message_id,
                # What it carries, as its message will list them (DESIGN.md §19).
                "attachments": [Attachment(**a).to_dto() for a in parts.get("attachments", ())],
                "mentions": [str(m) for m in parts.get("mentions", ())]}


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueState:
    """A session's queue as one committed snapshot; ``revision`` grows with
    every change (persisted, so it never goes back across a restart)."""

    session_id: str
    entries: tuple[QueueEntry, ...]
    auto_run: bool
    revision: int

    def payload(self) -> dict[str, Any]:
        """``session.queue.changed`` (and ``queue.list``, which adds nothing more)."""
        return {"session_id": self.session_id,
                "entries": [e.to_dto() for e in self.entries],
                "auto_run": self.auto_run, "queue_revision": self.revision}


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachment:
    """An upload (DESIGN.md §19): its workspace's, its file in the data dir by sha256."""

    id: str
    workspace_id: str
    sha256: str
    name: str
    mime: str
    size: int
    created_at: str

    def to_dto(self) -> dict[str, Any]:
        return {"attachment_id": self.id, "name": self.name, "mime": self.mime,
                "size": self.size}
