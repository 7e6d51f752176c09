"""Errors the supervisor raises to its callers; the web layer maps them to codes."""

from __future__ import annotations

__all__ = ["AgentStartError", "CancelFailed", "Conflict", "InvalidRequest", "NotFound",
           "StartError", "SupervisorError"]


class SupervisorError(Exception):
    code = "INTERNAL_ERROR"


class NotFound(SupervisorError):
    """Unknown id, or an id of a workspace the caller cannot see (the same to them)."""

    code = "NOT_FOUND"


class Conflict(SupervisorError):
    """The request does not fit the session's state (a turn already running...)."""

    code = "CONFLICT"


class InvalidRequest(SupervisorError):
    code = "VALIDATION_ERROR"


class AgentStartError(Conflict):
    """The agent could not be started or initialized."""


class CancelFailed(Conflict):
    """The cancel did not complete; the session is still RUNNING and may be retried."""


class StartError(Exception):
    """The server cannot start: one line saying what is wrong and what to do
    (``turnvisor serve`` prints it and exits with status 2)."""
