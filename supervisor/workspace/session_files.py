"""Where a session's agent works (DESIGN.md §12), made when the session is created
and removed when it is deleted.

A session of a task with a project works in the project directory, or, with
``worktree``, in a git worktree of its own (``supervisor.workspace.worktrees``); a task
without a project keeps today's default (its profile's cwd, else the data dir's
``work/``: the session's ``cwd`` is then null).  The project wins over a
profile's own ``cwd``: the person chose it for this task.
"""

from __future__ import annotations

import logging

import trio

from ..config import Config
from ..errors import InvalidRequest
from ..models import Session, Task
from ..storage.db import new_id
from ..storage.store import Store
from .projects import resolve_project
from .turn_checkpoints import TurnCheckpoints
from .worktrees import GIT_S, add_worktree, remove_worktree

__all__ = ["create_session", "session_deleted"]

log = logging.getLogger(__name__)


async def create_session(config: Config, store: Store, task: Task, agent: str, *,
                         worktree: bool = False) -> Session:
    """The session's row, with its cwd and worktree made first; nothing is left
    behind if either fails."""
    session_id = new_id()
    if task.project_dir is None:
        if worktree:
            raise InvalidRequest("worktree needs a task with a project_dir (a git repository)")
        return await store.create_session(task.id, agent, session_id=session_id)
    # Resolved again: the directory may have gone, or been swapped for a link, since.
    project = await resolve_project(config, task.project_dir)
    if not worktree:
        return await store.create_session(task.id, agent, session_id=session_id,
                                          cwd=str(project))
    made = await add_worktree(config.data_dir, project, session_id,
                              hide=config.hidden_dirs())
    try:
        return await store.create_session(task.id, agent, session_id=session_id,
                                          cwd=made.path, worktree=made.to_json())
    except BaseException:
        with trio.CancelScope(shield=True, deadline=trio.current_time() + GIT_S):
            await remove_worktree(config.data_dir, made.to_json(), hide=config.hidden_dirs())
        raise


async def session_deleted(config: Config, checkpoints: TurnCheckpoints | None,
                          session: Session) -> None:
    """A deleted session's worktree (its branch kept if it has commits) and
    checkpoints go with it."""
    if session.worktree is not None:
        try:
            kept = await remove_worktree(config.data_dir, session.worktree,
                                         hide=config.hidden_dirs())
            log.info("session %s: worktree %s removed (branch %s %s)", session.id,
                     session.worktree.get("path"), session.worktree.get("branch"),
                     "kept" if kept else "deleted")
        except Exception:
            log.exception("session %s: removing its worktree failed", session.id)
    if checkpoints is not None:
        await checkpoints.forget(session.id)
