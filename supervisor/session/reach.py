"""A remote agent's host answering or not, told to the session's clients (DESIGN.md §20).

A link that survives a cut (``LinkHold``) says when it goes down and comes
back; each change is published as the session's state (its DTO's
``reachable``), so every tab shows "host unreachable" while it is down and
never shows the turn as simply running.
"""

from __future__ import annotations

import logging

import trio

from ..executors.link_hold import LinkHold
from ..models import Session
from ..storage.db import StoreError
from ..turn.execution_state import Execution
from .cancellation import Cancellations

__all__ = ["watch_reach"]

log = logging.getLogger(__name__)


async def watch_reach(cancellations: Cancellations, ex: Execution) -> None:
    """Register the execution's link (if it survives a cut), route the host's
    offline stops to the cancel path, and publish each change of its
    reachability, until the link closes."""
    hold: LinkHold | None = getattr(ex.adapter, "link_hold", None)
    if hold is None:
        return
    cancellations.agents.status.reach(ex.session_id, lambda: hold.reachable)
    # The link's watchers: this task's own, cancelled once the link closes for
    # good; each wait is on the link (bounded by its own reconnects and close).
    async with trio.open_nursery() as watchers:
        watchers.start_soon(_take_offline_stops, cancellations, ex, hold)
        await _publish_reach(cancellations, ex, hold)
        watchers.cancel_scope.cancel()


async def _take_offline_stops(cancellations: Cancellations, ex: Execution,
                              hold: LinkHold) -> None:
    """Each turn the host cancelled by itself, recorded as the offline stop it
    is before the link reads on (the turn's end comes next)."""
    while True:
        async with hold.offline.next() as turn_id:
            cancellations.stopped_offline(ex, turn_id)


async def _publish_reach(cancellations: Cancellations, ex: Execution,
                         hold: LinkHold) -> None:
    while True:
        await hold.until_changed()
        if hold.closed.is_set():
            return  # closed for good: its execution ends (and its DTO says so)
        # (Published at each wake: a cut and a return between two wakes is said too.)
        try:
            session = await _as_stored(cancellations, ex)
        except StoreError as exc:
            log.warning("session %s: reachability not published: %s", ex.session_id, exc)
            continue
        if session is not None:
            cancellations.notify.state_changed(session)


async def _as_stored(cancellations: Cancellations, ex: Execution) -> Session | None:
    """The session as stored, read again when a turn closed (or started) during the
    read: the read runs on a worker thread, and a close that committed and published
    meanwhile would otherwise be followed by this older state (the page then showed a
    cancelled turn's session as running)."""
    session: Session | None = None
    for _ in range(5):
        turn = ex.turn
        session = await cancellations.store.get_session(ex.session_id)
        if ex.turn is turn:
            break
    return session
