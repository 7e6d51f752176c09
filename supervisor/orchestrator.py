"""The orchestrator: the single path every client (WebSocket, REST, CLI) takes.

It authorizes each id against the caller's workspace (another workspace's ids
are simply not found), and it decides, for a cancel, who may start or join
the session's single-flight operation:

- the first ``cancel`` begins the operation (``Cancellations.begin``), a
  concurrent duplicate joins it and gets the owner's result, and after it
  settles a new cancel is a new operation;
- a cancel aimed at a turn that is not the one running is fenced off
  (DESIGN.md §14);
- what the operation does — the protocol cancel, join window, escalation,
  reconciliation, the settle — is ``supervisor.session.cancellation``'s; it runs in
  the operations nursery, never the request's, so a client that disconnects
  does not abort it.  On a failure the session stays RUNNING and a retry is
  a new operation.

Idle cancel (no running turn) is a harmless success without a status message.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import trio

from .config import Config
from .errors import Conflict, InvalidRequest, NotFound
from .models import Message, QueueEntry, QueueState, Session, Task
from .notify import Notifier
from .session.cancellation import Cancellations
from .session.lifecycle import CancelOutcome, LifecycleManager
from .session.login import AgentLoginRequired
from .session.queue import Delivery, TurnQueue
from .storage.store import Store
from .turn.cancel_op import CancelOperation
from .turn.tracing import CancelTrace
from .turn.turn_outcome import CancelResult, StopWhen
from .workspace.attachments import AttachmentStore, PromptRefs, check_mention
from .workspace.projects import resolve_project
from .workspace.sandboxing import project_identity
from .workspace.session_files import create_session

__all__ = ["Caller", "CancelOperation", "Orchestrator"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the workspace their token opens."""

    workspace_id: str


