"""Who runs a call on the database's one connection: a worker thread, or this
(Trio's) thread when the connection is free.

Reads go to a worker thread (``call``): a slow query must not stall every
agent's pump and every client's frames.  Writes on the cancel and streaming
paths run inline when they can (``now``): a write that found the connection
busy must not go to a thread, or every write behind it would find it busy too
and a stream of writes would stay on threads.  Either way a write that meets
another connection's lock (a backup, a sqlite3 shell) is retried on a worker
thread for up to the database's busy timeout, then fails with
``StoreUnavailable``.  Every ``checkpoint_every`` commits the WAL checkpoint
falls due (``checkpoint_due``), for the store's checkpointer task.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import trio

from . import Db
from .values import StoreUnavailable

__all__ = ["Runner"]

R = TypeVar("R")
A = TypeVar("A")


class _NotInline(Exception):
    """``now`` cannot run here: a worker thread waits for the connection instead."""


def _locked(exc: sqlite3.OperationalError) -> bool:
    """Another connection holds the lock (a backup, a sqlite3 shell)."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # the primary code of an extended one
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class Runner:
    def __init__(self, db: Db, checkpoint_every: int) -> None:
        self._db = db
        self._wait_s = db.busy_timeout_s
        self._every = checkpoint_every
        self._limiter = trio.CapacityLimiter(1)
        # Guards the connection against a thread abandoned by a cancelled call.
        self._lock = threading.Lock()
        self._due = trio.Event()
        self._checkpointed_at = 0

    async def call(self, bound: Callable[[], R]) -> R:
        """``bound`` on a worker thread."""
        return await self._in_thread(bound, self._limiter)

    async def now(self, bound: Callable[[], R], *, yield_after: bool = True) -> R:
        """``bound`` on this thread when the connection is free — at once, or
        after the calls queued before it (in their order); else on a worker
        thread.  ``yield_after=False``: no checkpoint after a call run inline
        (the caller goes on in the same step, and yields later)."""
        if self._limiter.borrowed_tokens == 0:
            try:
                result = self._inline(bound)
            except _NotInline:
                return await self._in_thread(bound, self._limiter)
            if yield_after:
                # A checkpoint that cannot lose the result to a cancellation.
                await trio.lowlevel.cancel_shielded_checkpoint()
            return result
        async with self._limiter:
            try:
                return self._inline(bound)
            except _NotInline:
                # This call holds the connection's limiter already.
                return await self._in_thread(bound, trio.CapacityLimiter(1))

    async def commit(self, fn: Callable[[Sequence[A]], R], items: Sequence[A]) -> R:
        """``now(fn(items))`` with no checkpoint after an inline commit."""
        return await self.now(lambda: fn(items), yield_after=False)

    async def _in_thread(self, bound: Callable[[], R], limiter: trio.CapacityLimiter) -> R:
        """``bound`` on a worker thread, retrying while another connection holds
        the lock (up to the busy timeout); ``limiter``: the connection's, or a
        free one when the caller holds the connection's already."""
        def run() -> R:
            deadline = time.monotonic() + self._wait_s
            pause = 0.001
            while True:
                with self._lock:
                    try:
                        return bound()
                    except sqlite3.OperationalError as exc:
                        # (Rolled back: BEGIN IMMEDIATE takes the lock first.)
                        if not _locked(exc) or time.monotonic() >= deadline:
                            raise
                time.sleep(pause)
                pause = min(pause * 2, 0.1)

        try:
            return await trio.to_thread.run_sync(run, limiter=limiter)
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(str(exc)) from exc
        finally:
            self._count_commits()

    def _inline(self, bound: Callable[[], R]) -> R:
        """Run ``bound`` on this thread; ``_NotInline`` if the connection is in
        use by a thread or locked by another connection (then rolled back)."""
        if not self._lock.acquire(blocking=False):
            raise _NotInline
        try:
            result = bound()
        except sqlite3.OperationalError as exc:
            if not _locked(exc):
                raise StoreUnavailable(str(exc)) from exc
            raise _NotInline from exc
        finally:
            self._lock.release()
        self._count_commits()
        return result

    def _count_commits(self) -> None:
        if self._db.commits - self._checkpointed_at >= self._every:
            self._due.set()

    async def checkpoint_due(self) -> None:
        """Wait until ``checkpoint_every`` commits have come since the last time."""
        await self._due.wait()
        self._due = trio.Event()
        self._checkpointed_at = self._db.commits

    def close(self) -> None:
        with self._lock:
            self._db.close()
