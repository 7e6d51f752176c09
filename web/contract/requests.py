"""The request payloads of every action (DESIGN.md §4, §9, §14): the models the
gateway and REST validate with, and from which ``GET /api/v1/schema`` is made.

Unknown fields are ignored (older and newer clients keep working); every
declared field is strict: no coercion of ``"5"`` into 5 or of 1 into true.
Limits that come from the configuration (the longest prompt, the queue's
size) are checked against it at validation time (``parse``'s ``limits``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from supervisor.config import Limits

from ..validate import BadInput

__all__ = ["REQUESTS", "Request", "parse"]


def _unicode(value: str) -> str:
    # JSON may spell a lone surrogate ("\ud800"), which has no UTF-8 form:
    # SQLite (and an agent's stdin) would refuse it later, as an internal error.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PydanticCustomError("unicode", "is not valid Unicode") from None
    return value


#: Non-empty strings of bounded length.
Id = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(_unicode)]
#: Attachments (and mentions) one message may carry.
MAX_PARTS = 20
Name = Annotated[str, Field(min_length=1, max_length=100), AfterValidator(_unicode)]
Key = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_unicode)]
Title = Annotated[str, Field(min_length=1, max_length=500), AfterValidator(_unicode)]
#: A title that may be "" (clearing it).
TaskTitleEdit = Annotated[str, Field(max_length=500), AfterValidator(_unicode)]
SessionTitleEdit = Annotated[str, Field(max_length=200), AfterValidator(_unicode)]
#: What a field may hold where the server's configuration sets the bound.
Prompt = Annotated[str, Field(min_length=1, description="at most limits.max_prompt_chars"),
                   AfterValidator(_unicode)]
Delivery = Literal["auto", "queue", "interrupt", "steer"]


def _limits(info: ValidationInfo) -> Limits:
    ctx = info.context
    return ctx["limits"] if isinstance(ctx, dict) and "limits" in ctx else Limits()


def _prompt_limit(value: str | None, info: ValidationInfo) -> str | None:
    limit = _limits(info).max_prompt_chars
    if value is not None and len(value) > limit:
        raise PydanticCustomError("too_long", "must be 1 to {max} characters", {"max": limit})
    return value


class Request(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class NoPayload(Request):
    pass


#: A directory path a client names (DESIGN.md §12; checked against the project roots).
DirPath = Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_unicode)]
#: Paths (relative to the session's cwd) a revert may overwrite, or all of them.
Overwrite = Annotated[list[DirPath], Field(max_length=100_000)] | Literal["all"] | None


class TaskCreate(Request):
    title: Title
    #: Absolute, or relative to the first project root; null: the default work dir.
    project_dir: DirPath | None = None


class TaskRef(Request):
    task_id: Id


class TaskUpdate(Request):
    task_id: Id
    #: "" clears the title.
    title: TaskTitleEdit | None = None
    archived: StrictBool | None = None


class SessionRef(Request):
    session_id: Id


class SessionUpdate(Request):
    session_id: Id
    title: SessionTitleEdit | None = None
    archived: StrictBool | None = None


class SessionLaunch(Request):
    task_id: Id
    agent: Name | None = None
    prompt: Prompt | None = None
    #: DESIGN.md §12: the session works in a git worktree of its own.
    worktree: StrictBool = False

    _check_prompt = field_validator("prompt")(_prompt_limit)


class SessionSubscribe(Request):
    session_id: Id
    #: docs/contract-notes.md: a streamed text message's growth as session.message.appended.
    text_appends: StrictBool = False


class MessageAdd(Request):
    session_id: Id
    content: Prompt
    delivery: Delivery = "auto"
    #: DESIGN.md §14: a repeat with the same id in the same session answers
    #: what the first made and starts, queues or steers nothing again.
    client_message_id: Annotated[str, Field(min_length=1, max_length=128),
                                 AfterValidator(_unicode)] | None = None
    #: DESIGN.md §19: uploads (POST /api/v1/attachments) of the caller's workspace.
    attachments: Annotated[list[Id], Field(max_length=MAX_PARTS)] = []
    #: DESIGN.md §19: files of the session's cwd, as paths relative to it.
    mentions: Annotated[list[Annotated[str, Field(min_length=1, max_length=4096),
                                       AfterValidator(_unicode)]],
                        Field(max_length=MAX_PARTS)] = []

    _check_content = field_validator("content")(_prompt_limit)


class MessageListQuery(Request):
    session_id: Id
    limit: Annotated[StrictInt, Field(ge=1, le=1000)] = 200
    before: Id | None = None


class QueueEntryRef(Request):
    session_id: Id
    entry_id: Id


class QueueUpdate(QueueEntryRef):
    content: Prompt

    _check_content = field_validator("content")(_prompt_limit)


class QueueMove(QueueEntryRef):
    position: Annotated[StrictInt, Field(ge=0, description="at most limits.max_queue")]

    @field_validator("position")
    @classmethod
    def _in_queue(cls, value: int, info: ValidationInfo) -> int:
        hi = _limits(info).max_queue
        if value > hi:
            raise PydanticCustomError("range", "must be an integer from 0 to {hi}", {"hi": hi})
        return value


class QueueSetAutoRun(Request):
    session_id: Id
    auto_run: StrictBool


class AgentCancel(Request):
    session_id: Id
    #: Optional: a cancel naming another task's session is refused.
    task_id: Id | None = None
    #: Optional: the turn the client shows; a cancel of a turn that has ended
    #: never stops the one after it (answered ``turn_ended``).
    turn_id: Id | None = None
    #: DESIGN.md §12: once the cancel settled, revert the cancelled turn's files.
    revert: StrictBool = False
    #: DESIGN.md §15: with ``revert``, the files changed since the turn to put back
    #: all the same (as ``turn.revert``'s ``overwrite``).
    overwrite: Overwrite = None
    #: DESIGN.md §18: "after_step" lets the tool calls running now finish first
    #: (a cancel now when none runs); a later "now" joins and cancels at once.
    when: Literal["now", "after_step"] = "now"


class SessionOptionSet(Request):
    """DESIGN.md §19: one of the options the session's agent offers, set."""

    session_id: Id
    option_id: Key
    value: Key


