"""What each action answers and what each notification carries (DESIGN.md §4,
§9, §14), and the envelope around them.  Declarations only: the server builds
its frames where it always has (supervisor/notify.py, the action handlers);
every frame the WebSocket tests send and receive is checked against the schema
made from these (tests/support/ws.py), so the two cannot drift apart."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from .dtos import (
    DTO,
    Attention,
    CommandDTO,
    FileChangeDTO,
    MessageDTO,
    OptionDTO,
    QueueEntryDTO,
    QueueStateDTO,
    ReceiptDTO,
    SessionDTO,
    SkippedFileDTO,
    Stray,
    SubagentDTO,
    TaskDTO,
    UsageDTO,
)

__all__ = ["ERROR_CODES", "NOTIFICATIONS", "RESPONSES", "Envelope", "ErrorPayload"]

ERROR_CODES = ("BAD_REQUEST", "UNAUTHORIZED", "FORBIDDEN", "NOT_FOUND", "CONFLICT",
               "VALIDATION_ERROR", "UNKNOWN_ACTION", "UNAVAILABLE", "INTERNAL_ERROR")


class Envelope(BaseModel):
    """Every frame, either way."""

    model_config = ConfigDict(extra="forbid")
    #: A request's id is echoed by its response or error; notifications get a fresh one.
    id: str | int | None = None
    type: Literal["request", "response", "error", "notification"]
    action: str = Field(max_length=100)
    payload: dict[str, Any] | None = None
    timestamp: str | None = None


class ErrorPayload(DTO):
    code: Literal["BAD_REQUEST", "UNAUTHORIZED", "FORBIDDEN", "NOT_FOUND", "CONFLICT",
                  "VALIDATION_ERROR", "UNKNOWN_ACTION", "UNAVAILABLE", "INTERNAL_ERROR"]
    message: str


# -- responses -------------------------------------------------------------------


class Success(DTO):
    success: Literal[True]


class TaskDeleted(Success):
    task_id: str


class SessionDeleted(Success):
    session_id: str


class TaskList(DTO):
    tasks: list[TaskDTO]


class SessionList(DTO):
    sessions: list[SessionDTO]


class MessagePage(DTO):
    messages: list[MessageDTO]


class Started(MessageDTO):
    """The message went to the agent: a new turn (``started``) or into the
    running one (``steered``)."""

    delivery: Literal["started", "steered"]
    #: A repeat of an earlier message.add (same client_message_id): nothing new ran.
    repeated: bool = False


class Queued(DTO):
    delivery: Literal["queued"]
    entry: QueueEntryDTO
    #: A steer was asked for where the agent takes none: it was queued instead.
    steer_unsupported: bool = False
    repeated: bool = False


class Interrupting(DTO):
    delivery: Literal["interrupting"]
    entry: QueueEntryDTO


class KeptFile(DTO):
    path: str
    reason: str


class RevertAnswer(Success):
    """DESIGN.md §12: what ``turn.revert`` restored."""

    session_id: str
    #: The turn (or revert) whose start the files were restored to.
    turn_id: str
    #: This revert: ``turn.revert`` of it undoes it.
    revert_id: str
    #: Later turns whose changes went too.
    later_turns: list[str]
    written: list[str]
    deleted: list[str]
    #: Left as they were: ``edited_since`` (changed since the turn, not by this
    #: session's turns, and not named in ``overwrite``), or they could not be saved
    #: first (too large or ignored now).
    kept: list[KeptFile]
    #: Every file the revert would change that was changed since the turn by
    #: something else (by hand, another session): kept, or overwritten when named
    #: in ``overwrite`` (the safety checkpoint, i.e. reverting this revert, has them).
    edited_since: list[str]
    #: Removed although no checkpoint holds their content (created since that turn's
    #: start, hidden by the project's ignore rules or beyond what git can hold):
    #: reverting this revert does not bring them back.
    removed_unsaved: list[KeptFile] = []


class PlannedFile(DTO):
    path: str
    #: restored: its content goes back; deleted: it did not exist then;
    #: re-created: it is gone now.
    action: Literal["restored", "deleted", "re-created"]
    #: Changed since the turn by something else: kept unless chosen in ``overwrite``.
    edited_since: bool


class RevertPreview(DTO):
    """DESIGN.md §15 ``turn.revert.preview``: what ``turn.revert`` would change now."""

    session_id: str
    turn_id: str
    #: Only files the revert changes (one already as it was is not listed).
    files: list[PlannedFile]
    #: Later turns that changed files: their changes go too.
    later_turns: list[str]


class ProjectRootAdded(DTO):
    #: The root added (real path), and every root now.
    root: str
    roots: list[str]


class CancelAnswer(Success):
    session_id: str
    #: cancelled: the agent stopped the turn; escalated: it had to be stopped;
    #: reconciled: no live execution, the record was repaired; nothing_running;
    #: turn_ended: the turn asked for had already ended (nothing was touched).
    outcome: Literal["cancelled", "escalated", "reconciled", "nothing_running", "turn_ended"]
    #: The turn the cancel acted on (or was aimed at); null: none.
    turn_id: str | None
    #: Only when the store refused the record of the stop (the disk is full):
    #: the agent stopped all the same; the record is written when it can be.
    agent_stopped: bool | None = None
    record_written: bool | None = None
    record_error: str | None = None
    #: ``revert: true``: the cancelled turn's revert, or why there was none.
    reverted: RevertAnswer | None = None
    revert_error: str | None = None
    #: DESIGN.md §18: what the stop did and what still runs (a turn was stopped).
    receipt: ReceiptDTO | None = None


class StopNowAnswer(Success):
    session_id: str
    #: Whether a late cancel was there to escalate (false: nothing done).
    stopping: bool


class SubagentCancelAnswer(Success):
    """DESIGN.md §13 ``subagent.cancel``: ``cancel_sent`` (its own protocol cancel
    was written; its end comes as ``session.subagent.changed``),
    ``already_cancelling``, or ``already_finished`` (it had ended: nothing sent)."""

    session_id: str
    subagent_id: str
    outcome: Literal["cancel_sent", "already_cancelling", "already_finished"]
    #: The child as it was when asked.
    subagent: SubagentDTO


class ProjectList(DTO):
    roots: list[str]
    #: Project directories of recent tasks, newest first.
    recent: list[str]
    #: Where a session with no project works: its own folder ``<work_dir>/<workspace
    #: id>/<session id>`` (DESIGN.md §15: the page names it, the path on hover).
    work_dir: str | None = None


class ProjectDir(DTO):
    name: str
    is_git: bool


class ProjectBrowseAnswer(DTO):
    path: str
    is_git: bool
    dirs: list[ProjectDir]


class TurnDiffAnswer(DTO):
    session_id: str
    turn_id: str
    #: Unified diff (cut at 4 MiB, with a note).
    diff: str
    files: list[FileChangeDTO]


class SessionFileChange(FileChangeDTO):
    #: Also changed outside this session's turns (by hand, another session).
    outside: bool = False


class SessionDiffAnswer(DTO):
    """What this session's own turns changed (the sum of each turn's before→after)."""

    session_id: str
    diff: str
    files: list[SessionFileChange]


class ServerInfo(DTO):
    version: str
    #: The wire contract's version; grows when a change could break a client.
    protocol_version: int
    #: Named capabilities beyond DESIGN.md §4 a client may test for.
    features: list[str]
    #: The agent profiles a session may be launched with.
    agents: list[str]
    #: DESIGN.md §18: each profile's measured cancel figures (``agents`` stays names).
    agent_profiles: list[AgentProfileInfo] = []


class CancelFigures(DTO):
    """An agent version's cancels as real use measured them (stored receipts)."""

    count: int
    p50_ms: float | None
    p95_ms: float | None
    escalated: int
    #: Cancels the agent dropped (it went on until the cancel was sent again).
    dropped_early: int
    version: str | None


