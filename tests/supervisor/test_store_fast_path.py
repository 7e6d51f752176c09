"""Store.call_now (a short write on the Trio thread, never a wait there) and
the WAL checkpoints that run off the writers' path.

What a caller sees: a write on a free connection is committed before any other
task runs; one behind a busy connection never stalls the Trio thread.  One test
still names the thread: that a write queued behind a worker call runs inline
once its turn comes is the runner's own rule (supervisor/storage/db/runner.py:
else a stream of writes would stay on threads), with no effect a caller could
tell apart in one call."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
import trio

from supervisor.storage import store as store_module
from supervisor.storage.store import Store


def _store(tmp_path: Path) -> tuple[Store, str]:
    store = Store.open(tmp_path / "t.db")
    ws = store.db.ensure_workspace("default")
    task = store.db.create_task(ws, "t")
    return store, store.db.create_session(task.id, "mock").id


def _on_disk(path: Path, sid: str) -> list[str]:
    """The session's messages as another connection reads them: what is committed."""
    other = sqlite3.connect(path)
    try:
        rows = other.execute("SELECT content FROM messages WHERE session_id = ? ORDER BY seq",
                             (sid,)).fetchall()
    finally:
        other.close()
    return [r[0] for r in rows]


async def test_a_free_connection_commits_the_write_before_another_task_runs(
        tmp_path: Path) -> None:
    """The close on the cancel path is committed in the closing step: a task
    scheduled before the write, which runs at the write's first checkpoint,
    already finds it on disk (a write sent to a worker thread would still be
    on its way: a thread starts after that checkpoint)."""
    store, sid = _store(tmp_path)
    seen: list[list[str]] = []

    async def look() -> None:
        seen.append(_on_disk(tmp_path / "t.db", sid))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(look)
        await store.call_now(store.db.add_message, sid, None, "system", "status", "x")
    assert seen == [["x"]]
    store.close()


async def test_a_busy_connection_never_stalls_the_trio_thread(tmp_path: Path) -> None:
    """Another call holds the connection on a worker: the write waits for it
    while every other task goes on, and lands once the connection is free."""
    store, sid = _store(tmp_path)
    release = threading.Event()
    done = trio.Event()

    async def write() -> None:
        await store.call_now(store.db.add_message, sid, None, "system", "status", "w")
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.call, release.wait, 10)  # holds the connection
        await trio.sleep(0.02)
        nursery.start_soon(write)
        ticks = 0
        with trio.fail_after(5):
            while ticks < 10:  # the loop keeps turning while the write waits
                await trio.sleep(0.005)
                ticks += 1
        assert not done.is_set() and _on_disk(tmp_path / "t.db", sid) == []
        release.set()
        with trio.fail_after(10):
            await done.wait()
    assert _on_disk(tmp_path / "t.db", sid) == ["w"]
    store.close()


async def test_a_write_behind_a_worker_call_runs_on_the_trio_thread_after_it(
        tmp_path: Path) -> None:
    """The connection busy on a worker: the write waits its turn (in order) and
    then runs on the Trio thread, so a stream of writes does not stay on threads."""
    store, _ = _store(tmp_path)
    order: list[str] = []
    ran_on: list[threading.Thread] = []
    release = threading.Event()

    def slow_read() -> None:
        release.wait(5)
        order.append("read")

    def write() -> None:
        ran_on.append(threading.current_thread())
        order.append("write")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.call, slow_read)
        await trio.sleep(0.02)  # the read holds the connection, on a worker
        nursery.start_soon(store.call_now, write)
        await trio.sleep(0.02)
        assert order == []
        release.set()
    assert order == ["read", "write"]
    assert ran_on == [threading.current_thread()]
    store.close()


async def test_another_connections_lock_is_never_waited_for_on_the_trio_thread(
        tmp_path: Path) -> None:
    """A sqlite3 shell holding the write lock: the Trio thread goes on (the
    write waits for the lock in a worker) and the write lands afterwards."""
    store, sid = _store(tmp_path)
    other = sqlite3.connect(str(tmp_path / "t.db"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    done = trio.Event()

    async def write() -> None:
        await store.call_now(store.db.add_message, sid, None, "system", "status", "late")
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        ticks = 0
        with trio.fail_after(5):
            while ticks < 20:  # the loop keeps turning while the write waits
                await trio.sleep(0.005)
                ticks += 1
        assert not done.is_set()
        other.execute("ROLLBACK")
        with trio.fail_after(10):
            await done.wait()
    assert [m.content for m in store.db.list_messages(sid)] == ["late"]
    other.close()
    store.close()


async def test_checkpoints_run_on_their_own_connection_every_so_many_commits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "CHECKPOINT_EVERY", 50)
    store, sid = _store(tmp_path)
    db_file = tmp_path / "t.db"
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        # Handed over: a commit no longer checkpoints by itself.
        assert store.db.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        size_before = db_file.stat().st_size
        left = store_module.CHECKPOINT_EVERY - store.db.commits  # the set-up's commits count
        for _ in range(left - 1):
            await store.call_now(store.db.add_message, sid, None, "agent", "text", "y" * 4000)
        await trio.sleep(0.2)
        assert db_file.stat().st_size == size_before  # all still in the WAL
        await store.call_now(store.db.add_message, sid, None, "agent", "text", "z")
        with trio.fail_after(10):
            while db_file.stat().st_size == size_before:
                await trio.sleep(0.02)
        nursery.cancel_scope.cancel()
    assert len(store.db.list_messages(sid, limit=100)) == left
    store.close()
