"""How everything an ACP agent sends is read, v1 and v2: the one parser of incoming ACP.

``AcpClient`` (protocols/acp.py) keeps the connection's state and asks this module
what a message says: a ``session/update`` (``read_update``), a prompt's answer
(``read_prompt_answer``), a permission request (``read_permission``).  Each shape has
one reader.  v1 shapes are validated with the ``agent-client-protocol`` package's
pydantic models, liberally (a message that fails validation or names a kind we do
not know is an ``OtherUpdate``/``AgentNotice``, never an error); v2-only shapes are
checked field by field (protocols/acp_v2.py: the package's models are v1's).  The
plain text chunk and the plain prompt answer, the lines of every stream and every
cancel, are read field by field first, exactly as the model would read them (tests
pin the equivalence): the models cost more than the rest of a line's handling and
take over a second to build, which a turn's first cancel should not wait for.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Final, Literal

from pydantic import ValidationError

from . import acp_v2
from .acp_v2 import PermissionFields
from .events import (
    STOP_REASONS,
    AgentEvent,
    AgentNotice,
    MessageChunk,
    OtherUpdate,
    PermissionOption,
    PlanUpdated,
    StopReason,
    ToolCallStarted,
    ToolCallUpdated,
    UserEcho,
)
from .jsonrpc import REQUEST_CANCELLED, UnmatchedResponse

__all__ = [
    "HISTORY_KINDS",
    "is_request_id",
    "load_schema",
    "read_permission",
    "read_prompt_answer",
    "read_update",
    "stop_reason",
    "withdrawn_answer",
]

FINISHED_TOOL_STATES: Final = frozenset({"completed", "failed", "cancelled"})
#: Streamed text chunks in their plain shape are checked field by field (a
#: chunk per line of a streamed answer; the schema's model costs more than the
#: rest of the line's handling); any other shape goes through the model.
TEXT_CHUNK_CHANNELS: Final[dict[str, Literal["agent", "thought"]]] = {
    "agent_message_chunk": "agent", "agent_thought_chunk": "thought"}
_PLAIN_CHUNK_KEYS: Final = frozenset({"sessionUpdate", "content", "messageId", "_meta"})
_PLAIN_TEXT_KEYS: Final = frozenset({"type", "text", "_meta"})
_PLAIN_ANSWER_KEYS: Final = frozenset({"stopReason", "_meta"})
#: The schema's ``StopReason`` values (ours add "error", which no agent sends).
_SCHEMA_STOP_REASONS: Final = frozenset(
    {"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})
#: Update kinds that are conversation history: what a ``session/load`` replays.
HISTORY_KINDS: Final = frozenset({
    "user_message_chunk", "agent_message_chunk", "agent_thought_chunk",
    "tool_call", "tool_call_update", "plan",
})


_loaded: list[ModuleType] = []


def load_schema() -> None:
    """Build the schema models now (a worker thread's job: over a second of
    CPU), so that no update, answer or cancel of a turn pays for it later.
    The plain text chunks of a stream do not need them: without this, the
    first use could be a turn's end, on the cancel path."""
    models()


def models() -> ModuleType:
    """The schema models, imported on first use: building them takes over a
    second, which ``turnvisor serve`` should not spend before it listens
    (``supervisor.root`` warms them up on a worker thread instead).  Kept
    once imported: this is asked for every update an agent streams."""
    if not _loaded:
        _loaded.append(importlib.import_module("protocols._acp_models"))
    return _loaded[0]


def read_update(kind: str, update: dict[str, Any], version: int, seen_tools: set[str],
                open_tools: dict[str, str]) -> list[AgentEvent]:
    """A ``session/update`` of ``kind`` (not v2's ``state_update``, which is the
    client's) as our events.  ``seen_tools``/``open_tools``: the turn's tool calls,
    updated here."""
    if version == 2:
        mapped = acp_v2.map_update(kind, update, seen_tools, open_tools)
        if mapped is not None:
            return [mapped]
    channel = TEXT_CHUNK_CHANNELS.get(kind)
    if channel is not None:
        chunk = plain_text_chunk(channel, update)
        if chunk is not None:
            return [chunk]
    model = models().UPDATE_MODELS.get(kind)
    if model is None:
        return [OtherUpdate(kind=kind, payload=update)]
    try:
        parsed = model.model_validate(update)
    except ValidationError:
        return [OtherUpdate(kind=kind, payload=update),
                AgentNotice(message=f"{kind} of an unexpected shape", level="info")]
    return [_from_model(kind, parsed, update, open_tools)]


def read_prompt_answer(result: Any) -> tuple[StopReason, AgentNotice | None]:
    """A v1 ``session/prompt`` answer: its stop reason, and a notice if its shape was off."""
    stop = plain_stop_reason(result)
    if stop is not None:
        return stop, None
    try:
        return stop_reason(models().PromptResponse.model_validate(result).stop_reason), None
    except ValidationError:
        raw = result.get("stopReason") if isinstance(result, dict) else None
        notice = AgentNotice(message=f"unexpected prompt result {result!r}")
        return stop_reason(raw if isinstance(raw, str) else "end_turn"), notice


