"""The boot state a page hydrates from (DESIGN.md §5, §8): the task list, a task.

Embedded in the page (so the first paint already shows every session's state
and cancellation progress) and served at ``GET /api/v1/tasks/{id}/boot``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from supervisor.orchestrator import Caller
from supervisor.root import Supervisor
from supervisor.workspace.projects import is_git
from supervisor.workspace.sandboxing import sandbox_modes, sandbox_warning

__all__ = ["task_boot", "tasks_boot"]


def agents_info(sup: Supervisor) -> dict[str, Any]:
    """For the agent picker: the profiles, the default, each one's sandbox, and
    the warning when the default sandbox cannot run here."""
    return {
        "agents": sorted(sup.config.profiles), "default_agent": sup.config.default_agent,
        "agent_sandbox": sandbox_modes(sup.config.profiles),
        "sandbox_warning": sandbox_warning(sup.config.profiles),
    }


async def tasks_boot(sup: Supervisor, caller: Caller) -> dict[str, Any]:
    """The task list page."""
    tasks = await sup.orchestrator.list_tasks(caller)
    return {"page": "tasks", "tasks": [sup.notify.task_dto(t) for t in tasks]} | agents_info(sup)


async def task_boot(sup: Supervisor, caller: Caller, task_id: str,
                    selected: str | None = None) -> dict[str, Any]:
    task, sessions, selected, messages = await sup.orchestrator.task_view(caller, task_id,
                                                                          selected)
    queue = await sup.orchestrator.selected_queue(selected)
    return {
        "page": "task", "task": sup.notify.task_dto(task),
        "sessions": [sup.notify.session_dto(s) for s in sessions],
        "selected_session_id": selected,
        "messages": [m.to_dto() for m in messages],
        # DESIGN.md §9: the selected session's queued entries (its auto_run is
        # on its session DTO), and the revision they are at.
        "queue": queue.payload()["entries"] if queue is not None else [],
        "queue_revision": queue.revision if queue is not None else 0,
        # DESIGN.md §15: the late cancel's countdown (seconds until the agent is stopped).
        "cancel_timeouts": {"join_s": sup.config.timeouts.cancel_join_s,
                            "escalate_s": sup.config.timeouts.cancel_escalate_s},
        # DESIGN.md §12: the new-session control offers "Own worktree" on a git project.
        "project_is_git": await _project_is_git(task.project_dir),
    } | agents_info(sup)


async def _project_is_git(project_dir: str | None) -> bool:
    if not project_dir:
        return False
    return await trio.to_thread.run_sync(is_git, Path(project_dir))
