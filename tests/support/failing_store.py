"""The real SQLite store over a disk that fills on demand.

``DiskFullDb`` is the production ``Db`` on a real file; while ``full`` is set,
every write transaction fails as SQLite fails one on a full disk
(``sqlite3.OperationalError("database or disk is full")``, SQLITE_FULL),
before anything of it is written, and reads go on working.  The disk itself
is the boundary a test cannot reach on demand in-process; the real filesystem
version of the same fault is ``tests/faults/test_disk_full.py``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from supervisor.config import Config
from supervisor.executors import Launcher
from supervisor.root import Supervisor, open_supervisor
from supervisor.storage.db import Db, _Tx
from supervisor.storage.store import Store

__all__ = ["DiskFullDb", "disk_full", "failing_supervisor"]


def disk_full() -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError("database or disk is full")
    exc.sqlite_errorcode = sqlite3.SQLITE_FULL  # (as the sqlite3 module sets it)
    exc.sqlite_errorname = "SQLITE_FULL"
    return exc


class DiskFullDb(Db):
    full = False
    #: Write transactions refused while full (a test sees its fault was hit).
    refused = 0

    def _tx(self) -> _Tx:
        if self.full:
            self.refused += 1
            raise disk_full()
        return super()._tx()


def _open(config: Config) -> DiskFullDb:
    config.data_dir.mkdir(parents=True, exist_ok=True)
    return DiskFullDb(config.db_path, busy_timeout_s=config.timeouts.store_wait_s)


@asynccontextmanager
async def failing_supervisor(data_dir: Path, *, launcher: Launcher | None = None,
                             store_class: type[Store] = Store, **timeouts: float,
                             ) -> AsyncIterator[tuple[Supervisor, DiskFullDb]]:
    """A supervisor (real agents, real SQLite) whose database's disk can fill.

    On virtual time a test passes the in-process agents' ``launcher`` and a
    ``store_class`` that runs the SQL on the Trio thread (tests/supervisor's
    ``InlineStore``): a worker thread would let MockClock's autojump leap
    past the timeouts under test."""
    # No turn checkpoints: these tests time the turn and cancel paths while the
    # disk fills; a checkpoint before each prompt (its own rows, a git snapshot)
    # would make a cancel right after the start withhold the prompt instead.
    raw: dict[str, Any] = {"timeouts": timeouts, "projects": {"checkpoints": False}}
    config = Config.from_mapping(data_dir, raw)
    db = (_open(config) if store_class is not Store
          else await trio.to_thread.run_sync(_open, config))
    async with open_supervisor(config, launcher=launcher, db=db,
                               store_class=store_class) as sup:
        yield sup, db