class Orchestrator:
    def __init__(self, config: Config, store: Store, notifier: Notifier,
                 lifecycle: LifecycleManager, cancellations: Cancellations,
                 queue: TurnQueue) -> None:
        self.config = config
        self.store = store
        self.notify = notifier
        self.lifecycle = lifecycle
        self.cancellations = cancellations
        self.queue = queue
        #: The cancel operation in flight per session (``Cancellations``').
        self.operations = cancellations.operations
        #: message.add calls in flight by (session, client_message_id).
        self._adding: dict[tuple[str, str], trio.Event] = {}
        #: session → (workspace, task): immutable once created, so cancel's
        #: authorization needs no store read after the first.
        self._owners: dict[str, tuple[str, str]] = {}

    @property
    def trace(self) -> CancelTrace[CancelOperation]:
        """The cancel path's tracing hook (``[server] trace_cancels``)."""
        trace = self.cancellations.settler.trace
        if trace is None:
            raise RuntimeError("cancel tracing is off: [server] trace_cancels = true")
        return trace

    @property
    def settled(self) -> list[CancelOperation]:
        """Settled operations, newest last (bounded; the tracing hook's)."""
        return [t.op for t in self.trace.settled]

    @property
    def operations_started(self) -> int:
        return self.trace.started

    @property
    def settled_by_close(self) -> int:
        """Operations settled by their turn's close itself (no task woken to settle them)."""
        return self.trace.settled_by_close

    # -- authorization --------------------------------------------------------

    async def task(self, caller: Caller, task_id: str) -> Task:
        task = await self.store.get_task(task_id)
        if task is None or task.workspace_id != caller.workspace_id:
            raise NotFound(f"task {task_id} not found")
        return task

    async def session(self, caller: Caller, session_id: str) -> Session:
        session = await self.store.get_session(session_id)
        if session is None or session.workspace_id != caller.workspace_id:
            raise NotFound(f"session {session_id} not found")
        self._owners[session_id] = (session.workspace_id, session.task_id)
        return session

    # -- tasks and sessions ---------------------------------------------------

    async def create_task(self, caller: Caller, title: str,
                          project_dir: str | None = None) -> Task:
        title = title.strip()
        if not title or len(title) > 500:
            raise InvalidRequest("title must be 1 to 500 characters")
        project = identity = None
        if project_dir is not None:
            project = str(await resolve_project(self.config, project_dir))
            # What every launch checks the directory it binds against (§17).
            identity = await trio.to_thread.run_sync(project_identity, self.config, project)
        return await self.store.create_task(caller.workspace_id, title, project, identity)

    async def list_tasks(self, caller: Caller) -> list[Task]:
        return await self.store.list_tasks([caller.workspace_id])

    async def list_sessions(self, caller: Caller, task_id: str) -> list[dict[str, Any]]:
        await self.task(caller, task_id)
        return [self.notify.session_dto(s) for s in await self.store.list_sessions(task_id)]

    async def launch_session(self, caller: Caller, task_id: str, agent: str | None = None,
                             prompt: str | None = None, *,
                             worktree: bool = False) -> dict[str, Any]:
        task = await self.task(caller, task_id)
        agent = agent or self.config.default_agent
        if agent not in self.config.profiles:
            raise InvalidRequest(f"unknown agent {agent!r}")
        session = await create_session(self.config, self.store, task, agent, worktree=worktree)
        session = await self._refresh(session)
        try:
            await self.lifecycle.ensure_execution(session)
        except AgentLoginRequired:
            # DESIGN.md §19: the session is made, and shows the login its agent asked for;
            # its first prompt goes once it is logged in (agent.login).
            self.lifecycle.execution.logins.keep_prompt(session.id, prompt)
            return self.notify.session_dto(await self._refresh(session))
        if prompt:
            await self.send_message(caller, session.id, prompt)
        return self.notify.session_dto(await self._refresh(session))

    async def _refresh(self, session: Session) -> Session:
        fresh = await self.store.get_session(session.id)
        if fresh is None:
            raise NotFound(f"session {session.id} not found")
        return fresh

    async def send_message(self, caller: Caller, session_id: str, content: str) -> Message:
        """Start a turn with ``content`` (``Conflict`` while one runs)."""
        self._check_content(content)
        session = await self.session(caller, session_id)
        return await self.lifecycle.send_prompt(session, content)

    def _check_content(self, content: str) -> None:
        if not content.strip():
            raise InvalidRequest("content must not be empty")
        if len(content) > self.config.limits.max_prompt_chars:
            raise InvalidRequest(f"content longer than {self.config.limits.max_prompt_chars}")

    async def add_message(self, caller: Caller, session_id: str, content: str,
                          delivery: Delivery = "auto",
                          client_message_id: str | None = None, *,
                          attachments: Sequence[str] = (),
                          mentions: Sequence[str] = ()) -> dict[str, Any]:
        """``message.add`` (DESIGN.md §9): start, queue, send now or steer.

        DESIGN.md §14: with ``client_message_id``, a repeat (a retry after a
        dropped connection, a duplicate from another connection, a retry after
        a restart) answers what the first made and starts, queues or steers
        nothing again.  Duplicates in flight wait for the first.

        DESIGN.md §19: ``attachments`` (ids of the caller's workspace's uploads)
        and ``mentions`` (paths inside the session's cwd) go with the message;
        one the agent cannot take refuses it (``InvalidRequest``) before
        anything is sent."""
        self._check_content(content)
        session = await self.session(caller, session_id)
        refs = PromptRefs(
            attachments=tuple(await AttachmentStore(
                self.config.data_dir, self.store, self.config.limits.max_attachment_bytes,
            ).resolve(caller.workspace_id, attachments)) if attachments else (),
            mentions=tuple(check_mention(m) for m in mentions))
        if client_message_id is None:
            return await self.queue.add(session, content, delivery, refs=refs)
        key = (session_id, client_message_id)
        while (first := self._adding.get(key)) is not None:
            await first.wait()
        # Claimed before the store is read (no checkpoint since the loop).
        self._adding[key] = done = trio.Event()
        try:
            earlier = await self.store.find_client_message(session_id, client_message_id)
            if earlier is not None:
                return _repeat_answer(earlier, content, client_message_id)
            return await self.queue.add(session, content, delivery, client_message_id, refs)
        finally:
            del self._adding[key]
            done.set()

    # -- the queue (DESIGN.md §9) ---------------------------------------------------

    async def queue_list(self, caller: Caller, session_id: str) -> QueueState:
        await self.session(caller, session_id)
        return await self.queue.state(session_id)

    async def queue_update(self, caller: Caller, session_id: str, entry_id: str,
                           content: str) -> QueueState:
        self._check_content(content)
        await self.session(caller, session_id)
        return await self.queue.update(session_id, entry_id, content)

    async def queue_remove(self, caller: Caller, session_id: str, entry_id: str) -> QueueState:
        await self.session(caller, session_id)
        return await self.queue.remove(session_id, entry_id)

    async def queue_move(self, caller: Caller, session_id: str, entry_id: str,
                         position: int) -> QueueState:
        await self.session(caller, session_id)
        return await self.queue.move(session_id, entry_id, position)

    async def queue_send_now(self, caller: Caller, session_id: str,
                             entry_id: str) -> dict[str, Any]:
        session = await self.session(caller, session_id)
        return await self.queue.send_now(session, entry_id)

    async def queue_set_auto_run(self, caller: Caller, session_id: str,
                                 auto_run: bool) -> QueueState:
        await self.session(caller, session_id)
        return await self.queue.set_auto_run(session_id, auto_run)

    async def list_messages(self, caller: Caller, session_id: str, *, limit: int = 200,
                            before: str | None = None) -> list[Message]:
        await self.session(caller, session_id)
        return await self.store.list_messages(session_id, limit=limit, before=before)

    async def respond_permission(self, caller: Caller, session_id: str, request_id: str,
                                 option_id: str | None) -> None:
        await self.session(caller, session_id)
        await self.lifecycle.respond_permission(session_id, request_id, option_id)

    async def task_view(self, caller: Caller, task_id: str, selected: str | None = None,
                        ) -> tuple[Task, list[Session], str | None, list[Message]]:
        """A task, its sessions, the selected one (``selected`` if it is the
        task's, else the most recently updated) and its messages."""
        task = await self.task(caller, task_id)
        sessions = await self.store.list_sessions(task_id)
        if selected not in {s.id for s in sessions}:
            selected = max(sessions, key=lambda s: s.updated_at).id if sessions else None
        messages = await self.store.list_messages(selected) if selected else []
        return task, sessions, selected, messages

    async def selected_queue(self, selected: str | None) -> QueueState | None:
        """The boot state's queue (``selected`` is already authorized by ``task_view``)."""
        return await self.queue.state(selected) if selected else None

    # -- cancel -----------------------------------------------------------------

    async def cancel(self, caller: Caller, session_id: str,
                     task_id: str | None = None) -> CancelOutcome:
        """Cancel the session's running turn; returns once the operation settled.

        Cancelling the caller (a disconnect) abandons only this wait."""
        op = await self.cancel_operation(caller, session_id, task_id)
        assert op.outcome is not None
        return op.outcome

    async def cancel_operation(self, caller: Caller, session_id: str,
                               task_id: str | None = None, turn_id: str | None = None,
                               when: StopWhen = StopWhen.NOW,
                               by: str = "user") -> CancelOperation:
        """``cancel`` (only of ``turn_id``, when given), answered with the
        settled operation: its outcome and the turn it acted on."""
        op = await self.admit_cancel(caller, session_id, task_id, turn_id, when, by)
        await op.wait()
        return op

    async def admit_cancel(self, caller: Caller, session_id: str,
                           task_id: str | None = None, turn_id: str | None = None,
                           when: StopWhen = StopWhen.NOW,
                           by: str = "user") -> CancelOperation:
        """``admit_known``, reading the session's owner from the store when it
        is not known yet (``NotFound`` if not the caller's); not waited for."""
        received = trio.current_time()
        op = self.admit_known(caller, session_id, task_id, turn_id, when, by)
        if op is None:
            session = await self.session(caller, session_id)
            owner = (session.workspace_id, session.task_id)
            op = self._admit(caller, session_id, task_id, turn_id, owner, received, when, by)
            if op is None:
                raise NotFound(f"session {session_id} not found" + (
                    f" in task {task_id}" if owner[0] == caller.workspace_id else ""))
        return op

    def admit_known(self, caller: Caller, session_id: str, task_id: str | None = None,
                    turn_id: str | None = None, when: StopWhen = StopWhen.NOW,
                    by: str = "user") -> CancelOperation | None:
        """``cancel`` without a wait when it needs no store read: the session's
        owner is known (from an earlier read, or the operation in flight).
        None: ``cancel`` reads the store (and admits, or refuses).  The
        operation may be settled already (a cancel aimed at a turn that has ended)."""
        received = trio.current_time()
        owner = self._owners.get(session_id)
        if owner is None:
            in_flight = self.operations.get(session_id)
            if in_flight is None:
                return None
            owner = (in_flight.workspace_id, in_flight.task_id)
        return self._admit(caller, session_id, task_id, turn_id, owner, received, when, by)

    def _admit(self, caller: Caller, session_id: str, task_id: str | None,
               turn_id: str | None, owner: tuple[str, str], received: float,
               when: StopWhen = StopWhen.NOW, by: str = "user") -> CancelOperation | None:
        """The one way a user cancel comes in, synchronously (no store read, no
        await: a storm of duplicates must not queue the operation's own store
        calls): settled at once if aimed at a turn that is over, else the
        operation in flight joined or a new one begun.  None: the caller may
        not cancel this session."""
        if not _may_cancel(owner, caller, task_id):
            return None
        op = self._fenced(session_id, owner, turn_id)
        if op is None:
            op = self.cancellations.admit(session_id, owner, received, turn_id=turn_id,
                                          when=when, by=by)
            self.cancellations.user_joins(op)
        return op

    def _fenced(self, session_id: str, owner: tuple[str, str],
                turn_id: str | None) -> CancelOperation | None:
        """DESIGN.md §14: a cancel aimed at ``turn_id`` while another turn runs
        (or is being cancelled) never touches it: settled at once as
        ``turn_ended``, with nothing pending published.  None: go on."""
        if turn_id is None:
            return None
        in_flight = self.operations.get(session_id)
        running = self.lifecycle.running_turn_id(session_id)
        if in_flight is None and running is None:
            # Nothing runs: the named turn is over, unless the agent is gone and
            # the store may still show it running (the cancel reconciles it).
            over = self.lifecycle.live_and_idle(session_id)
        else:
            over = ((in_flight is not None and in_flight.turn_id not in (None, turn_id))
                    or (running is not None and running != turn_id))
        if not over:
            return None
        op = CancelOperation(session_id=session_id, workspace_id=owner[0], task_id=owner[1],
                             turn_id=turn_id, result=CancelResult(CancelOutcome.IDLE))
        op.done.set()
        return op


def _repeat_answer(earlier: Message | QueueEntry, content: str,
                   client_message_id: str) -> dict[str, Any]:
    """A repeated ``message.add``'s answer: what the first one made."""
    if earlier.content != content:
        raise Conflict(f"client_message_id {client_message_id!r} was already used for "
                       "another message in this session")
    if isinstance(earlier, QueueEntry):
        return {"delivery": "queued", "entry": earlier.to_dto(), "repeated": True}
    delivery = "steered" if earlier.metadata.get("delivery") == "steer" else "started"
    return {**earlier.to_dto(), "delivery": delivery, "repeated": True}


def _may_cancel(owner: tuple[str, str], caller: Caller, task_id: str | None) -> bool:
    """Whether ``caller`` may cancel a session of ``owner`` (workspace, task):
    its workspace's, and the task it names if it names one."""
    return owner[0] == caller.workspace_id and (task_id is None or owner[1] == task_id)
