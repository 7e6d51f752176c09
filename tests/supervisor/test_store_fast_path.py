"""Store.call_now (a short write on the Trio thread, never a wait there) and
the WAL checkpoints that run off the writers' path."""

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


async def test_a_free_connection_runs_the_write_on_the_trio_thread(tmp_path: Path) -> None:
    store, sid = _store(tmp_path)
    ran_on: list[threading.Thread] = []

    def write() -> str:
        ran_on.append(threading.current_thread())
        return store.db.add_message(sid, None, "system", "status", "x").id

    await store.call_now(write)
    assert ran_on == [threading.current_thread()]
    store.close()


async def test_a_busy_connection_sends_it_to_the_worker(tmp_path: Path) -> None:
    store, _ = _store(tmp_path)
    ran_on: list[threading.Thread] = []

    def write() -> None:
        ran_on.append(threading.current_thread())

    store.runner._lock.acquire()  # another call's thread holds the connection
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.call_now, write)
        await trio.sleep(0.05)
        assert ran_on == []  # waiting in a worker thread, not blocking this one
        store.runner._lock.release()
    assert ran_on and ran_on[0] is not threading.current_thread()
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
