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
    "SUBAGENT_ACTIVE",
    "SUBAGENT_LIVE",
    "AgentEvent",
    "AgentNotice",
    "CommandsChanged",
    "HistoryReplayed",
    "MessageChunk",
    "OptionsChanged",
    "OtherUpdate",
    "PermissionOption",
    "PermissionRequested",
    "PermissionResolved",
    "PermissionWithdrawn",
    "PlanUpdated",
    "StopReason",
    "SubagentActivity",
    "SubagentChanged",
    "SubagentState",
    "TitleChanged",
    "ToolCallStarted",
    "ToolCallUpdated",
    "TurnEnded",
    "UsageUpdated",
    "UserEcho",
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
    #: What is asked, for the user to judge: some of ``command``, ``cwd``,
    #: ``reason``, ``path``, ``changes`` (Codex), ``permissions`` (Codex
    #: ``item/permissions/requestApproval``), ``raw_input``, ``content``,
    #: ``locations`` (ACP's tool call).  Empty when the agent says nothing more.
    details: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionResolved:
    """A permission request was answered (``option_id`` None = cancelled).

    ``interrupts_turn``: the decision sent also stops the turn (Codex
    ``cancel``, "Deny and stop"); the supervisor should end the turn through
    its user-cancel path, as if the user had pressed Cancel."""

    request_id: str
    option_id: str | None
    interrupts_turn: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionWithdrawn:
    """The agent took back a permission request before the user answered
    (ACP ``$/cancel_request``, Codex ``serverRequest/resolved``): dismiss the
    card, as for a cancelled one.  Nothing is to be sent back for it."""

    request_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnded:
    stop_reason: StopReason
    turn_id: str | None = None
    error: str | None = None
    #: Child sessions (subagents) the cancel of this turn stopped too: each
    #: was running and got its own protocol cancel with the turn's.
    subagents_cancelled: int = 0


#: A subagent's state as Turnvisor names it (DESIGN.md §13): ACP's work states
#: ``running`` / ``requires_action`` / ``unknown``, its ``idle`` split by stop
#: reason (``completed``, ``cancelled``, ``failed``), and ``cancelling`` from
#: the moment the client sent the child's cancel until the child answers.
SubagentState: TypeAlias = Literal[
    "running", "requires_action", "cancelling", "completed", "cancelled", "failed", "unknown"]
#: The states a child can still be stopped in.
SUBAGENT_ACTIVE: Final[frozenset[str]] = frozenset({"running", "requires_action"})
#: The states of a child still at work (its own cancel may be pending): not ended.
SUBAGENT_LIVE: Final[frozenset[str]] = SUBAGENT_ACTIVE | {"cancelling"}


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentActivity:
    """A child session sent something (text, a tool call, a plan): not the
    parent's transcript, but the turn that waits on its child is not stalled.
    ``text``: the streamed text it carried (a chunk); ``tool``: the title of a
    tool call it started; both empty for other work.  The supervisor keeps them
    as the child's trace (supervisor/subagents.py)."""

    subagent_id: str
    text: str = ""
    tool: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentChanged:
    """A child session of the current session (ACP ``subagent_update``, or a
    v2 child's own ``state_update``) was announced or changed.  ``cancellable``:
    the agent lets the client cancel it (``capabilities.cancel``) and it still
    runs."""

    subagent_id: str
    title: str
    state: SubagentState
    cancellable: bool
    stop_reason: str | None = None
    #: What the child was asked to do, where the agent says more than the title
    #: (ACP's ``description``, a Codex spawn's prompt); empty: the title says it.
    task: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class UserEcho:
    """ACP ``user_message_chunk`` outside a history replay: the agent repeating
    what the user sent (vibe does, mid-turn).  Not agent text: the user's
    message is already stored, so the supervisor ignores it."""

    text: str
    message_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryReplayed:
    """An ACP ``session/load`` succeeded: the agent replayed ``updates``
    history notifications (``by_kind``: how many of each update kind), which
    the core consumed.  The conversation is already stored, so the supervisor
    stores nothing of it; it comes just before the load's answer."""

    session_id: str
    updates: int
    by_kind: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class OptionsChanged:
    """The session's options, whole (DESIGN.md §19): each ``{id, name, category,
    type, current, choices: [{value, name, description}]}`` (protocols/session_options.py
    maps every dialect's shape onto it).  Sent when the agent offers them (a
    session's start or restore, Codex's ``thread/start`` and ``model/list``) and
    whenever they change (the agent's own change, or a ``set_option`` of ours)."""

    options: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandsChanged:
    """The agent's slash commands, whole (ACP ``available_commands_update``):
    each ``{name, description, input_hint}`` (``input_hint``: null when none)."""

    commands: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageUpdated:
    """Tokens and cost as the agent last reported them (ACP ``usage_update``,
    Codex ``thread/tokenUsage/updated``): ``{input_tokens, output_tokens,
    context_used, context_size, cost}``, each null when the agent did not say;
    ``cost`` is ``{amount, currency}``."""

    usage: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class TitleChanged:
    """The agent named the session (ACP ``session_info_update`` with a title)."""

    title: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OtherUpdate:
    """An update kind we do not render (plans of other shapes, ...): passed through."""

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
    | PermissionWithdrawn
    | TurnEnded
    | SubagentChanged
    | SubagentActivity
    | UserEcho
    | HistoryReplayed
    | OptionsChanged
    | CommandsChanged
    | UsageUpdated
    | TitleChanged
    | OtherUpdate
    | AgentNotice
)
