"""``turnvisor backup PATH`` and ``turnvisor restore PATH`` (DESIGN.md §16).

Backup copies the data dir's database with SQLite's online backup API
(``sqlite3.Connection.backup``) in one step: one read transaction, so the copy
is the database as of one commit, whatever the server writes meanwhile (WAL:
the server's writers are not blocked by a reader).  It needs no lock and runs
beside a serving ``turnvisor serve``.  The copy is written next to PATH under
a temporary name (mode 0600: it holds every conversation), checked
(``PRAGMA integrity_check``), made a single file (rollback journal, no WAL),
synced and renamed into place; an existing PATH is refused, never overwritten.

Restore is for a stopped data dir: it takes the server's own lock
(``web.startup.hold_data_dir``), so it is refused while a server runs there
and no server can start while it works.  It refuses a file that is not a
Turnvisor database, is damaged, or is from a newer schema (an older one is
migrated at the next start).  The current database (with its WAL and shared
memory files, which belong to it) is kept beside it as
``turnvisor.db.before-restore-STAMP``.

Restore verifies (issue 40, item 10): a database is code as well as data.  A
backup carrying a trigger (every new session's ``cwd`` set to a root-owned
directory), a view, an index or a table's changed definition would run or
shape what the server does once restored.  So every schema object of the
backup (``sqlite_master``: type, name, table, SQL with its whitespace
collapsed) must be exactly what Turnvisor's own migrations make at the
backup's schema version, built afresh in memory; anything else is refused
with one line naming the difference, and nothing is replaced.  The check
runs on the copy already inside the data dir, the one that is then renamed
into place: the backup file (which may lie where an agent writes) can change
after the check without effect.  SQLite's statistics tables
(``sqlite_stat1``/``sqlite_stat4``, which ``ANALYZE`` writes: data for the
query planner, never run) are allowed with their own definitions.
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from supervisor.config import Config
from supervisor.errors import StartError
from supervisor.storage.db import _MIGRATIONS, SCHEMA_VERSION

from .startup import hold_data_dir

__all__ = ["BackupError", "Copied", "backup", "restore"]

#: Tables every Turnvisor database has had since schema 1.
_TABLES = frozenset({"workspaces", "tasks", "task_sessions", "turns", "messages"})
#: SQLite's own statistics tables (``ANALYZE``): planner data, allowed as SQLite defines them.
_STAT_TABLES = {
    ("table", "sqlite_stat1", "sqlite_stat1", "CREATE TABLE sqlite_stat1(tbl,idx,stat)"),
    ("table", "sqlite_stat4", "sqlite_stat4",
     "CREATE TABLE sqlite_stat4(tbl,idx,neq,nlt,ndlt,sample)"),
}
#: A schema object: (type, name, table, SQL with whitespace collapsed; "" for none).
_Object = tuple[str, str, str, str]


class BackupError(Exception):
    """A backup or restore that cannot be done: one line saying why and what to do."""


@dataclass(frozen=True)
class Copied:
    path: Path
    schema: int
    tasks: int
    messages: int
    kept: Path | None = None
    """Restore: where the database it replaced was put."""


def backup(data_dir: Path, dest: Path) -> Copied:
    source = Config(data_dir=data_dir).db_path
    if not source.is_file():
        raise BackupError(f"there is no database at {source}: check --data-dir")
    if dest.exists():
        raise BackupError(f"{dest} already exists: remove it or pick another PATH")
    if not dest.parent.is_dir():
        raise BackupError(f"{dest.parent} is not a directory: create it or pick another PATH")
    partial = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    try:
        with closing(_connect(source)) as src:
            src.execute("PRAGMA query_only = ON")
            _copy(src, partial)
        copied = _check(partial, what=f"the copy of {source}")
        os.replace(partial, dest)
        _sync_dir(dest.parent)
    except sqlite3.Error as exc:
        raise BackupError(f"the backup of {source} failed ({exc}): free space on "
                          f"{dest.parent}'s disk or fix its permissions, then try again") from None
    except OSError as exc:
        raise BackupError(f"cannot write {dest} ({exc.strerror or exc}): free space or fix "
                          "its directory's permissions, then try again") from None
    finally:
        partial.unlink(missing_ok=True)
    return Copied(dest, copied.schema, copied.tasks, copied.messages)


def restore(data_dir: Path, source: Path) -> Copied:
    if not source.is_file():
        raise BackupError(f"{source} is not a file: give the path of a backup")
    _check(source, what=str(source))  # a file that is no backup: said before the lock
    target = Config(data_dir=data_dir).db_path
    try:
        with hold_data_dir(data_dir):
            partial = target.with_name(f".{target.name}.restoring")
            try:
                with closing(_connect(source)) as src:
                    _copy(src, partial)
                # What is checked is what is put in place (the source may change meanwhile).
                checked = _check(partial, what=str(source))
                _verify_schema(partial, checked.schema, what=str(source))
                kept = _set_aside(target)
                os.replace(partial, target)
                _sync_dir(target.parent)
            finally:
                partial.unlink(missing_ok=True)
    except StartError as exc:
        raise BackupError(str(exc)) from None
    except (sqlite3.Error, OSError) as exc:
        raise BackupError(f"the restore into {data_dir} failed ({exc}): free space or fix "
                          "its permissions, then try again (the database there is "
                          "unchanged)") from None
    return Copied(target, checked.schema, checked.tasks, checked.messages, kept)


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


def _copy(src: sqlite3.Connection, dest: Path) -> None:
    """``src`` into a new file ``dest`` (0600), a single synced file."""
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.close(fd)
    with closing(sqlite3.connect(dest, isolation_level=None)) as out:
        # pages=-1 (the default): the whole database in one step, one snapshot.
        src.backup(out)
        out.execute("PRAGMA journal_mode = DELETE")
    fd = os.open(dest, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check(path: Path, *, what: str) -> Copied:
    """``path`` as a Turnvisor database this version can open (``BackupError`` if not)."""
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            schema = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if not _TABLES.issubset(tables) or schema < 1:
                raise BackupError(f"{what} is not a Turnvisor database (it has no "
                                  "Turnvisor tables): give the path of a backup")
            if schema > SCHEMA_VERSION:
                raise BackupError(f"{what} was written by a newer Turnvisor (schema {schema}, "
                                  f"this one knows up to {SCHEMA_VERSION}): restore it with "
                                  "that version")
            problems = [r[0] for r in conn.execute("PRAGMA integrity_check")]
            if problems != ["ok"]:
                raise BackupError(f"{what} is damaged ({problems[0]}): use another backup")
            tasks = int(conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0])
            messages = int(conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"{what} is not a Turnvisor database ({exc}): give the path of "
                          "a backup") from None
    return Copied(path, schema, tasks, messages)


def _schema(conn: sqlite3.Connection) -> set[_Object]:
    return {(kind, name, table, " ".join((sql or "").split()))
            for kind, name, table, sql in conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master")}


def _expected_schema(version: int) -> set[_Object]:
    """The schema objects Turnvisor's own migrations make at ``version``, built
    in memory as an installation of that version built its database."""
    with closing(sqlite3.connect(":memory:", isolation_level=None)) as conn:
        for i in range(version):
            conn.executescript(f"BEGIN; {_MIGRATIONS[i]}; COMMIT;")
        return _schema(conn)


def _verify_schema(path: Path, version: int, *, what: str) -> None:
    """``BackupError`` naming the difference unless ``path``'s schema objects are
    exactly those of ``version``."""
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        found = _schema(conn) - _STAT_TABLES
    expected = _expected_schema(version)
    if found == expected:
        return
    extra, missing = found - expected, expected - found
    changed = {(k, n) for k, n, _, _ in extra} & {(k, n) for k, n, _, _ in missing}
    said = [f"{k} {n} differs" for k, n in sorted(changed)]
    said += [f"{k} {n}{_on(k, n, t)} is not in it" for k, n, t, _ in sorted(extra)
             if (k, n) not in changed]
    said += [f"{k} {n} is missing" for k, n, _, _ in sorted(missing) if (k, n) not in changed]
    more = f" (and {len(said) - 3} more)" if len(said) > 3 else ""
    raise BackupError(f"{what} has a schema other than Turnvisor's schema {version} makes: "
                      f"{'; '.join(said[:3])}{more}; refused, nothing replaced")


def _on(kind: str, name: str, table: str) -> str:
    return f" on {table}" if kind in ("trigger", "index") and table != name else ""


def _set_aside(target: Path) -> Path | None:
    """Moves the current database and its WAL/shared-memory files out of the way."""
    if not target.exists():
        return None
    try:
        # Its WAL written into it first, so the kept file stands alone.
        with closing(_connect(target)) as old:
            old.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.Error:
        pass  # a damaged database (the reason to restore, maybe): kept as it is
    kept = target.with_name(f"{target.name}.before-restore-{time.strftime('%Y%m%d-%H%M%S')}")
    for suffix in ("-wal", "-shm", ""):  # the database last: its WAL goes with it
        part = Path(f"{target}{suffix}")
        if part.exists():
            os.replace(part, f"{kept}{suffix}")
    return kept


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
