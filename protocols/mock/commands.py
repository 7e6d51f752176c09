"""Which behaviour script a prompt selects: its first word, when it is a command."""

from __future__ import annotations

from collections.abc import Mapping

from . import faults, scripts, stops
from .base import Script
from .subagents import subagents

__all__ = ["COMMANDS", "script_for"]

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
    "/stderr": faults.stderr,
    "/bigline": faults.bigline,
    "/partial": faults.partial,
    "/badutf8": faults.badutf8,
    "/wrongshape": faults.wrongshape,
    "/closeout": faults.closeout,
    "/flood": faults.flood,
}


def script_for(text: str, extra: Mapping[str, Script] | None = None) -> Script:
    """The script of ``text``'s command (``extra`` first), else the echo."""
    words = text.split()
    command = words[0] if words and words[0].startswith("/") else ""
    if extra and command in extra:
        return extra[command]
    return COMMANDS.get(command, scripts.echo)

