"""Reopening a session's conversation in a fresh agent process (DESIGN.md §10).

A session is a conversation, not a process.  When its agent process is gone
(backend restart, crash, escalation replacement, idle stop) the lifecycle
starts a new one and, inside the next prompt's turn, calls ``reopen``: ACP
``session/resume`` when advertised, else ``session/load`` (its replay is
consumed by the protocol core, never stored a second time), Codex
``thread/resume``.  Whatever goes wrong (the agent cannot restore, refuses,
does not answer within ``restore_s``, the session ran under another profile
or directory) ends in a fresh agent session, and the caller says so in the
transcript: never silently.

Only ``AgentClosed`` (the agent died) and cancellation leave ``reopen``
without a session; the turn then ends as any turn whose agent died.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import trio

from protocols.adapters import (
    AgentAdapter,
    AgentRefused,
    AgentRequestError,
    AgentTimeout,
    Restored,
    RestoreUnsupported,
)
from protocols.jsonrpc import LocalProtocolError

from ..models import AgentSessionRef

__all__ = ["RESTORE_FAILED_META", "RESTORE_FAILED_STATUS", "Reopened", "reopen"]

log = logging.getLogger(__name__)

#: The transcript's word when a conversation could not be restored (DESIGN.md §10).
RESTORE_FAILED_STATUS = "The agent could not restore the conversation; it starts fresh"
RESTORE_FAILED_META: dict[str, Any] = {"resumed": False, "variant": "warning"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Reopened:
    """The agent session a turn runs in after ``reopen``."""

    ref: AgentSessionRef
    #: How it was restored; None: a fresh session (``reason`` says why) ...
    restored: Restored | None
    reason: str | None = None
    #: ... unless the agent handed back the very conversation asked for (an
    #: agent behind agentctl: its session is re-attached by its owner).
    reattached: bool = False
    #: Seconds the restore (and its fallback) took.
    took_s: float = 0.0


async def reopen(adapter: AgentAdapter, ref: AgentSessionRef, *, profile: str, cwd: str,
                 restore_s: float) -> Reopened:
    """Restore ``ref`` in the freshly initialized ``adapter``, else open a new
    session; each step bounded by ``restore_s``.  Raises ``AgentClosed`` if
    the agent dies, ``AgentTimeout`` if even the fresh session gets no answer."""
    started = trio.current_time()
    reason: str | None = None
    if ref.profile != profile:
        reason = f"it ran under the agent profile {ref.profile!r}"
    elif ref.cwd != cwd:
        reason = f"it ran in another directory ({ref.cwd})"
    else:
        with trio.move_on_after(restore_s) as timer:
            try:
                restored = await adapter.restore_session(ref.agent_session_id, cwd)
            except RestoreUnsupported as exc:
                reason = str(exc)
            except (AgentRequestError, AgentRefused, AgentTimeout, LocalProtocolError) as exc:
                reason = f"the agent refused: {exc}"
            else:
                return Reopened(ref=AgentSessionRef(agent_session_id=restored.agent_session_id,
                                                    profile=profile, cwd=cwd),
                                restored=restored, took_s=trio.current_time() - started)
        if timer.cancelled_caught:
            reason = f"no answer within {restore_s:g}s"
    log.info("agent conversation %s not restored (%s); opening a session",
             ref.agent_session_id, reason)
    with trio.move_on_after(restore_s) as fresh_timer:
        agent_session_id = await adapter.new_session(cwd)
    if fresh_timer.cancelled_caught:
        raise AgentTimeout(f"the agent opened no fresh session within {restore_s:g}s")
    return Reopened(ref=AgentSessionRef(agent_session_id=agent_session_id, profile=profile,
                                        cwd=cwd),
                    restored=None, reason=reason, took_s=trio.current_time() - started,
                    reattached=agent_session_id == ref.agent_session_id)
