"""The root of the nursery tree (DESIGN.md §2), in one function.

    open_supervisor                 root nursery
    ├── Store.run                   the store's own tasks
    ├── Retries.run                 store retries nursery → records the store refused
    ├── TurnCheckpoints.run         checkpoints nursery → turn snapshots (DESIGN.md §12)
    ├── LifecycleManager.run        executions nursery → one nursery per agent
    │   └── take_over               per turn an agentctl ran on through a restart
    ├── Cancellations.run           operations nursery → accepted cancels
    ├── TurnQueue.run               queue nursery → auto-run and send-now starts
    └── _warm_up_schema             builds ACP's schema models on a worker thread
    (+ whatever the caller runs inside, e.g. the web server)

Store, event bus and notifier are plain objects owned here.  Every component
is given what it calls in its constructor, below, lowest layer first:
nothing is patched on after construction.  On exit the
lifecycle shuts down gracefully first (running turns cancelled, agents
stopped) under a shielded scope with its own deadline, then the root nursery
is cancelled.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import trio

from protocols.acp import load_schema
from protocols.scopes import shielded_for

from .bus import EventBus
from .catalog import Catalog
from .config import Config
from .errors import StartError
from .executors import Launcher, default_launcher, outlives_backend, sweep_remote
from .models import SessionState
from .notify import Notifier
from .orchestrator import Caller, Orchestrator
from .session.cancellation import Cancellations
from .session.lifecycle import LifecycleManager
from .session.queue import TurnQueue
from .stops import Stops
from .storage.db import SCHEMA_VERSION, Db, SchemaTooNew
from .storage.retries import Retries
from .storage.store import Store
from .subagents import SubagentControl, Subagents
from .turn.cancel_op import CancelOperation, Settler
from .turn.execution_state import Agents
from .turn.queue_gate import QueueGate
from .turn.receipts import Receipts
from .turn.recovery import handovers, recover
from .turn.tracing import CancelTrace
from .turn.turn_close import TurnCloser
from .workspace.attachment_sweep import AttachmentSweeper
from .workspace.sandboxing import check_sandbox
from .workspace.session_files import session_deleted
from .workspace.turn_checkpoints import TurnCheckpoints
from .workspace.worktrees import check_git_fence

__all__ = ["Supervisor", "open_supervisor"]

log = logging.getLogger(__name__)

DEFAULT_WORKSPACE = "default"


@dataclass(eq=False)
class Supervisor:
    config: Config
    store: Store
    bus: EventBus
    notify: Notifier
    lifecycle: LifecycleManager
    orchestrator: Orchestrator
    recovered: dict[str, int]
    catalog: Catalog
    #: DESIGN.md §13: ``subagent.cancel``.
    subagents: SubagentControl
    #: DESIGN.md §18: stop everything, receipts, strays, the cancel figures.
    stops: Stops
    #: DESIGN.md §12 (None: checkpoints are off in the configuration).
    checkpoints: TurnCheckpoints | None = None

    async def caller(self, workspace: str = DEFAULT_WORKSPACE) -> Caller:
        return Caller(await self.store.ensure_workspace(workspace))


async def _warm_up_schema() -> None:
    """Build ACP's pydantic schema models off the Trio thread while the server
    starts listening, instead of on the first ACP message."""
    await trio.to_thread.run_sync(load_schema)


def _open_db(config: Config) -> Db:
    """The data dir's database, or a ``StartError`` saying why it cannot be used."""
    path = config.db_path
    try:
        return Db(path, busy_timeout_s=config.timeouts.store_wait_s)
    except SchemaTooNew as exc:
        raise StartError(
            f"the database {path} was written by a newer Turnvisor (schema {exc.version}, "
            f"this one knows up to {SCHEMA_VERSION}): run that version, or restore a backup "
            "made by this one") from None
    except sqlite3.DatabaseError as exc:
        # (OperationalError included: unreadable, or a disk that takes no write.)
        raise StartError(
            f"the database {path} cannot be opened ({exc}): if it is corrupt, move it away "
            "(a new one is made) or restore a backup; otherwise free space or fix its "
            "permissions") from None


