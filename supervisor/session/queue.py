"""The per-session message queue and its rules (DESIGN.md §9).

The queue itself lives in SQLite (``Db.queue_*``; every change announces
``session.queue.changed`` with a revision).  This module decides what a
message does and when the head runs:

- ``add``: with no turn running the message starts one; while a turn runs
  (or is being started, or a cancel is in flight) it is queued — ``interrupt``
  puts it first and replaces the running turn through the orchestrator's
  single-flight cancel; ``steer`` goes into the running turn where the agent
  can take it, else it is queued with ``steer_unsupported``.
- Auto-run: when a turn ends normally and ``auto_run`` is on, the head starts
  at once, here, with no client involved.
- Parking (``auto_run`` false): a user cancel (at its admission, before any
  turn could start), a turn ended by an error, a crash, the agent's own
  cancel, a shutdown, or a restart (``supervisor.turn.recovery``).  A user cancel
  also bumps the session's cancel epoch, synchronously: a start already on
  its way checks the epoch at the moment it claims the turn and gives its
  entry back, so nothing queued ever runs after the user said stop.  That
  state is the ``QueueGate`` (supervisor.turn.queue_gate), which the turn and cancel
  paths below the queue change; what it asks for (a head to run, a park to
  write) this module's task takes from it.
- A message that starts a turn directly while the queue is empty resumes an
  auto-run left off by an earlier park (the park was about what was queued).

Starts from the queue run in this module's nursery (``run``), never in a
request's, so they survive the client that caused them.  No lock is held
across agent I/O: "busy" is decided synchronously (a set of sessions whose
start is in progress, the lifecycle's running turn, the cancel in flight).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, Literal, Protocol

import trio

from protocols.adapters import SteerUnsupported

from ..config import Config
from ..errors import AgentStartError, Conflict, InvalidRequest, NotFound, SupervisorError
from ..models import QueueState, Session
from ..storage.db import QueueFull, StoreError
from ..storage.retries import contained
from ..storage.store import Store
from ..turn.execution_state import StopRequest
from ..turn.queue_gate import QueueGate
from ..workspace.attachments import NO_REFS, PromptRefs
from .cancellation import Cancellations
from .lifecycle import LifecycleManager

__all__ = ["DELIVERIES", "Delivery", "TurnQueue"]

log = logging.getLogger(__name__)

Delivery = Literal["auto", "queue", "interrupt", "steer"]
DELIVERIES: tuple[Delivery, ...] = ("auto", "queue", "interrupt", "steer")


class _Settles(Protocol):
    async def wait(self) -> object: ...


class TurnQueue:
    def __init__(self, config: Config, store: Store, lifecycle: LifecycleManager,
                 cancellations: Cancellations, gate: QueueGate) -> None:
        self.max_queue = config.limits.max_queue
        self.store = store
        self.lifecycle = lifecycle
        self.cancellations = cancellations
        self.gate = gate
        #: Sessions whose turn start is in progress (claimed synchronously).
        self._starting: set[str] = set()
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The queue's nursery: auto-run starts, send-now starts and the parks
        a user cancel leaves to write live here; what the gate asks for is
        taken from it as it comes."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            while True:
                for sid, what in await self.gate.requests():
                    self._spawn(self._kick if what == "kick" else self._park_for_cancel, sid)

    def busy(self, session_id: str) -> bool:
        """A turn runs, is being started, or is being cancelled."""
        return (session_id in self._starting or self.lifecycle.turn_running(session_id)
                or session_id in self.cancellations.operations)

    def _spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        """``fn`` in the queue's nursery, which every session shares: whatever
        it raises (the store refusing a write, say) ends that task only."""
        assert self._nursery is not None, "TurnQueue.run is not running"
        self._nursery.start_soon(contained, f"queue task {fn.__name__} of {args[0]}", fn,
                                 *args)

    # -- message.add -------------------------------------------------------------

    async def add(self, session: Session, content: str, delivery: Delivery,
                  client_message_id: str | None = None,
                  refs: PromptRefs = NO_REFS) -> dict[str, Any]:
        """``refs``: the message's attachments and mentions (DESIGN.md §19),
        carried wherever it goes (a turn, the queue, a steer)."""
        sid = session.id
        cid = client_message_id
        steer_unsupported = False
        if delivery == "steer" and self.busy(sid):
            try:
                msg = await self.lifecycle.steer(sid, content, cid, refs)
            except (SteerUnsupported, Conflict) as exc:
                log.info("session %s: steer queued instead (%s)", sid, exc)
                steer_unsupported = True
            else:
                return {**msg.to_dto(), "delivery": "steered"}
        if not self.busy(sid):
            try:
                started = await self._start_direct(session, content, cid, refs)
            except AgentStartError:
                raise
            except Conflict as exc:
                # Not startable right now (a user cancel came in between, the
                # agent still finishing a turn): kept in the queue, not lost.
                log.info("session %s: message queued instead of started (%s)", sid, exc)
                started = None
            if started is not None:
                return started
        # Refused now, with the line its turn's start would give, nothing queued.
        await self.lifecycle.check_parts(sid, refs)
        entry = await self._enqueue(sid, content, head=delivery == "interrupt", cid=cid,
                                    refs=refs)
        if delivery == "interrupt":
            self._interrupt(session, entry.id)
            return {"delivery": "interrupting", "entry": entry.to_dto()}
        # The turn may have ended while the entry was written: the head runs now.
        self._spawn(self._kick, sid)
        result: dict[str, Any] = {"delivery": "queued", "entry": entry.to_dto()}
        if steer_unsupported:
            result["steer_unsupported"] = True
        return result

    async def _enqueue(self, sid: str, content: str, *, head: bool = False,
                       cid: str | None = None, refs: PromptRefs = NO_REFS) -> Any:
        try:
            return await self.store.queue_add(sid, content, max_entries=self.max_queue,
                                              head=head, client_message_id=cid,
                                              parts=refs.stored() if refs else None)
        except QueueFull as exc:
            raise InvalidRequest(str(exc)) from None

    async def _start_direct(self, session: Session, content: str, cid: str | None = None,
                            refs: PromptRefs = NO_REFS) -> dict[str, Any] | None:
        """Start a turn with ``content`` now; None when queued entries that
        auto-run must go first (then the caller queues it behind them)."""
        sid = session.id
        self._starting.add(sid)  # no checkpoint since busy() said no
        try:
            state = await self.store.queue_state(sid)
            if state.entries and state.auto_run:
                return None
            epoch = self.gate.epoch(sid)
            # A message sent straight to an idle session with nothing queued
            # resumes a parked queue, in the turn's own transaction.
            msg = await self.lifecycle.send_prompt(
                session, content, guard=lambda: self.gate.epoch(sid) == epoch,
                resume_queue=not state.entries and not state.auto_run, client_message_id=cid,
                refs=refs)
            return {**msg.to_dto(), "delivery": "started"}
        finally:
            self._starting.discard(sid)
            self._spawn(self._kick, sid)

    # -- starting entries ----------------------------------------------------------

    async def _kick(self, sid: str) -> None:
        """The head runs if the session is idle and its queue not parked."""
        await self._start_entry(sid, None, only_if_auto_run=True)

    async def _start_entry(self, sid: str, entry_id: str | None, *,
                           only_if_auto_run: bool) -> dict[str, Any] | None:
        """Take an entry and start its turn; given back (first) if it cannot start."""
        if self.busy(sid) or sid in self.gate.parking:
            return None  # (a user cancel's park not yet written still counts)
        self._starting.add(sid)
        epoch = self.gate.epoch(sid)
        entry = None
        try:
            entry = await self.store.queue_take(sid, entry_id, only_if_auto_run=only_if_auto_run)
            if entry is None:
                return None
            try:
                session = await self.store.get_session(sid)
                if session is None:
                    return None
                msg = await self.lifecycle.send_prompt(
                    session, entry.content, guard=lambda: self.gate.epoch(sid) == epoch,
                    client_message_id=entry.client_message_id,
                    refs=PromptRefs.from_stored(entry.parts))
            except (SupervisorError, StoreError) as exc:
                cancelled = self.gate.epoch(sid) != epoch
                log.warning("session %s: queued message not started (%s)", sid,
                            "a user cancel came first" if cancelled else exc)
                await self._restore(entry)
                if not cancelled:
                    await self.park(sid)  # it failed: the user decides what runs next
                return None
            return {**msg.to_dto(), "delivery": "started"}
        finally:
            self._starting.discard(sid)
            if entry is not None:
                # Its turn may already have ended while it was being started
                # (the close found the session busy): the next head runs now.
                self._spawn(self._kick, sid)

    async def _restore(self, entry: Any) -> None:
        """Put a taken entry back; if the store refuses, it is put back when it
        can again (a queued message is never lost to a failed start)."""
        try:
            await self.store.queue_restore(entry)
        except StoreError as exc:
            log.warning("session %s: queued message %s not put back yet (%s); retrying",
                        entry.session_id, entry.id, exc)
            self.lifecycle.retries.retry(
                ("restore", entry.id), functools.partial(self.store.queue_restore, entry),
                f"session {entry.session_id}: queued message {entry.id}'s return")

    def _interrupt(self, session: Session, entry_id: str) -> None:
        """Send now: the running turn is cancelled through the session's
        single-flight operation (started as an interruption of the running
        turn, or joined), then the entry starts (ahead of the queue, not
        parking it)."""
        sid = session.id
        epoch = self.gate.epoch(sid)
        op = self.cancellations.admit(sid, (session.workspace_id, session.task_id),
                                      trio.current_time(), request=StopRequest.INTERRUPT,
                                      turn_id=self.lifecycle.running_turn_id(sid),
                                      by="interrupt")
        self._spawn(self._start_after, sid, entry_id, op, epoch)

    async def _start_after(self, sid: str, entry_id: str, op: _Settles, epoch: int) -> None:
        try:
            await op.wait()
        except SupervisorError as exc:
            # The turn may still run: the entry stays first and runs after it.
            log.warning("session %s: send now's cancel failed (%s)", sid, exc)
            return
        if self.gate.epoch(sid) != epoch:
            return  # the user cancelled meanwhile: the entry stays queued (parked)
        await self._start_entry(sid, entry_id, only_if_auto_run=False)

    # -- parking ---------------------------------------------------------------------

    async def _park_for_cancel(self, session_id: str) -> None:
        """The user cancel's park; one the store refuses is written when it can
        again, and until then the session counts as parking (nothing queued starts)."""
        try:
            await self.park(session_id)
        except StoreError as exc:
            log.warning("session %s: the cancel's queue park not written yet (%s); retrying",
                        session_id, exc)
            if self.lifecycle.retries.retry(
                    ("park", session_id), functools.partial(self.park, session_id),
                    f"session {session_id}: the queue's park",
                    done=lambda _landed: self.gate.parked(session_id)):
                return
        self.gate.parked(session_id)

    async def park(self, session_id: str) -> None:
        await self.store.queue_set_auto_run(session_id, False)

    # -- the queue actions -------------------------------------------------------------

    async def state(self, sid: str) -> QueueState:
        return await self.store.queue_state(sid)

    async def update(self, sid: str, entry_id: str, content: str) -> QueueState:
        return _found(await self.store.queue_update(sid, entry_id, content), entry_id)

    async def remove(self, sid: str, entry_id: str) -> QueueState:
        if await self.store.queue_take(sid, entry_id) is None:
            raise NotFound(f"queue entry {entry_id} not found")
        return await self.store.queue_state(sid)

    async def move(self, sid: str, entry_id: str, position: int) -> QueueState:
        return _found(await self.store.queue_move(sid, entry_id, position), entry_id)

    async def send_now(self, session: Session, entry_id: str) -> dict[str, Any]:
        """Idle: start the entry; a turn running: interrupt it with the entry."""
        sid = session.id
        state = await self.store.queue_state(sid)
        entry = next((e for e in state.entries if e.id == entry_id), None)
        if entry is None:
            raise NotFound(f"queue entry {entry_id} not found")
        if not self.busy(sid):
            started = await self._start_entry(sid, entry_id, only_if_auto_run=False)
            if started is not None:
                return started
        if not self.busy(sid):
            raise Conflict("the message could not be started; it stays queued")
        moved = _found(await self.store.queue_move(sid, entry_id, 0), entry_id)
        self._interrupt(session, entry_id)
        return {"delivery": "interrupting", "entry": moved.entries[0].to_dto()}

    async def set_auto_run(self, sid: str, auto_run: bool) -> QueueState:
        state = await self.store.queue_set_auto_run(sid, auto_run)
        if auto_run:
            self._spawn(self._kick, sid)  # resumed while idle: the head starts
        return state


def _found(state: QueueState | None, entry_id: str) -> QueueState:
    if state is None:
        raise NotFound(f"queue entry {entry_id} not found")
    return state
