"""Waiting for a session's state, the one way.

``wait_state`` polls the session through the orchestrator (the public read a
client's ``session.get`` uses) until it is in the wanted state, for at most
``timeout`` seconds of the current clock (a ``MockClock`` with autojump runs
the polls instantly). On time out it fails with an ``AssertionError`` naming
the session, the state wanted and the state seen last, instead of a bare
``TooSlowError``.
"""

from __future__ import annotations

import trio

from supervisor.models import Session, SessionState
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor

__all__ = ["wait_state"]

POLL_S = 0.02


async def wait_state(sup: Supervisor, caller: Caller, sid: str, state: SessionState,
                     timeout: float = 10) -> Session:
    """Poll session ``sid`` until its state is ``state``; the session as read
    then. Fails after ``timeout`` seconds naming the state seen last."""
    seen: SessionState | None = None
    with trio.move_on_after(timeout):
        while True:
            session = await sup.orchestrator.session(caller, sid)
            seen = session.state
            if seen is state:
                return session
            await trio.sleep(POLL_S)
    raise AssertionError(
        f"session {sid} was not {state.value} within {timeout} s; "
        f"its state seen last: {seen.value if seen is not None else 'never read'}")
