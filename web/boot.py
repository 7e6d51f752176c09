"""The task-detail boot state a page hydrates from (DESIGN.md §5, §8).

Embedded in the page (so the first paint already shows every session's state
and cancellation progress) and served at ``GET /api/v1/tasks/{id}/boot``.
"""

from __future__ import annotations

from typing import Any

from supervisor.orchestrator import Caller
from supervisor.root import Supervisor

__all__ = ["task_boot"]


async def task_boot(sup: Supervisor, caller: Caller, task_id: str,
                    selected: str | None = None) -> dict[str, Any]:
    task, sessions, selected, messages = await sup.orchestrator.task_view(caller, task_id,
                                                                          selected)
    return {
        "page": "task", "task": task.to_dto(),
        "sessions": [sup.notify.session_dto(s) for s in sessions],
        "selected_session_id": selected,
        "messages": [m.to_dto() for m in messages],
        "agents": sorted(sup.config.profiles), "default_agent": sup.config.default_agent,
    }
