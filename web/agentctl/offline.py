"""agentctl's offline cancel (DESIGN.md §20): no backend, no running turn.

With ``--offline-cancel-s N`` agentctl cancels its running turn by itself once
no client has been connected to its event stream for N seconds (the backend's
host, or the network between, is gone), so an agent does not run on for hours
unwatched.  It writes ``OfflineCancel {turn_id, offline_s}`` to its log first,
then the turn's cancel: a backend that comes back reads both on the replay
and reports the turn's end as stopped offline.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import trio

from .eventlog import EventLog
from .hosted import HostedAgent

__all__ = ["cancel_when_offline"]

log = logging.getLogger(__name__)


class AgentHost(Protocol):
    """What of web/agentctl/host.py's ``AgentHost`` this needs."""

    log: EventLog
    agent: HostedAgent | None

    async def cancel(self, *, session_id: str | None, join_s: float | None,
                     resend: bool = False) -> dict[str, Any]: ...


async def cancel_when_offline(host: AgentHost, offline_s: float) -> None:
    """Runs in the host's nursery: checks a few times per ``offline_s`` (at
    most every second) whether a turn runs with nobody connected that long."""
    alone_since: float | None = None
    period = min(1.0, offline_s / 4)
    while True:
        await trio.sleep(period)
        now = trio.current_time()
        if host.log.subscribers:
            alone_since = None
            continue
        if alone_since is None:
            alone_since = now
        agent = host.agent
        turn = agent.turn if agent is not None else None
        if (turn is None or turn.done.is_set() or turn.cancel_requested
                or now - alone_since < offline_s):
            continue
        log.warning("no backend connected for %.1fs: cancelling turn %s", now - alone_since,
                    turn.id)
        host.log.publish({"type": "OfflineCancel", "turn_id": turn.id,
                          "offline_s": offline_s}, turn=turn.id)
        try:
            await host.cancel(session_id=None, join_s=0)
        except Exception as exc:  # a refusal is logged, the turn's own bounds still hold
            log.warning("the offline cancel of turn %s failed: %s", turn.id, exc)
