"""What ACP v2 changes on the client side, as pure functions over the wire shapes.

``protocols.acp.AcpClient`` negotiates the version (``initialize``) and, on a
v2 connection, the one reader of incoming ACP (protocols/acp_incoming.py) hands
the v2-only shapes to these functions.  They are checked
field by field here (the ``agent-client-protocol`` package's models are v1's);
a shape they do not know stays an ``OtherUpdate``, never an error.

The v2 facts the core relies on (ACP v2 "Prompt lifecycle", "Migrating from v1"):

- ``initialize``: ``info`` and ``capabilities`` both ways; the agent's
  ``capabilities.session`` present commits it to ``session/resume`` (and
  ``session/list``/``close``), so resume needs no marker; there is no
  ``session/load``: ``session/resume`` with ``replayFrom: {"type": "start"}``
  replays the history before it answers.
- ``session/prompt`` is answered ``{}`` once the agent *accepted* the prompt;
  the turn ends with ``state_update {state: "idle", stopReason}``, a cancel
  included (``stopReason: "cancelled"``).  ``running`` / ``requires_action``
  say what foreground work is doing meanwhile.
- ``tool_call`` is gone: the first ``tool_call_update`` of an id creates it;
  ``plan`` is ``plan_update {plan: {type: "items", planId, entries}}``; whole
  messages (``user_message``, ``agent_message``, ``agent_thought``) carry a
  ``content`` array.
- ``session/request_permission`` has a required ``title`` and an optional
  ``subject`` (``{type: "tool_call", toolCall}`` or ``{type: "command", ...}``)
  instead of v1's bare ``toolCall``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from .events import (
    AgentEvent,
    MessageChunk,
    OtherUpdate,
    PermissionOption,
    PlanUpdated,
    ToolCallStarted,
    ToolCallUpdated,
    UserEcho,
)

__all__ = [
    "HISTORY_KINDS",
    "AcpVersion",
    "PermissionFields",
    "StateUpdate",
    "client_info",
    "initialize_params",
    "map_update",
    "parse_permission",
    "parse_state_update",
]

#: A profile's ``acp_version``: ``auto`` offers 2 and takes what the agent answers.
AcpVersion: TypeAlias = Literal["auto", 1, 2]
#: The update kinds a v2 replay (``session/resume`` with ``replayFrom``) sends
#: as history, besides v1's.
HISTORY_KINDS: Final = frozenset({
    "user_message", "agent_message", "agent_thought", "tool_call_update",
    "tool_call_content_chunk", "plan_update", "terminal_update", "terminal_output_chunk",
    "state_update",
})
_FINISHED: Final = frozenset({"completed", "failed", "cancelled"})


def client_info() -> dict[str, str]:
    """v2's required ``info`` (name and version) of the client."""
    return {"name": "turnvisor", "title": "Turnvisor", "version": "0.1.0"}


def initialize_params(version: AcpVersion) -> dict[str, Any]:
    """``initialize``'s params for the profile's ``acp_version``.

    ``1``: v1 exactly.  ``2``: v2 exactly.  ``auto``: v2, plus v1's
    ``clientCapabilities``: an agent that only speaks v1 answers ``1`` (the
    negotiation) but may require the v1 member to parse the request at all."""
    # ``subagents``: v1's opt-in to child sessions (v2 needs none).
    v1_caps = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False,
               "subagents": {}}
    if version == 1:
        return {"protocolVersion": 1, "clientCapabilities": v1_caps}
    params: dict[str, Any] = {"protocolVersion": 2, "info": client_info(), "capabilities": {}}
    if version == "auto":
        params["clientCapabilities"] = v1_caps
    return params


@dataclass(frozen=True, slots=True)
class StateUpdate:
    state: str
    #: Present when the transition ends foreground work (``idle`` only).
    stop_reason: str | None


def parse_state_update(update: dict[str, Any]) -> StateUpdate | None:
    """A ``state_update``'s state and stop reason; None if it has no string state."""
    state = update.get("state")
    if not isinstance(state, str):
        return None
    stop = update.get("stopReason")
    return StateUpdate(state=state, stop_reason=stop if isinstance(stop, str) else None)


