"""Renaming, archiving and deleting tasks and sessions, and marking a session seen.

Deleting is the only one that touches agents: a session with a running turn
is cancelled first — the same single-flight user cancel as ``agent.cancel``,
so a duplicate cancel joins it and nothing queued runs after it — then its
agent is stopped (process group and all), and only then are its rows deleted.
If the cancel fails the session is left as it was and the error reaches the
caller: nothing is deleted under a turn that may still be running.

Every change is announced to the whole workspace by the store
(``task.changed``/``task.removed``/``session.changed``/``session.removed``),
so every open tab's lists follow without a reload.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .errors import InvalidRequest, NotFound
from .models import Session, SessionState, Task
from .orchestrator import Caller, Orchestrator
from .session.lifecycle import LifecycleManager
from .storage.store import Store

__all__ = ["Catalog"]

MAX_TASK_TITLE = 500
MAX_SESSION_TITLE = 200


class Catalog:
    def __init__(self, store: Store, orchestrator: Orchestrator, lifecycle: LifecycleManager,
                 on_session_deleted: Callable[[Session], Awaitable[None]] | None = None,
                 ) -> None:
        self.store = store
        self.orchestrator = orchestrator
        self.lifecycle = lifecycle
        #: What else goes with a deleted session (its worktree and checkpoints).
        self.on_session_deleted = on_session_deleted

    async def update_task(self, caller: Caller, task_id: str, *, title: str | None = None,
                          archived: bool | None = None) -> Task:
        await self.orchestrator.task(caller, task_id)
        _some_change(title, archived)
        if title is not None:
            title = title.strip()
            if not title or len(title) > MAX_TASK_TITLE:
                raise InvalidRequest(f"title must be 1 to {MAX_TASK_TITLE} characters")
        task = await self.store.update_task(task_id, title=title, archived=archived)
        if task is None:
            raise NotFound(f"task {task_id} not found")
        return task

    async def update_session(self, caller: Caller, session_id: str, *,
                             title: str | None = None, archived: bool | None = None) -> Session:
        await self.orchestrator.session(caller, session_id)
        _some_change(title, archived)
        if title is not None:
            title = title.strip()
            if len(title) > MAX_SESSION_TITLE:
                raise InvalidRequest(f"title must be at most {MAX_SESSION_TITLE} characters")
        session = await self.store.update_session(session_id, title=title, archived=archived)
        if session is None:
            raise NotFound(f"session {session_id} not found")
        return session

    async def seen_session(self, caller: Caller, session_id: str) -> Session:
        """DESIGN.md §15: the person saw the session (a page showed it in a
        visible tab): its turn's end or failure no longer needs them, on every
        tab and device.  A waiting approval stays until answered."""
        session = await self.orchestrator.session(caller, session_id)
        return await self.store.mark_seen(session_id) or session

    async def delete_session(self, caller: Caller, session_id: str) -> None:
        session = await self.orchestrator.session(caller, session_id)
        await self._stop(caller, session)
        await self.store.delete_session(session)
        # A prompt that slipped in between the stop and the delete started an
        # agent for a session that no longer exists: stop it too.
        await self.lifecycle.stop_execution(session_id)
        if self.on_session_deleted is not None:
            await self.on_session_deleted(session)

    async def delete_task(self, caller: Caller, task_id: str) -> None:
        task = await self.orchestrator.task(caller, task_id)
        sessions = await self.store.list_sessions(task_id)
        for session in sessions:
            await self._stop(caller, session)
        await self.store.delete_task(task)
        for session in sessions:
            await self.lifecycle.stop_execution(session.id)
            if self.on_session_deleted is not None:
                await self.on_session_deleted(session)

    async def _stop(self, caller: Caller, session: Session) -> None:
        """Cancel its running turn (or join the cancel under way), then stop its agent."""
        if not self.lifecycle.reachable(session.id):
            # DESIGN.md §20: its host does not answer, so no cancel reaches it
            # now; waiting for one would hold the delete for link_down_cancel_s.
            # Its execution ends (the turn closes, a held cancel settles with it).
            await self.lifecycle.stop_execution(session.id)
            return
        if (session.state is SessionState.RUNNING
                or session.id in self.orchestrator.operations):
            await self.orchestrator.cancel(caller, session.id)
        await self.lifecycle.stop_execution(session.id)


def _some_change(title: str | None, archived: bool | None) -> None:
    # Checked after the id is authorized: another workspace's id is not found,
    # whatever the body says (no oracle for which ids exist).
    if title is None and archived is None:
        raise InvalidRequest("give title and/or archived")
