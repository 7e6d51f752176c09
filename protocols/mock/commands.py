"""Which behaviour script a prompt selects: its first word, when it is a command; and
the commands as the agent offers them (ACP ``available_commands_update``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from . import attachments, faults, mcp, reports, scripts, stops
from .base import Script
from .subagents import subagents

__all__ = ["COMMANDS", "OFFERED", "available_commands", "script_for"]

COMMANDS: Mapping[str, Script] = {
    "/delay": scripts.delay,
    "/dropcancel": scripts.delay,
    "/slow": scripts.slow,
    "/hang": scripts.hang,
    "/pause": scripts.pause,
    "/permission": scripts.permission,
    "/withdraw": scripts.withdraw,
    "/tool": scripts.tool,
    "/crash": scripts.crash,
    "/garbage": scripts.garbage,
    "/recall": scripts.recall,
    "/write": scripts.one_edit,
    "/append": scripts.one_edit,
    "/rm": scripts.one_edit,
    "/edits": scripts.many_edits,
    "/subagents": subagents,
    "/steps": stops.steps,
    "/stray": stops.stray,
    "/usage": reports.usage,
    "/title": reports.title,
    "/options": reports.options,
    "/agentset": reports.agentset,
    "/mcp": mcp.mcp,
    "/attachments": attachments.attachments,
    "/stderr": faults.stderr,
    "/bigline": faults.bigline,
    "/partial": faults.partial,
    "/badutf8": faults.badutf8,
    "/wrongshape": faults.wrongshape,
    "/closeout": faults.closeout,
    "/flood": faults.flood,
}


#: The commands the agent offers a client, with what they do and what they take
#: (the fault injections of the reliability suite are not offered).
OFFERED: Final[dict[str, tuple[str, str | None]]] = {
    "delay": ("Stream a chunk every 100 ms for a while", "<ms>"),
    "slow": ("Stream, ignoring a cancel until the time is up", "<ms>"),
    "tool": ("Run one tool call", "<ms>"),
    "steps": ("Run shell-like steps in sequence", "<n> <ms> [permission]"),
    "permission": ("Ask for permission and wait", None),
    "write": ("Write a file under the session's directory", "<path> <text>"),
    "subagents": ("Run child sessions", "<n> [ms]"),
    "recall": ("Say the earlier prompts of this session", None),
    "usage": ("Report token usage", "[tokens used]"),
    "title": ("Name this session", "<title>"),
    "options": ("Say the mode and model in effect", None),
    "agentset": ("Change an option as the agent", "<option> <value>"),
    "mcp": ("List the MCP servers this session was given", None),
    "attachments": ("List the images and files the prompt carried", None),
}


def available_commands() -> list[dict[str, Any]]:
    """``available_commands_update``'s list (``input.hint`` where a command takes one)."""
    return [{"name": name, "description": description,
             "input": {"hint": hint} if hint is not None else None}
            for name, (description, hint) in OFFERED.items()]


def script_for(text: str, extra: Mapping[str, Script] | None = None) -> Script:
    """The script of ``text``'s command (``extra`` first), else the echo."""
    words = text.split()
    command = words[0] if words and words[0].startswith("/") else ""
    if extra and command in extra:
        return extra[command]
    return COMMANDS.get(command, scripts.echo)

