"""What a tool call's card shows beyond its title: selected fields of the agent's own payload.

The protocol events carry the agent's raw update (`ev.raw`): an ACP `tool_call` /
`tool_call_update` (rawInput, rawOutput, content with `diff` items, locations) or a Codex
`item` (command, aggregatedOutput, exitCode, changes of a fileChange, an MCP call's arguments and
result). Only those fields are kept in the message metadata, each bounded in size, so a chatty
tool cannot grow one message row without limit.
"""

from __future__ import annotations

import json
from typing import Any, Final

from ..storage.db import now

__all__ = ["FINISHED", "finished_stamp", "tool_details"]

#: ACP update fields, then Codex item fields, kept when present.
KEPT: Final = (
    "rawInput", "rawOutput", "content", "locations",
    "command", "cwd", "aggregatedOutput", "exitCode", "durationMs", "changes",
    "server", "tool", "arguments", "result", "error", "query",
)
FINISHED: Final = frozenset({"completed", "failed", "cancelled"})
#: Bound of one kept field, as JSON text.
MAX_FIELD_CHARS: Final = 64_000


def _bounded(value: Any) -> Any:
    if isinstance(value, str):
        if len(value) <= MAX_FIELD_CHARS:
            return value
        return value[:MAX_FIELD_CHARS] + "\n… (truncated)"
    text = json.dumps(value, default=str)
    if len(text) <= MAX_FIELD_CHARS:
        return value
    return text[:MAX_FIELD_CHARS] + "\n… (truncated)"


def tool_details(raw: object) -> dict[str, Any]:
    """The kept fields of a raw tool-call payload (missing or null fields are left out)."""
    if not isinstance(raw, dict):
        return {}
    return {key: _bounded(raw[key]) for key in KEPT if raw.get(key) is not None}


def finished_stamp(metadata: dict[str, Any], status: str | None) -> dict[str, Any]:
    """``{"finished_at": now}`` the first time a tool call reaches a finished status."""
    if status in FINISHED and "finished_at" not in metadata:
        return {"finished_at": now()}
    return {}
