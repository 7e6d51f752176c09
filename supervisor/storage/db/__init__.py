"""The SQLite database: workspaces, tasks, task sessions, turns, messages, agent groups.

``Db`` is plain synchronous SQL on one connection (tested directly; callers
serialize: ``runner.Runner`` runs each call on a worker thread or inline).  WAL journal,
``synchronous=NORMAL``: a committed message survives a crash of the backend
(SIGKILL), which is the promise; a power cut may lose the last transaction.

Turn closing is conditional (``WHERE state = 'running'``) and the session is
moved to WAITING_FOR_INPUT only if it still points at that turn, so whichever
path closes a turn first (the turn itself, a cancel's reconciliation, an
escalation, startup recovery) does it exactly once and never touches a
successor turn.

Modules, one job each: ``values`` (errors, ids, timestamps, a turn's close),
``schema`` (the migrations), ``connection`` (the connection, its settings, the
transaction), ``runner`` (who runs a call: a worker thread or this one), and
the rows: ``tasks``, ``sessions``, ``turns``, ``messages``,
``queues``, ``groups``.  ``Db`` is all of them on one connection.
"""

from __future__ import annotations

from .attachments import AttachmentRows
from .connection import Checkpointer, Connection, _Tx, private_file
from .groups import GroupRows
from .schema import _MIGRATIONS, SCHEMA_VERSION, SchemaTooNew, migrate
from .tasks import TaskRows
from .turns import TurnRows
from .values import (
    ClosedRow,
    QueueFull,
    StoreError,
    StoreUnavailable,
    TurnClose,
    new_id,
    now,
    storable,
)

__all__ = [
    "SCHEMA_VERSION",
    "_MIGRATIONS",
    "Checkpointer",
    "ClosedRow",
    "Connection",
    "Db",
    "QueueFull",
    "SchemaTooNew",
    "StoreError",
    "StoreUnavailable",
    "TurnClose",
    "_Tx",
    "migrate",
    "new_id",
    "now",
    "private_file",
    "storable",
]


class Db(TaskRows, TurnRows, GroupRows, AttachmentRows):
    """Synchronous access to the database (one connection; callers serialize)."""