class AgentLogin(Request):
    """DESIGN.md §19: log the session's agent in with one of its methods; ``key``
    for a key method (never stored by Turnvisor, never echoed)."""

    session_id: Id
    method_id: Key
    key: Annotated[str, Field(min_length=1, max_length=4096),
                   AfterValidator(_unicode)] | None = None


class SessionFiles(Request):
    """DESIGN.md §19: files of the session's cwd to mention, their path holding ``query``."""

    session_id: Id
    query: Annotated[str, Field(max_length=200), AfterValidator(_unicode)] | None = None


class AgentStopNow(Request):
    """DESIGN.md §15: a late cancel escalates at once (no second cancel)."""

    session_id: Id
    #: Optional: the turn whose cancel the client shows.
    turn_id: Id | None = None


class SubagentCancel(Request):
    """DESIGN.md §13: stop one child session (subagent) of the session's agent."""

    session_id: Id
    #: The child's id, as ``subagents[].id`` of the session DTO names it.
    subagent_id: Key


class ProjectBrowse(Request):
    #: Default: the first project root.
    path: DirPath | None = None


class TurnRef(Request):
    session_id: Id
    #: A turn's id, or a revert's (``revert_id``: reverting it undoes that revert).
    turn_id: Id


class TurnRevert(TurnRef):
    """DESIGN.md §15: a file changed since the turn (not by this session's turns) is
    kept unless named here (or ``"all"``)."""

    overwrite: Overwrite = None


class ProjectRootAdd(Request):
    """DESIGN.md §15: a project root added at run time (kept in the data dir)."""

    path: DirPath


class TurnDiff(TurnRef):
    #: One file's diff only.
    path: DirPath | None = None


class PermissionRespond(Request):
    session_id: Id
    request_id: Key
    option_id: Key | None = None
    #: True: the request is declined without choosing an option.
    cancelled: StrictBool = False

    @model_validator(mode="after")
    def _option_or_cancelled(self) -> PermissionRespond:
        if not self.cancelled and self.option_id is None:
            raise PydanticCustomError("missing_option", "option_id is required")
        return self


