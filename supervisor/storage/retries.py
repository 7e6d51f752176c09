"""Records the store refused, written when it can again; and the guard that
keeps one session's failure inside its own task.

A cancel never waits for the store (docs/reliability.md, guarantee 2): when
the disk is full or the database locked for longer than ``store_wait_s``, the
agent is stopped all the same and what the store should say about it (the
turn closed, the session out of RUNNING, the queue parked) is handed to
``Retries``.  Its nursery, the *store retries nursery*, runs each such write
with backoff (0.5 s doubling to 10 s) until it lands or ``store_retry_s`` has
passed; one write per key at a time (a turn's close asked for twice runs
once), and nothing of it can reach a shared nursery: a write that fails
otherwise than by the store's unavailability is logged and dropped.

``contained`` runs a task of a shared nursery (the queue's starts, a
takeover) so that whatever one session's work raises ends that task only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import trio

from .db import StoreError

__all__ = ["Retries", "contained"]

log = logging.getLogger(__name__)

#: The first pause after a refused write, and the longest.
FIRST_DELAY_S = 0.5
MAX_DELAY_S = 10.0


async def contained(what: str, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
    """``fn(*args)``; any exception it raises is logged here and goes no further
    (a shared nursery must outlive one session's failure)."""
    try:
        await fn(*args)
    except StoreError as exc:
        # An outage (a full disk), not a bug: a line, no traceback.
        log.warning("%s: the store refused it (%s); the server goes on", what, exc)
    except Exception:
        log.exception("%s failed; the server goes on", what)


class Retries:
    def __init__(self, retry_s: float) -> None:
        #: How long a write is retried before it is given up (``store_retry_s``).
        self.retry_s = retry_s
        self._nursery: trio.Nursery | None = None
        #: The keys of the writes waiting for the store.
        self.pending: set[Hashable] = set()
        #: Set when no write waits (tests and the shutdown read it).
        self._idle = trio.Event()
        self._idle.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The store retries nursery, for the supervisor's life."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def retry(self, key: Hashable, write: Callable[[], Awaitable[object]], what: str, *,
              done: Callable[[bool], None] | None = None) -> bool:
        """Run ``write`` until it raises no ``StoreError`` (bounded); ``done``
        is told whether it landed.  False (and ``done`` not kept): a write of
        ``key`` waits already, and it says the same."""
        if key in self.pending:
            return False
        assert self._nursery is not None, "Retries.run is not running"
        try:
            self._nursery.start_soon(self._run, key, write, what, done)
        except RuntimeError:
            # Closed: the supervisor is stopping (the next start's recovery closes
            # what is left open).
            log.warning("%s: not written (the server is stopping)", what)
            return False
        self.pending.add(key)
        self._idle = trio.Event()
        return True

    async def wait_idle(self) -> None:
        """Until no write waits for the store."""
        while self.pending:
            await self._idle.wait()

    async def _run(self, key: Hashable, write: Callable[[], Awaitable[object]], what: str,
                   done: Callable[[bool], None] | None) -> None:
        landed = False
        try:
            delay = FIRST_DELAY_S
            with trio.move_on_after(self.retry_s):
                while True:
                    await trio.sleep(delay)
                    try:
                        await write()
                    except StoreError as exc:
                        log.debug("%s: the store still refuses (%s)", what, exc)
                        delay = min(delay * 2, MAX_DELAY_S)
                        continue
                    landed = True
                    log.info("%s: written once the store answered", what)
                    break
            if not landed:
                log.error("%s: not written within %gs; the next cancel or start reconciles "
                          "it", what, self.retry_s)
        except Exception:
            log.exception("%s failed; given up", what)
        finally:
            self.pending.discard(key)
            if not self.pending:
                self._idle.set()
            if done is not None:
                try:
                    done(landed)
                except Exception:
                    log.exception("%s: its completion failed", what)