class AgentProfileInfo(DTO):
    name: str
    cancel: CancelFigures
    #: Set when its latest version's figures differ markedly from the version before.
    note: str | None


class ReceiptAnswer(DTO):
    receipt: ReceiptDTO


class KillStraysAnswer(DTO):
    session_id: str
    killed: list[int]
    remaining: list[Stray]


class StopAllEntry(DTO):
    session_id: str
    #: The turn stopped (null: nothing was running by the time, or only subagents).
    turn_id: str | None
    outcome: str | None = None
    receipt: ReceiptDTO | None
    error: str | None = None


class OptionSetAnswer(Success):
    session_id: str
    option_id: str
    value: str
    #: now: the agent took it; next_turn: the next turn runs with it.
    applied: Literal["now", "next_turn"]


class LoginAnswer(Success):
    session_id: str
    method_id: str
    #: The session as it now is (its ``auth`` null: logged in).
    session: SessionDTO


class FilesAnswer(DTO):
    #: At most 50 paths relative to the session's cwd (no link, nothing under .git).
    files: list[str]


class OptionsChanged(DTO):
    session_id: str
    options: list[OptionDTO]


class CommandsChanged(DTO):
    session_id: str
    commands: list[CommandDTO]


class UsageChanged(DTO):
    session_id: str
    #: The turn it was reported in (null: between turns).
    turn_id: str | None
    usage: UsageDTO | None


class StopAllAnswer(DTO):
    sessions: list[StopAllEntry]


class EmptyAnswer(DTO):
    pass


class MessageAddAnswer(RootModel[Started | Queued | Interrupting]):
    pass


class SendNowAnswer(RootModel[Started | Interrupting]):
    pass


