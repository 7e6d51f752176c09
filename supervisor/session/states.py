"""Every change of a session's state outside a turn's own transactions, in one place.

A turn's open (to RUNNING) and its close (out of RUNNING) write the session's
state inside their own transaction, in the store, atomically with the turn's
row; startup recovery writes it before anything runs (supervisor/turn/
recovery.py, on the database directly).  Every other change is one of these,
each allowed only from the states named here (a change that finds another
state does nothing and returns None): the store announces what it changed.
"""

from __future__ import annotations

from typing import Final

from ..models import Session, SessionState
from ..storage.store import Store

__all__ = ["STARTABLE", "start_failed", "started", "starting", "unstuck"]

#: The states an agent may be started from.
STARTABLE: Final = (SessionState.CREATED, SessionState.WAITING_FOR_INPUT, SessionState.FAILED)


async def starting(store: Store, session_id: str) -> Session | None:
    """Its agent is being started."""
    return await store.set_session_state(session_id, SessionState.STARTING, only_from=STARTABLE)


async def started(store: Store, session_id: str) -> Session | None:
    """Its agent is up and waits for a prompt."""
    return await store.set_session_state(session_id, SessionState.WAITING_FOR_INPUT,
                                         only_from=(SessionState.STARTING,))


async def start_failed(store: Store, session_id: str) -> Session | None:
    """Its agent did not start (the reason is a status message of its own)."""
    return await store.set_session_state(session_id, SessionState.FAILED,
                                         only_from=(SessionState.STARTING,))


async def login_needed(store: Store, session_id: str) -> Session | None:
    """Its agent asked for a login first (DESIGN.md §19): waiting, not failed."""
    return await store.set_session_state(session_id, SessionState.WAITING_FOR_INPUT,
                                         only_from=(SessionState.STARTING,))


async def unstuck(store: Store, session_id: str) -> Session | None:
    """RUNNING with no turn behind it (a cancel's reconciliation found it so)."""
    return await store.set_session_state(session_id, SessionState.WAITING_FOR_INPUT,
                                         only_from=(SessionState.RUNNING,))
