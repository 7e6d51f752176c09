"""The objects the server sends (DESIGN.md §4, §9): tasks, sessions, messages,
queue entries.  Declared for the published schema; ``extra="forbid"`` so that a
field the server starts sending without declaring it here fails the schema
check every WebSocket test runs (tests/support/ws.py), not a client later."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DTO", "AttachmentDTO", "Attention", "FileChangeDTO", "MessageDTO", "QueueEntryDTO",
           "QueueStateDTO", "SessionAttentionDTO", "SessionDTO", "SkippedFileDTO", "SubagentDTO",
           "TaskDTO", "WorktreeDTO"]

#: DESIGN.md §15: what of a session needs the person.
Attention = Literal["approval", "turn_ended", "failed"]

SessionStateName = Literal["CREATED", "STARTING", "RUNNING", "WAITING_FOR_INPUT", "COMPLETED",
                           "FAILED", "CANCELLED"]


class DTO(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionAttentionDTO(DTO):
    """A session of a task that needs the person (the session DTO's ``attention``)."""

    session_id: str
    attention: Attention
    agent: str
    title: str | None


class TaskDTO(DTO):
    id: str
    workspace_id: str
    title: str
    created_at: str
    updated_at: str
    archived: bool
    session_count: int
    running_count: int
    #: DESIGN.md §12: where its sessions work (null: the data dir's work/).
    project_dir: str | None = None
    #: When it was made or last given a session: the task list's order (a rename
    #: or an archive moves updated_at, never its place).
    active_at: str | None = None
    #: DESIGN.md §15: its sessions waiting for an approval, and being cancelled
    #: (0 where a path builds the DTO without the notifier's knowledge).
    approval_count: int = 0
    cancelling_count: int = 0
    #: DESIGN.md §15: its sessions whose agent failed to start, and those that
    #: need the person (oldest first), for the task list's rows and badge.
    failed_count: int = 0
    attention_sessions: list[SessionAttentionDTO] = []


class WorktreeDTO(DTO):
    path: str
    branch: str
    base_commit: str
    #: The repository it is a worktree of.
    repo: str


class FileChangeDTO(DTO):
    path: str
    status: Literal["added", "modified", "deleted", "renamed", "ignored"]
    additions: int
    deletions: int
    old_path: str | None = None
    binary: bool = False


class SkippedFileDTO(DTO):
    path: str
    size: int
    reason: Literal["too_large", "unreadable", "repository", "unstorable"]


class SubagentDTO(DTO):
    """DESIGN.md §13: a child session (subagent) of the session's agent."""

    #: The child's own protocol session id (what ``subagent.cancel`` names).
    id: str
    title: str
    #: ACP's work states, its ``idle`` split by stop reason, and ``cancelling``
    #: from our cancel until the child's end.
    state: Literal["running", "requires_action", "cancelling", "completed", "cancelled",
                   "failed", "unknown"]
    #: It runs and the agent lets a client cancel it: ``subagent.cancel`` may stop it.
    cancellable: bool
    #: The turn it was announced in (null: between turns).
    turn_id: str | None
    #: What it was asked to do, where the agent says more than the title ("": the title says it).
    task: str = ""
    #: Its last activity, short: the tool it started, or the end of its text ("": none yet).
    last_activity: str = ""


class CancelProgressDTO(DTO):
    """DESIGN.md §18: the last published phase of a pending cancel."""

    turn_id: str
    phase: Literal["after_step", "link_down", "sent", "late", "escalated"]
    #: ``after_step``: the tool calls it waits for, and the running tool's title.
    tool_call_ids: list[str] | None = None
    title: str | None = None


class ToolCallsStopped(DTO):
    finished: list[str]
    cancelled: list[str]


class SubagentsStopped(DTO):
    stopped: list[str]
    running: list[str]


class Stray(DTO):
    pid: int
    command: str


class ReceiptDTO(DTO):
    """DESIGN.md §18: what a stop did and what still runs."""

    turn_id: str
    #: As the cancel's answer says it (cancelled, escalated, reconciled, ...).
    outcome: str
    #: Who asked: user, stop_all, permission (Deny and stop), interrupt (send now).
    by: str
    when: Literal["now", "after_step"]
    #: When the stop was accepted (ISO 8601), and from then to the agent's
    #: confirmation (null: the agent never confirmed it, e.g. escalated).
    accepted_at: str
    confirmed_ms: float | None
    tool_calls: ToolCallsStopped
    subagents: SubagentsStopped
    queue_parked: int
    #: Files the turn changed (null: being determined, or no checkpoints).
    files_changed: int | None
    revertible: bool
    #: Processes still alive in the agent's process group (null: being
    #: determined, or the executor cannot tell).
    strays: list[Stray] | None
    #: The agent's name and version as it reported them (the cancel figures' key).
    agent_version: str | None = None
    #: How often the cancel was sent again (the agent dropped it at first).
    resent: int = 0
    #: DESIGN.md §20: a cancel held while the remote agent's link was down,
    #: from its acceptance to its send on the link's return (null: not held).
    link_down_ms: float | None = None
    #: Its second step is in: what is still null (files without checkpoints,
    #: strays an executor cannot see) stays null.
    complete: bool = False


class OptionChoice(DTO):
    value: str
    name: str
    description: str | None = None


class OptionDTO(DTO):
    """DESIGN.md §19: an option the agent offers (ACP configOptions, its legacy
    modes and models, Codex's model, effort and approval policy)."""

    id: str
    name: str
    category: str
    type: str
    #: The value chosen (the next turn's, when the agent takes it then).
    current: str | None
    choices: list[OptionChoice]


class CommandDTO(DTO):
    """A slash command the agent offers (ACP available_commands_update)."""

    name: str
    description: str | None = None
    #: What to type after it (null: nothing).
    input_hint: str | None = None


class Cost(DTO):
    amount: float
    currency: str


class UsageDTO(DTO):
    """The context as the agent last reported it (each null when it did not say)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    context_used: int | None = None
    context_size: int | None = None
    cost: Cost | None = None


class AuthMethodDTO(DTO):
    """A way the agent logs in (ACP ``authMethods``; Codex's account login)."""

    id: str
    name: str
    description: str
    #: key: give a key (``agent.login``'s ``key``); terminal: run ``command``,
    #: then choose it; agent: the agent does it itself (a browser it opens).
    kind: Literal["key", "terminal", "agent"]
    #: key methods read from the agent's environment: the variable it goes in.
    var_name: str | None = None
    #: Where a key is made, as the agent said it.
    link: str | None = None
    #: terminal: what to run in a terminal on the agent's machine.
    command: str | None = None


class AuthDTO(DTO):
    """DESIGN.md §19: the agent asked for a login before it opens a session."""

    required: bool
    methods: list[AuthMethodDTO]
    #: Why the last attempt did not log it in (null: none failed).
    error: str | None = None


class SessionDTO(DTO):
    id: str
    task_id: str
    state: SessionStateName
    agent: str
    created_at: str
    updated_at: str
    #: DESIGN.md §6: a cancel is in flight; accept a value only if its revision
    #: is >= the one held.
    cancellation_pending: bool
    cancellation_revision: int = Field(ge=0)
    title: str | None
    archived: bool
    #: The session's agent process is running (the next prompt starts one if not).
    agent_live: bool
    #: DESIGN.md §20: false while its remote agent's host does not answer
    #: (its link is down and re-connecting): its turn is not known to run.
    reachable: bool = True
    #: DESIGN.md §20: its agent, re-attached after a backend restart, was
    #: started from other values of these profile settings (``image``,
    #: ``command``, ``env`` ...): it runs on as started; they apply at its
    #: agent's next start ([]: none known).
    profile_changed: list[str] = []
    #: The wire protocol its agent speaks (DESIGN.md §13); null before an
    #: ``auto`` profile's agent first started in this backend.
    protocol: Literal["acp/1", "acp/2", "codex"] | None
    queued_count: int
    auto_run: bool
    #: The running turn (null when none runs): what ``agent.cancel``'s
    #: ``turn_id`` aims at.
    current_turn_id: str | None
    #: DESIGN.md §12: the directory its agent works in (null: its profile's default)
    #: and its own worktree, if launched with one.
    cwd: str | None = None
    worktree: WorktreeDTO | None = None
    #: DESIGN.md §15: a permission card of it waits for the person's answer.
    needs_approval: bool = False
    #: DESIGN.md §15: ``approval`` while a permission waits; ``turn_ended`` /
    #: ``failed`` once a turn ended (in an error) or its start failed, kept
    #: (persisted) until ``session.seen``; null: nothing.
    attention: Attention | None = None
    #: DESIGN.md §18: a pending cancel's last phase (null: none pending).
    cancel_progress: CancelProgressDTO | None = None
    #: DESIGN.md §19: what its agent offers (as the agent last said it: [] and
    #: null before its first start), with the person's choices.
    options: list[OptionDTO] = []
    commands: list[CommandDTO] = []
    usage: UsageDTO | None = None
    #: DESIGN.md §19: the login its agent asked for (null: none needed).
    auth: AuthDTO | None = None
    #: DESIGN.md §13: the child sessions of its latest turn that had any ([]: none).
    subagents: list[SubagentDTO]


class MessageDTO(DTO):
    id: str
    session_id: str
    turn_id: str | None
    role: Literal["user", "agent", "system"]
    #: ``subagent``: a child session's trace, written when it ended (DESIGN.md §13).
    kind: Literal["text", "tool_call", "permission", "plan", "status", "subagent"]
    content: str
    #: Kind-specific details (tool call status, permission options, a status
    #: message's variant …); docs/contract-notes.md lists them.
    metadata: dict[str, Any]
    created_at: str


class AttachmentDTO(DTO):
    """An upload as a message or a queued entry lists it (DESIGN.md §19)."""

    attachment_id: str
    name: str
    mime: str
    size: int


class QueueEntryDTO(DTO):
    id: str
    session_id: str
    content: str
    created_at: str
    position: int
    client_message_id: str | None
    #: DESIGN.md §19: what the queued message carries, as its message will list them.
    attachments: list[AttachmentDTO] = []
    mentions: list[str] = []


class QueueStateDTO(DTO):
    session_id: str
    entries: list[QueueEntryDTO]
    auto_run: bool
    #: Grows with every change; never goes back, even across a restart.
    queue_revision: int
