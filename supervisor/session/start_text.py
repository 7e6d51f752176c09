"""What an agent's failed start says: the one exception inside nursery groups, and
the agent's last stderr lines (supervisor/session/execution.py)."""

from __future__ import annotations

from ..turn.execution_state import Execution

__all__ = ["leaf", "stderr_tail"]


def leaf(exc: BaseException) -> BaseException:
    """The one exception inside nursery groups (the group's text says nothing)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def stderr_tail(ex: Execution | None) -> str:
    """The agent's last stderr lines, as the end of a sentence."""
    if ex is None or not ex.stderr_tail:
        return ""
    return ": " + " | ".join(line.strip()[:300] for line in ex.stderr_tail)
