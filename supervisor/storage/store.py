"""The store: typed async access to the database, whose writes announce themselves.

Every method runs one ``Db`` method, one at a time over one connection (the
``Runner``): on a worker thread (``call``), or, for the short writes on the
agent's event path, on the Trio thread when the connection is free
(``call_now``; why both: docs/architecture.md, "Decisions beyond DESIGN.md").
A write that changes what clients see publishes its notification
itself, right after it commits (a message added or updated, a session's
state), so no caller can write and forget to notify, or notify a change that
did not happen.  What only the lifecycle knows (a turn's end, an agent's
acknowledgement, permission requests) it publishes itself.

``call`` runs any ``Db`` method (tests and benchmarks read with it; tests
under virtual time override it to run inline).  ``call_now`` runs a short
write on the Trio thread itself when the connection is free: a turn's close
(on the cancel's path) and a message's insert or update (a streamed chunk's
write, the most frequent) are ~50-150 µs transactions (p99 ~250 µs, WAL with
``synchronous=NORMAL``: no fsync) against a thread hop's 300-600 µs wake-up
on a busy machine.  It never blocks there: with the connection taken by another
call it waits (asynchronously, in order) and then runs on the Trio thread; a lock
held by another connection sends it to a worker thread like ``call``.  For the
same reason the WAL is checkpointed by ``run`` on a connection of its own
(a checkpoint takes tens of milliseconds), not by the commit that crosses
SQLite's threshold.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import trio

from protocols.process import process_identity

from ..models import (
    AgentSessionRef,
    Attachment,
    Message,
    MessageKind,
    QueueEntry,
    QueueState,
    Role,
    Session,
    SessionState,
    StopReason,
    Task,
    TextAppend,
    Turn,
    TurnState,
)
from ..notify import Notifier
from .close_group import CloseGroup
from .db import Checkpointer, Db, TurnClose
from .db.runner import Runner

__all__ = ["CHECKPOINT_EVERY", "ClosedTurn", "Store"]

#: Commits between two WAL checkpoints (a few MiB of WAL at most).
CHECKPOINT_EVERY = 500

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class ClosedTurn:
    """What closing a turn did (it was still running: only one close wins)."""

    #: The status message added with it, if any.
    status: Message | None
    #: The session, if this close moved it out of RUNNING (it still pointed at the turn).
    session: Session | None
    #: The session's queue, if this close parked it.
    queue: QueueState | None = None


class Store:
    def __init__(self, db: Db, notify: Notifier | None = None) -> None:
        self.db = db
        #: How long a write waits for another connection's lock (on a worker
        #: thread, retrying) before it fails: long enough to ride out seconds
        #: of contention rather than fail a turn's write.
        self._wait_s = db.busy_timeout_s
        db.fail_fast()
        self._notify = notify
        #: Who runs a call on the connection, on this thread or a worker's.
        self.runner = Runner(db, CHECKPOINT_EVERY)
        #: Turn closes, committed together when they come in a burst (no
        #: checkpoint after the commit: the close's publication follows in the
        #: same step).
        self.closes = CloseGroup(
            functools.partial(self.runner.commit, db.close_turns), wait_s=self._wait_s)

    @classmethod
    def open(cls, path: Path | str, notify: Notifier | None = None, *,
             wait_s: float = 30.0) -> Store:
        return cls(Db(path, busy_timeout_s=wait_s), notify)

    @property
    def notify(self) -> Notifier:
        if self._notify is None:
            raise RuntimeError("the store is not bound to a notifier")
        return self._notify

    async def call(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """``fn`` on a worker thread (the connection's runner)."""
        return await self.runner.call(functools.partial(fn, *args, **kwargs))

    async def call_now(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """``fn`` on the Trio thread when the connection is free (``Runner.now``)."""
        return await self.runner.now(functools.partial(fn, *args, **kwargs))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Checkpoint the WAL every ``CHECKPOINT_EVERY`` commits, off the writers' path."""
        checkpointer = await trio.to_thread.run_sync(Checkpointer, self.db.path)
        try:
            await self.call(self.db.hand_over_checkpoints)
            task_status.started()
            while True:
                await self.runner.checkpoint_due()
                try:
                    await trio.to_thread.run_sync(checkpointer.checkpoint)
                except sqlite3.OperationalError as exc:
                    log.warning("WAL checkpoint failed (%s); the next one retries", exc)
        finally:
            checkpointer.close()

    def close(self) -> None:
        self.runner.close()

    # -- reads ----------------------------------------------------------------

    async def ensure_workspace(self, name: str) -> str:
        return await self.call(self.db.ensure_workspace, name)

    async def get_task(self, task_id: str) -> Task | None:
        return await self.call(self.db.get_task, task_id)

    async def list_tasks(self, workspace_ids: Iterable[str]) -> list[Task]:
        return await self.call(self.db.list_tasks, list(workspace_ids))

    async def get_session(self, session_id: str) -> Session | None:
        return await self.call(self.db.get_session, session_id)

    async def list_sessions(self, task_id: str) -> list[Session]:
        return await self.call(self.db.list_sessions, task_id)

    async def get_turn(self, turn_id: str) -> Turn | None:
        return await self.call(self.db.get_turn, turn_id)

    async def list_messages(self, session_id: str, *, limit: int = 200,
                            before: str | None = None) -> list[Message]:
        return await self.call(self.db.list_messages, session_id, limit=limit, before=before)

    # -- the workspace's lists (each write announced to the whole workspace) ----

    async def create_task(self, workspace_id: str, title: str, project_dir: str | None = None,
                          project_identity: tuple[int, int] | None = None) -> Task:
        task = await self.call(self.db.create_task, workspace_id, title, project_dir,
                               project_identity)
        self.notify.task_changed(task)
        return task

    async def update_task(self, task_id: str, *, title: str | None = None,
                          archived: bool | None = None) -> Task | None:
        task = await self.call(self.db.update_task, task_id, title=title, archived=archived)
        if task is not None:
            self.notify.task_changed(task)
        return task

    async def delete_task(self, task: Task) -> bool:
        deleted = await self.call(self.db.delete_task, task.id)
        if deleted:
            self.notify.task_removed(task)
        return deleted

    async def create_session(self, task_id: str, agent: str, *, session_id: str | None = None,
                             cwd: str | None = None,
                             worktree: dict[str, str] | None = None) -> Session:
        session = await self.call(self.db.create_session, task_id, agent,
                                  session_id=session_id, cwd=cwd, worktree=worktree)
        self.notify.session_changed(session)
        return session

    async def update_session(self, session_id: str, *, title: str | None = None,
                             archived: bool | None = None) -> Session | None:
        session = await self.call(self.db.update_session, session_id, title=title,
                                  archived=archived)
        if session is not None:
            self.notify.session_changed(session)
        return session

    async def set_agent_title(self, session_id: str, title: str) -> Session | None:
        session = await self.call(self.db.set_agent_title, session_id, title)
        if session is not None:
            self.notify.session_changed(session)
        return session

    async def choose_option(self, session_id: str, option_id: str,
                            value: str) -> Session | None:
        return await self.call(self.db.choose_option, session_id, option_id, value)

    async def set_turn_usage(self, turn_id: str, usage: dict[str, Any]) -> None:
        await self.call(self.db.set_turn_usage, turn_id, usage)

    async def mark_seen(self, session_id: str) -> Session | None:
        """DESIGN.md §15 ``session.seen``: clears the session's stored attention
        and announces it (``session.changed`` and ``session.attention``) if it
        had any; the session as it now is, or None when there was nothing."""
        session = await self.call(self.db.mark_seen, session_id)
        if session is not None:
            self.notify.session_changed(session)
        return session

    async def delete_session(self, session: Session) -> bool:
        deleted = await self.call(self.db.delete_session, session.id)
        if deleted:
            self.notify.session_removed(session)
        return deleted

    # -- writes clients do not see until they list ----------------------------

    async def get_agent_session(self, session_id: str) -> AgentSessionRef | None:
        """The agent conversation the session last had (None: never started)."""
        return await self.call(self.db.get_agent_session, session_id)

    async def set_agent_session(self, session_id: str, ref: AgentSessionRef) -> None:
        await self.call(self.db.set_agent_session, session_id, ref)

    async def set_turn_handover(self, turn_id: str, seq: int) -> None:
        await self.call(self.db.set_turn_handover, turn_id, seq)

    async def hold_turn_cancel(self, turn_id: str, accepted_at: float) -> bool:
        return await self.call(self.db.hold_turn_cancel, turn_id, accepted_at)

    async def record_agent_group(self, pgid: int, session_id: str, command: str,
                                 tag: str | None = None) -> None:
        # The leader's identity is read here, while it is the caller's unreaped
        # child (its pid cannot be reused yet), not in the DB layer.
        await self.call(self.db.record_agent_group, pgid, session_id, command, tag,
                        leader=process_identity(pgid))

    async def forget_agent_group(self, pgid: int) -> None:
        await self.call(self.db.forget_agent_group, pgid)

    async def add_attachment(self, workspace_id: str, sha256: str, name: str, mime: str,
                             size: int) -> Attachment:
        return await self.call(self.db.add_attachment, workspace_id, sha256, name, mime, size)

    async def attachments(self, workspace_id: str, ids: Sequence[str]) -> list[Attachment]:
        return await self.call(self.db.attachments, workspace_id, list(ids))

    # -- writes that publish --------------------------------------------------

    async def set_session_state(self, session_id: str, state: SessionState, *,
                                only_from: Iterable[SessionState] = ()) -> Session | None:
        """Returns the session if this call changed it (and announced it), else None."""
        session = await self.call(self.db.set_session_state, session_id, state,
                                  only_from=tuple(only_from))
        if session is not None:
            self.notify.state_changed(session)
        return session

    async def open_turn(self, session_id: str, prompt: str, *, resume_queue: bool = False,
                        client_message_id: str | None = None,
                        metadata: dict[str, Any] | None = None) -> tuple[Turn, Message]:
        """The turn, the user's message and the session RUNNING, atomically
        (and a parked queue resumed, with ``resume_queue``)."""
        turn, msg, session, queue = await self.call(self.db.open_turn, session_id, prompt,
                                                    resume_queue=resume_queue,
                                                    client_message_id=client_message_id,
                                                    metadata=metadata)
        self.notify.message_added(msg)
        self.notify.state_changed(session)
        if queue is not None:
            self.notify.queue_changed(queue)
        return turn, msg

    async def close_turn(self, turn_id: str, *, state: TurnState, stop_reason: StopReason,
                         status: tuple[str, dict[str, Any]] | None = None,
                         park_queue: bool = False,
                         text: Sequence[tuple[Message, TextAppend | None]] = (),
                         ) -> ClosedTurn | None:
        """Close a running turn (None if it was not running: someone else closed
        it), parking the session's queue with it if ``park_queue``.  ``text``:
        the turn's last streamed text, as ``update_messages`` takes it, written
        in the same transaction.  Publishes nothing: the closer publishes the
        close once (``Notifier.close_notes``), in the step this returns in (a
        close grouped behind another's commit wakes after it, then the same)."""
        closed, msg, session, queue = await self.closes.close(TurnClose(
            turn_id, state, stop_reason, status, park_queue=park_queue,
            text=tuple(m for m, _ in text)))
        if not closed:
            return None
        return ClosedTurn(status=msg, session=session, queue=queue)

    async def add_message(self, session_id: str, turn_id: str | None, role: Role,
                          kind: MessageKind, content: str,
                          metadata: dict[str, Any] | None = None) -> Message:
        msg = await self.call_now(self.db.add_message, session_id, turn_id, role, kind, content,
                              metadata)
        self.notify.message_added(msg)
        return msg

    async def set_receipt(self, turn_id: str, receipt: dict[str, Any],
                          status: Message | None) -> None:
        """DESIGN.md §18: the turn's receipt, kept with it and in its status message."""
        msg = await self.call(self.db.set_receipt, turn_id, receipt, status)
        if msg is not None:
            self.notify.message_updated(msg)

    async def get_receipt(self, turn_id: str) -> tuple[str, dict[str, Any] | None] | None:
        return await self.call(self.db.get_receipt, turn_id)

    async def recent_receipts(self, limit: int) -> list[tuple[str, dict[str, Any]]]:
        return await self.call(self.db.recent_receipts, limit)

    async def update_message(self, msg: Message, appended: TextAppend | None = None) -> None:
        """``appended``: the message only grew by that text (its notification's append)."""
        await self.call_now(self.db.update_message, msg)
        self.notify.message_updated(msg, appended)

    async def update_messages(self, updates: Sequence[tuple[Message, TextAppend | None]]
                              ) -> None:
        """``update_message`` for several messages (of any sessions): one
        transaction, then their notifications, queued together so that each
        connection gets them in one write."""
        await self.call_now(self.db.update_messages, [msg for msg, _ in updates])
        self.notify.publish(self.notify.messages_updated(updates))

    # -- the queue (DESIGN.md §9): every change announces the committed snapshot

    async def queue_state(self, session_id: str) -> QueueState:
        return await self.call(self.db.queue_state, session_id)

    async def queue_add(self, session_id: str, content: str, *, max_entries: int,
                        head: bool = False, client_message_id: str | None = None,
                        parts: dict[str, Any] | None = None) -> QueueEntry:
        """``db.QueueFull`` beyond ``max_entries``."""
        entry, state = await self.call(self.db.queue_add, session_id, content,
                                       max_entries=max_entries, head=head,
                                       client_message_id=client_message_id, parts=parts)
        self.notify.queue_changed(state)
        return entry

    async def queue_restore(self, entry: QueueEntry) -> None:
        """Put back first an entry taken to start a turn that did not start
        (same id and time; admitted even over the limit: it was there)."""
        _, state = await self.call(self.db.queue_add, entry.session_id, entry.content,
                                   max_entries=10**9, head=True, entry_id=entry.id,
                                   created_at=entry.created_at,
                                   client_message_id=entry.client_message_id,
                                   parts=entry.parts)
        self.notify.queue_changed(state)

    async def queue_update(self, session_id: str, entry_id: str,
                           content: str) -> QueueState | None:
        state = await self.call(self.db.queue_update, session_id, entry_id, content)
        if state is not None:
            self.notify.queue_changed(state)
        return state

    async def queue_move(self, session_id: str, entry_id: str,
                         position: int) -> QueueState | None:
        state = await self.call(self.db.queue_move, session_id, entry_id, position)
        if state is not None:
            self.notify.queue_changed(state)
        return state

    async def find_client_message(self, session_id: str, client_message_id: str,
                                  ) -> Message | QueueEntry | None:
        return await self.call(self.db.find_client_message, session_id, client_message_id)

    async def queue_take(self, session_id: str, entry_id: str | None = None, *,
                         only_if_auto_run: bool = False) -> QueueEntry | None:
        entry, state = await self.call(self.db.queue_take, session_id, entry_id,
                                       only_if_auto_run=only_if_auto_run)
        if entry is not None:
            self.notify.queue_changed(state)
        return entry

    async def queue_set_auto_run(self, session_id: str, auto_run: bool) -> QueueState:
        state = await self.call(self.db.queue_set_auto_run, session_id, auto_run)
        if state is None:
            return await self.queue_state(session_id)
        self.notify.queue_changed(state)
        return state