RESPONSES: dict[str, type[BaseModel]] = {
    "task.create": TaskDTO,
    "task.list": TaskList,
    "task.update": TaskDTO,
    "task.delete": TaskDeleted,
    "session.update": SessionDTO,
    "session.delete": SessionDeleted,
    "session.seen": SessionDTO,
    "session.launch": SessionDTO,
    "session.list": SessionList,
    "session.subscribe": Success,
    "session.unsubscribe": Success,
    "message.add": MessageAddAnswer,
    "message.list": MessagePage,
    "queue.list": QueueStateDTO,
    "queue.update": QueueStateDTO,
    "queue.remove": QueueStateDTO,
    "queue.move": QueueStateDTO,
    "queue.send_now": SendNowAnswer,
    "queue.set_auto_run": QueueStateDTO,
    "agent.cancel": CancelAnswer,
    "agent.stop_now": StopNowAnswer,
    "subagent.cancel": SubagentCancelAnswer,
    "turn.receipt": ReceiptAnswer,
    "session.kill_strays": KillStraysAnswer,
    "workspace.stop_all": StopAllAnswer,
    "session.option.set": OptionSetAnswer,
    "session.files": FilesAnswer,
    "agent.login": LoginAnswer,
    "permission.respond": Success,
    "server.info": ServerInfo,
    "ping": EmptyAnswer,
    "project.list": ProjectList,
    "project.browse": ProjectBrowseAnswer,
    "turn.diff": TurnDiffAnswer,
    "turn.revert": RevertAnswer,
    "turn.revert.preview": RevertPreview,
    "project.root.add": ProjectRootAdded,
    "session.diff": SessionDiffAnswer,
}


# -- notifications ---------------------------------------------------------------


class StateChanged(DTO):
    session_id: str
    task_id: str
    new_state: str
    updated_at: str
    cancellation_pending: bool
    cancellation_revision: int
    agent_live: bool
    #: DESIGN.md §20: false while a remote agent's host does not answer.
    reachable: bool = True
    current_turn_id: str | None


class TaskChanged(DTO):
    task: TaskDTO


class TaskRemoved(DTO):
    task_id: str


class SessionChanged(DTO):
    session: SessionDTO


class SessionRemoved(DTO):
    session_id: str
    task_id: str


class SessionAttention(DTO):
    """DESIGN.md §15, to the whole workspace: whether a session waits for an
    approval or is being cancelled, for every tab's lists."""

    session_id: str
    task_id: str
    needs_approval: bool
    cancelling: bool
    #: The session DTO's ``attention`` as it now is (null: nothing needs the person).
    attention: Attention | None = None


class CancellationChanged(DTO):
    session_id: str
    cancellation_pending: bool
    cancellation_revision: int


class MessageEvent(DTO):
    session_id: str
    message: MessageDTO


class MessageAppended(DTO):
    """A streamed text message grew by ``text`` at ``offset`` (UTF-16 code
    units); only to connections subscribed with ``text_appends``."""

    session_id: str
    message_id: str
    turn_id: str | None
    offset: int
    text: str


class PermissionRequested(DTO):
    session_id: str
    request_id: str | None
    message_id: str
    title: str
    options: list[dict[str, Any]]


class PermissionCancelled(DTO):
    session_id: str
    request_id: str


class TurnCompleted(DTO):
    session_id: str
    turn_id: str
    stop_reason: str


class CancelProgress(DTO):
    session_id: str
    turn_id: str
    phase: Literal["after_step", "link_down", "sent", "late", "escalated"]
    #: ``after_step`` (DESIGN.md §18): the tool calls it waits for, the running tool's title.
    tool_call_ids: list[str] | None = None
    title: str | None = None


class TurnStalled(DTO):
    session_id: str
    turn_id: str
    silent_s: int


class AgentCancelled(DTO):
    session_id: str
    turn_id: str


class SubagentChanged(DTO):
    """DESIGN.md §13: a child session was announced or changed."""

    session_id: str
    subagent: SubagentDTO


class TurnChanges(DTO):
    """DESIGN.md §12: what a turn that changed files changed."""

    session_id: str
    turn_id: str
    files: list[FileChangeDTO]
    skipped: list[SkippedFileDTO]


NOTIFICATIONS: dict[str, type[DTO]] = {
    "session.state_changed": StateChanged,
    "task.changed": TaskChanged,
    "task.removed": TaskRemoved,
    "session.changed": SessionChanged,
    "session.removed": SessionRemoved,
    "session.attention": SessionAttention,
    "session.cancellation_changed": CancellationChanged,
    "session.message.added": MessageEvent,
    "session.message.updated": MessageEvent,
    "session.message.appended": MessageAppended,
    "session.permission.requested": PermissionRequested,
    "session.permission.cancelled": PermissionCancelled,
    "session.turn.completed": TurnCompleted,
    "session.cancel.progress": CancelProgress,
    "session.queue.changed": QueueStateDTO,
    "session.turn.stalled": TurnStalled,
    "session.agent.cancelled": AgentCancelled,
    "session.turn.changes": TurnChanges,
    "session.subagent.changed": SubagentChanged,
    "session.options.changed": OptionsChanged,
    "session.commands.changed": CommandsChanged,
    "session.usage.changed": UsageChanged,
}