def _text(content: Any) -> str | None:
    """The text of a content block, or of an array of them (text blocks only)."""
    blocks = content if isinstance(content, list) else [content]
    texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    if not texts or not all(isinstance(t, str) for t in texts):
        return None
    return "".join(t for t in texts if isinstance(t, str))


def map_update(kind: str, update: dict[str, Any], seen_tools: set[str],
               open_tools: dict[str, str]) -> AgentEvent | None:
    """A v2-only update kind as our event; None for a kind v1 also has (the
    caller maps those).  ``seen_tools``/``open_tools`` are the turn's tool
    calls, updated here: a ``tool_call_update`` of an unseen id starts one."""
    message_id = update.get("messageId")
    mid = message_id if isinstance(message_id, str) else None
    match kind:
        case "agent_message" | "agent_thought":
            text = _text(update.get("content"))
            if text is None:
                return OtherUpdate(kind=kind, payload=update)
            return MessageChunk(text=text, message_id=mid,
                                channel="agent" if kind == "agent_message" else "thought")
        case "user_message":
            text = _text(update.get("content"))
            if text is None:
                return OtherUpdate(kind=kind, payload=update)
            return UserEcho(text=text, message_id=mid)
        case "tool_call_update":
            return _tool_update(update, seen_tools, open_tools)
        case "plan_update":
            plan = update.get("plan")
            entries = plan.get("entries") if isinstance(plan, dict) else None
            if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
                return OtherUpdate(kind=kind, payload=update)
            return PlanUpdated(entries=tuple(entries))
    return None


def _tool_update(update: dict[str, Any], seen: set[str],
                 open_tools: dict[str, str]) -> AgentEvent:
    tool_id = update.get("toolCallId")
    if not isinstance(tool_id, str):
        return OtherUpdate(kind="tool_call_update", payload=update)
    raw_status = update.get("status")
    status = raw_status if isinstance(raw_status, str) else None
    title = update.get("title")
    if status in _FINISHED:
        open_tools.pop(tool_id, None)
    elif status is not None or tool_id not in seen:
        open_tools[tool_id] = status or "pending"
    if tool_id not in seen:
        seen.add(tool_id)
        kind = update.get("kind")
        return ToolCallStarted(
            tool_call_id=tool_id, title=title if isinstance(title, str) else tool_id,
            status=status or "pending", kind=kind if isinstance(kind, str) else None,
            raw=update,
        )
    return ToolCallUpdated(tool_call_id=tool_id, status=status,
                           title=title if isinstance(title, str) else None, raw=update)


@dataclass(frozen=True, slots=True)
class PermissionFields:
    title: str
    tool_call_id: str | None
    options: tuple[PermissionOption, ...]
    details: dict[str, Any]


def parse_permission(params: Any) -> PermissionFields | None:
    """A v2 ``session/request_permission``'s parts; None if it is malformed
    (no ``title``, no well-formed options)."""
    if not isinstance(params, dict):
        return None
    title = params.get("title")
    raw_options = params.get("options")
    if not isinstance(title, str) or not isinstance(raw_options, list):
        return None
    options: list[PermissionOption] = []
    for o in raw_options:
        if not (isinstance(o, dict) and isinstance(o.get("optionId"), str)
                and isinstance(o.get("name"), str) and isinstance(o.get("kind"), str)):
            return None
        options.append(PermissionOption(option_id=o["optionId"], name=o["name"], kind=o["kind"]))
    subject = params.get("subject")
    details: dict[str, Any] = {}
    tool_call_id: str | None = None
    if isinstance(subject, dict):
        tool = subject.get("toolCall") if subject.get("type") == "tool_call" else None
        if isinstance(tool, dict):
            tid = tool.get("toolCallId")
            tool_call_id = tid if isinstance(tid, str) else None
            for wire, key in (("kind", "kind"), ("rawInput", "raw_input"),
                              ("content", "content"), ("locations", "locations")):
                if tool.get(wire):
                    details[key] = tool[wire]
        elif subject.get("type") == "command":
            tid = subject.get("toolCallId")
            tool_call_id = tid if isinstance(tid, str) else None
            details = {k: subject[k] for k in ("command", "cwd") if k in subject}
    description = params.get("description")
    if isinstance(description, str) and description:
        details["description"] = description
    return PermissionFields(title=title, tool_call_id=tool_call_id, options=tuple(options),
                            details=details)