@asynccontextmanager
async def open_supervisor(
    config: Config, *, launcher: Launcher | None = None, db: Db | None = None,
    store_class: type[Store] = Store,
) -> AsyncIterator[Supervisor]:
    """``launcher`` (how agents start), ``db`` and ``store_class`` are seams for
    tests; by default agents are local child processes and the store is SQLite
    in the data dir."""
    config.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    config.work_dir.mkdir(parents=True, exist_ok=True)
    if config.data_dir_hidden is None:
        # What every launch checks: an agent that moves the data dir away
        # (renames a directory above it) gets the next launch refused.
        config = config.with_identity()
    if db is None:
        db = await trio.to_thread.run_sync(_open_db, config)
    # What publishes first: the store is made with its notifier (nothing set later).
    bus = EventBus(queue_size=config.limits.ws_send_queue)
    agents = Agents(config)
    subagents = Subagents()
    notify = Notifier(bus, agents.status, subagents)
    store = store_class(db, notify)
    try:
        # Turns an agent that outlives us still runs (agentctl at a configured
        # URL) stay open: the lifecycle takes them over once it runs.
        outliving = frozenset(name for name, profile in config.profiles.items()
                              if outlives_backend(profile))
        handed_over = await store.call(handovers, store.db, outliving) if outliving else []
        recovered = await store.call(recover, store.db,
                                     keep={h.session_id for h in handed_over})
        await check_sandbox(config)
        await check_git_fence()
        # Each remote executor a profile names: a stored session's ssh run or Pod is kept.
        await sweep_remote(config, lambda: store.call(store.db.sessions_in_states, SessionState))
        t = config.timeouts
        retries = Retries(t.store_retry_s)
        gate = QueueGate()
        checkpoints = (TurnCheckpoints(config, store, notify, agents.turn_running)
                       if config.projects.checkpoints else None)
        settler = Settler(notify, gate,
                          CancelTrace[CancelOperation]() if config.trace_cancels else None)
        receipts = Receipts(store, subagents, checkpoints)
        closer = TurnCloser(t, store, notify, gate, settler, retries, checkpoints, receipts)
        cancellations = Cancellations(t, store, notify, agents, closer, gate, settler, retries,
                                      subagents)
        lifecycle = LifecycleManager(config, store, notify, agents, closer, cancellations,
                                     retries, launcher or default_launcher(config),
                                     checkpoints, subagents)
        queue = TurnQueue(config, store, lifecycle, cancellations, gate)
        orchestrator = Orchestrator(config, store, notify, lifecycle, cancellations, queue)
        catalog = Catalog(store, orchestrator, lifecycle,
                          functools.partial(session_deleted, config, checkpoints))
        async with trio.open_nursery() as root:
            await root.start(store.run)
            # Before anything can hand it a write the store refused.
            await root.start(retries.run)
            if checkpoints is not None:
                # Before any turn: a restore a kill interrupted is finished first.
                await root.start(checkpoints.run)
            await root.start(receipts.run)
            await root.start(lifecycle.run)
            # Before the queue runs: its starts wait for these sessions' takeovers.
            for handover in handed_over:
                lifecycle.start_take_over(handover)
            await root.start(cancellations.run)
            await root.start(queue.run)
            await root.start(AttachmentSweeper(config.data_dir, store).run)
            root.start_soon(_warm_up_schema)
            try:
                control = SubagentControl(agents.running_adapter, subagents)
                yield Supervisor(config, store, bus, notify, lifecycle, orchestrator, recovered,
                                 catalog, control,
                                 Stops(store, orchestrator, agents, receipts, subagents,
                                       control),
                                 checkpoints)
            finally:
                with shielded_for(config.timeouts.shutdown_s):
                    await lifecycle.shutdown()
                root.cancel_scope.cancel()
    finally:
        store.close()