#: Each action's request payload model.
REQUESTS: dict[str, type[Request]] = {
    "task.create": TaskCreate,
    "task.list": NoPayload,
    "task.update": TaskUpdate,
    "task.delete": TaskRef,
    "session.update": SessionUpdate,
    "session.delete": SessionRef,
    "session.seen": SessionRef,
    "session.launch": SessionLaunch,
    "session.list": TaskRef,
    "session.subscribe": SessionSubscribe,
    "session.unsubscribe": SessionRef,
    "message.add": MessageAdd,
    "message.list": MessageListQuery,
    "queue.list": SessionRef,
    "queue.update": QueueUpdate,
    "queue.remove": QueueEntryRef,
    "queue.move": QueueMove,
    "queue.send_now": QueueEntryRef,
    "queue.set_auto_run": QueueSetAutoRun,
    "agent.cancel": AgentCancel,
    "agent.stop_now": AgentStopNow,
    "subagent.cancel": SubagentCancel,
    "permission.respond": PermissionRespond,
    "server.info": NoPayload,
    "ping": NoPayload,
    "project.list": NoPayload,
    "project.browse": ProjectBrowse,
    "turn.diff": TurnDiff,
    "turn.revert": TurnRevert,
    "turn.revert.preview": TurnRef,
    "project.root.add": ProjectRootAdd,
    "session.diff": SessionRef,
    "turn.receipt": TurnRef,
    "session.kill_strays": SessionRef,
    "workspace.stop_all": NoPayload,
    "session.option.set": SessionOptionSet,
    "session.files": SessionFiles,
    "agent.login": AgentLogin,
}

# One clear sentence per kind of failure, worded as the hand-written checks were.
_MESSAGES: dict[str, str] = {
    "missing": "{name} is required",
    "string_type": "{name} must be a string",
    "int_type": "{name} must be an integer",
    "bool_type": "{name} must be true or false",
    "literal_error": "{name} must be one of {expected}",
    "string_unicode": "{name} is not valid Unicode",
}


def _message(model: type[Request], err: Any) -> str:
    loc = err.get("loc", ())
    name = str(loc[0]) if loc else "payload"
    kind = err.get("type", "")
    if kind in ("string_too_short", "string_too_long"):
        field = model.model_fields.get(name)
        top = next((m.max_length for m in (field.metadata if field else ())
                    if getattr(m, "max_length", None) is not None), None)
        return (f"{name} must be 1 to {top} characters" if top is not None
                else f"{name} must not be empty")
    if kind in ("greater_than_equal", "less_than_equal", "int_type"):
        field = model.model_fields.get(name)
        meta = field.metadata if field else ()
        lo = next((m.ge for m in meta if getattr(m, "ge", None) is not None), None)
        hi = next((m.le for m in meta if getattr(m, "le", None) is not None), None)
        if lo is not None and hi is not None:
            return f"{name} must be an integer from {lo} to {hi}"
        if lo is not None:
            return f"{name} must be an integer from {lo}"
    if kind == "literal_error":
        expected = str(err.get("ctx", {}).get("expected", "")).replace("'", "")
        return _MESSAGES[kind].format(name=name, expected=expected.replace(" or ", ", "))
    if kind in _MESSAGES:
        return _MESSAGES[kind].format(name=name)
    if kind == "missing_option":
        return str(err.get("msg"))
    if kind == "range":
        return f"{name} {err.get('msg')}"
    if kind == "model_type" or kind == "dict_type":
        return "payload must be a JSON object"
    return f"{name} {err.get('msg', 'is invalid')}"


M = TypeVar("M", bound=Request)


def parse(model: type[M], payload: dict[str, Any], limits: Limits) -> M:
    """``payload`` as ``model``, or ``BadInput`` (VALIDATION_ERROR) naming the
    first field at fault."""
    try:
        return model.model_validate(payload, context={"limits": limits})
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        raise BadInput("VALIDATION_ERROR", _message(model, errors[0])) from None
