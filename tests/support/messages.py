"""A session's status messages as a client reads them (``session.messages``
through the orchestrator), the one way for the supervisor tests."""

from __future__ import annotations

from supervisor.models import Message
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor

__all__ = ["status_messages"]


async def status_messages(sup: Supervisor, caller: Caller, sid: str) -> list[Message]:
    """Session ``sid``'s status messages (the turn ends' words, warnings), oldest first."""
    return [m for m in await sup.orchestrator.list_messages(caller, sid) if m.kind == "status"]