def read_permission(params: Any, version: int) -> PermissionFields | str:
    """A ``session/request_permission``'s parts, or why it is invalid."""
    if version == 2:
        fields = acp_v2.parse_permission(params)
        return fields if fields is not None else "invalid permission request (v2)"
    try:
        parsed = models().RequestPermissionRequest.model_validate(params)
    except ValidationError as exc:
        return f"invalid permission request: {exc}"
    tool = parsed.tool_call
    return PermissionFields(
        title=tool.title or tool.tool_call_id, tool_call_id=tool.tool_call_id,
        options=tuple(PermissionOption(option_id=o.option_id, name=o.name, kind=str(o.kind))
                      for o in parsed.options),
        details=_tool_details(params))


def _from_model(kind: str, parsed: Any, raw: dict[str, Any],
                open_tools: dict[str, str]) -> AgentEvent:
    """A v1 update the schema model validated, as our event."""
    if kind in ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk"):
        content = parsed.content
        text = getattr(content, "text", None)
        if text is None:
            return OtherUpdate(kind=kind, payload=raw)
        if kind == "user_message_chunk":
            # A replay never gets here (consumed above): this is an echo.
            return UserEcho(text=text, message_id=parsed.message_id)
        return MessageChunk(
            text=text, channel="agent" if kind == "agent_message_chunk" else "thought",
            message_id=parsed.message_id,
        )
    if kind == "tool_call":
        status = str(parsed.status or "pending")
        if status not in FINISHED_TOOL_STATES:
            open_tools[parsed.tool_call_id] = status
        return ToolCallStarted(
            tool_call_id=parsed.tool_call_id, title=parsed.title, status=status,
            kind=str(parsed.kind) if parsed.kind else None, raw=raw,
        )
    if kind == "tool_call_update":
        new_status = str(parsed.status) if parsed.status else None
        if new_status in FINISHED_TOOL_STATES:
            open_tools.pop(parsed.tool_call_id, None)
        elif new_status is not None:
            open_tools[parsed.tool_call_id] = new_status
        return ToolCallUpdated(
            tool_call_id=parsed.tool_call_id, status=new_status, title=parsed.title, raw=raw
        )
    if kind == "plan":
        # Wire names (by_alias), as Codex plans are mapped: not pydantic's field_meta.
        return PlanUpdated(entries=tuple(
            e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in parsed.entries
        ))
    return OtherUpdate(kind=kind, payload=raw)


#: ACP tool call members worth showing with a permission request (wire name →
#: ``details`` key).
_TOOL_DETAILS: Final = {
    "kind": "kind", "rawInput": "raw_input", "content": "content", "locations": "locations",
}


def _tool_details(params: Any) -> dict[str, Any]:
    """What a ``session/request_permission`` asks about, as the agent wrote it."""
    tool = params.get("toolCall") if isinstance(params, dict) else None
    if not isinstance(tool, dict):
        return {}
    return {key: tool[wire] for wire, key in _TOOL_DETAILS.items() if tool.get(wire)}


def is_request_id(value: object) -> bool:
    """A JSON-RPC id (a bool is not one, though Python says it is an int)."""
    return isinstance(value, int | str) and not isinstance(value, bool)


def withdrawn_answer(method: str, ev: UnmatchedResponse) -> AgentNotice:
    """What the agent's answer to a request we withdrew (``$/cancel_request``) says."""
    err = ev.message.get("error") if isinstance(ev.message, dict) else None
    if isinstance(err, dict) and err.get("code") == REQUEST_CANCELLED:
        text = f"the agent confirmed the withdrawal of {method} ({ev.id!r})"
    elif err is not None:
        text = f"the agent answered the withdrawn {method} ({ev.id!r}) with an error: {err!r}"
    else:
        text = f"late answer to the withdrawn {method} ({ev.id!r}) ignored"
    return AgentNotice(message=text, level="info")


def stop_reason(value: str) -> StopReason:
    return value if value in STOP_REASONS else "end_turn"  # type: ignore[return-value]


def plain_stop_reason(result: Any) -> StopReason | None:
    """The stop reason of a prompt's answer of exactly the plain shape
    (``{"stopReason"}``, optional ``_meta``), as the schema's model reads it;
    None for any other shape (the model decides).  A turn's end, a cancel's
    answer among them, then never waits for the models to be built."""
    if type(result) is not dict or not _PLAIN_ANSWER_KEYS.issuperset(result):
        return None
    stop = result.get("stopReason")
    meta = result.get("_meta")
    if stop not in _SCHEMA_STOP_REASONS or (meta is not None and type(meta) is not dict):
        return None
    return stop_reason(stop)


def plain_text_chunk(channel: Literal["agent", "thought"],
                      update: dict[str, Any]) -> MessageChunk | None:
    """A text chunk of exactly the plain shape (``{"sessionUpdate", "content":
    {"type": "text", "text"}}``, optional ``messageId`` and ``_meta``), as the
    schema's model would map it; None for any other shape (the model decides)."""
    content = update.get("content")
    if (type(content) is not dict or content.get("type") != "text"
            or not _PLAIN_TEXT_KEYS.issuperset(content)
            or not _PLAIN_CHUNK_KEYS.issuperset(update)):
        return None
    text = content.get("text")
    message_id = update.get("messageId")
    if type(text) is not str or (message_id is not None and type(message_id) is not str):
        return None
    for meta in (update.get("_meta"), content.get("_meta")):
        if meta is not None and type(meta) is not dict:
            return None
    return MessageChunk(text=text, channel=channel, message_id=message_id)
