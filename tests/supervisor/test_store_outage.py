"""A store outage longer than ``store_wait_s`` (issue 17, item 4): the turn the
store refused to close is closed in the background as soon as the store
answers again, without anyone cancelling it."""

from __future__ import annotations

import sqlite3

import trio

from supervisor.models import SessionState
from tests.support.bus_frames import queued
from tests.support.sessions import new_session
from tests.support.wait import wait_state

from .conftest import SupervisorFactory


async def test_a_turn_closed_during_a_store_outage_is_reconciled_when_it_ends(
    make_supervisor: SupervisorFactory
) -> None:
    async with make_supervisor(store_wait_s=0.2) as sup:
        caller, sid = await new_session(sup)
        sub = sup.bus.subscriber()
        sub.subscribe(sid)
        await sup.orchestrator.send_message(caller, sid, "/delay 1500")
        with trio.fail_after(30):  # the turn streams (its first chunk is stored) ...
            while not any(m.role == "agent"
                          for m in await sup.orchestrator.list_messages(caller, sid)):
                await trio.sleep(0.02)
        # ... when another program takes the database's write lock for longer than the wait.
        locker = sqlite3.connect(sup.config.db_path, isolation_level=None)
        try:
            locker.execute("BEGIN EXCLUSIVE")
            # The turn ends (and its close is refused) while the lock is held.
            with trio.fail_after(30):
                while sid in sup.lifecycle.executions and \
                        sup.lifecycle.executions[sid].turn is not None:
                    await trio.sleep(0.05)
            await trio.sleep(1.0)
            # The store still says RUNNING (the lock holder sees the committed state).
            state = locker.execute("SELECT state FROM task_sessions WHERE id = ?",
                                   (sid,)).fetchone()[0]
            assert state == "RUNNING"
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        # No cancel, no new prompt: the background close lands once the lock is gone.
        await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=30)
        frames = queued(sub)
        assert any('"new_state":"WAITING_FOR_INPUT"' in f for f in frames)
        assert any("session.turn.completed" in f for f in frames)
