"""Rows of the store as plain values, and their wire DTOs (DESIGN.md §5)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, TypeAlias, cast

from protocols.events import StopReason

__all__ = [
    "CANCELLED_STATUS",
    "AgentSessionRef",
    "Message",
    "MessageKind",
    "Role",
    "Session",
    "SessionState",
    "StopReason",
    "Task",
    "Turn",
    "TurnState",
]

#: Who wrote a message.
Role: TypeAlias = Literal["user", "agent", "system"]
#: What a message is.
MessageKind: TypeAlias = Literal["text", "tool_call", "permission", "plan", "status"]
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    id: str
    workspace_id: str
    title: str
    created_at: str
    updated_at: str

    def to_dto(self) -> dict[str, Any]:
        return {
            "id": self.id, "workspace_id": self.workspace_id, "title": self.title,
            "created_at": self.created_at, "updated_at": self.updated_at,
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

    def to_dto(self, pending: bool, revision: int, agent_live: bool = False) -> dict[str, Any]:
        """Full and summary DTOs alike carry explicit cancellation values, and
        whether the session's agent process is running (``agent_live``: false
        before its first start and once stopped idle, crashed or restarted;
        the next prompt starts one and restores the conversation)."""
        return {
            "id": self.id, "task_id": self.task_id, "state": self.state.value,
            "agent": self.agent, "created_at": self.created_at, "updated_at": self.updated_at,
            "cancellation_pending": pending, "cancellation_revision": revision,
            "agent_live": agent_live,
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
