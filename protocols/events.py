"""One vocabulary of agent events for both dialects.

ACP ``session/update`` notifications and Codex ``item/*``/``turn/*``
notifications are mapped onto these plain values, so the supervisor never
looks at a dialect.  ``stop_reason`` always uses ACP's words (``end_turn``,
``cancelled``, ``max_tokens``, ``max_turn_requests``, ``refusal``) plus
``error``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

__all__ = [
    "STOP_REASONS",
    "AgentEvent",
    "AgentNotice",
    "MessageChunk",
    "OtherUpdate",
    "PermissionOption",
    "PermissionRequested",
    "PermissionResolved",
    "PlanUpdated",
    "StopReason",
    "ToolCallStarted",
    "ToolCallUpdated",
    "TurnEnded",
]

StopReason: TypeAlias = Literal[
    "end_turn", "cancelled", "max_tokens", "max_turn_requests", "refusal", "error"
]
STOP_REASONS: Final[frozenset[str]] = frozenset(
    {"end_turn", "cancelled", "max_tokens", "max_turn_requests", "refusal", "error"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageChunk:
    """Streamed text.  ``channel`` is ``agent`` (the answer) or ``thought``."""

    text: str
    channel: Literal["agent", "thought", "user"] = "agent"
    message_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted:
    tool_call_id: str
    title: str
    status: str = "pending"
    kind: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallUpdated:
    """``status`` is one of pending, in_progress, completed, failed, cancelled
    (``cancelled`` is set by the client itself when it cancels the turn)."""

    tool_call_id: str
    status: str | None = None
    title: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanUpdated:
    entries: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionOption:
    option_id: str
    name: str
    kind: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionRequested:
    """The agent asks the user; answer with the adapter's ``respond_permission``."""

    request_id: str
    title: str
    options: tuple[PermissionOption, ...]
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionResolved:
    """A permission request was answered (``option_id`` None = cancelled)."""

    request_id: str
    option_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnded:
    stop_reason: StopReason
    turn_id: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OtherUpdate:
    """An update kind we do not render (usage, commands, modes, ...): passed through."""

    kind: str
    payload: Any = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentNotice:
    """Something about the agent's output worth a log line, never fatal:
    a non-JSON line, an oversized line, a reply to an unknown id, a message of
    the wrong shape."""

    message: str
    level: Literal["info", "warning"] = "warning"


AgentEvent: TypeAlias = (
    MessageChunk
    | ToolCallStarted
    | ToolCallUpdated
    | PlanUpdated
    | PermissionRequested
    | PermissionResolved
    | TurnEnded
    | OtherUpdate
    | AgentNotice
)
