"""A remote agent's host answering or not, told to the session's clients (DESIGN.md §20).

A link that survives a cut (``LinkHold``) says when it goes down and comes
back; each change is published as the session's state (its DTO's
``reachable``), so every tab shows "host unreachable" while it is down and
never shows the turn as simply running.
"""

from __future__ import annotations

import logging

from protocols.adapters import AgentAdapter

from ..agent_status import AgentStatus
from ..executors.link_hold import LinkHold
from ..notify import Notifier
from ..storage.db import StoreError
from ..storage.store import Store

__all__ = ["watch_reach"]

log = logging.getLogger(__name__)


async def watch_reach(status: AgentStatus, store: Store, notify: Notifier, session_id: str,
                      adapter: AgentAdapter) -> None:
    """Register the adapter's link (if it survives a cut) and publish each
    change of its reachability, until the link closes."""
    hold: LinkHold | None = getattr(adapter, "link_hold", None)
    if hold is None:
        return
    status.reach(session_id, lambda: hold.reachable)
    seen = hold.reachable
    while True:
        await hold.until_changed()
        if hold.reachable == seen:
            return  # the link closed: its execution ends (and its DTO says so)
        seen = hold.reachable
        try:
            session = await store.get_session(session_id)
        except StoreError as exc:
            log.warning("session %s: reachability not published: %s", session_id, exc)
            continue
        if session is not None:
            notify.state_changed(session)
