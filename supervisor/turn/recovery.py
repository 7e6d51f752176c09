"""Startup recovery: what a dead backend left behind.

- Agent process groups recorded by a previous run are SIGKILLed (a SIGKILLed
  backend cannot tear its agents down; PR_SET_PDEATHSIG is no option with trio)
  — only where the group id is still ours: the leader alive with the start
  time recorded for it, or gone altogether (``protocols.process.may_sweep``).
  A pid reused by an unrelated process is left alone.  With them goes every
  process carrying a recorded agent tag: the tools an agent started in a
  group or session of their own (a tag is unique: no other process has it).
- Sessions left RUNNING or STARTING have no agent behind them any more: their
  open turn is closed (state ``interrupted``, one status message "Turn
  interrupted: Turnvisor restarted") and they become WAITING_FOR_INPUT, so the
  next prompt starts a fresh agent; the queue of a session whose turn was
  interrupted is parked (auto-run off), its entries kept.  Nothing is pending: the cancellation
  projection lives only in memory.
- Except a turn handed over (``handovers``): one an agentctl at a configured
  URL runs (its agent outlives us) with its event stream's position recorded.
  It stays open; the lifecycle re-attaches it once it runs
  (``LifecycleManager.take_over``), and interrupts it as above, with the same
  status message, if agentctl no longer runs it or does not answer in time.
  A cancel that was pending when the backend went is gone with it (the
  projection lives in memory): the turn is simply cancellable again.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass

from protocols.process import (
    group_alive,
    kill_group,
    kill_tree,
    may_sweep,
    process_identity,
    tagged_processes,
)

from ..models import SessionState
from ..storage.db import Db

__all__ = ["RESTART_META", "RESTART_STATUS", "Handover", "handovers", "recover"]

log = logging.getLogger(__name__)

RESTART_STATUS = "Turn interrupted: Turnvisor restarted"
RESTART_META = {"variant": "warning", "interrupted": True}


@dataclass(frozen=True, slots=True)
class Handover:
    """A running turn the next backend takes over: its session, its id, and the
    agentctl seq its event stream was written down up to."""

    session_id: str
    turn_id: str
    after: int
    #: When a cancel of it was accepted that its host never got (unix seconds;
    #: DESIGN.md §20): the next backend sends it once the turn is taken over.
    cancel_held_at: float | None = None


def handovers(db: Db, outliving: Collection[str]) -> list[Handover]:
    """The open turns of sessions whose agent profile (one of ``outliving``)
    outlives the backend, with a recorded stream position."""
    db.forget_turn_handovers()
    found: list[Handover] = []
    for session in db.sessions_in_states((SessionState.RUNNING,)):
        if session.agent not in outliving or session.current_turn_id is None:
            continue
        after = db.turn_handover(session.current_turn_id)
        if after is not None:
            found.append(Handover(session.id, session.current_turn_id, after,
                                  db.turn_cancel_held(session.current_turn_id)))
    return found


def recover(db: Db, *, keep: Collection[str] = ()) -> dict[str, int]:
    """Runs before anything else starts (synchronously, on the store's connection).
    ``keep``: sessions whose running turn is handed over (left open)."""
    swept = 0
    tags: set[str] = set()
    leaders = db.agent_group_leaders()
    for pgid, session_id, command, tag in db.agent_groups():
        if not may_sweep(leaders.get(pgid), process_identity(pgid)):
            log.warning("agent group %d (%s) of session %s: the process with its leader's "
                        "id is not the one recorded; not killed", pgid, command, session_id)
        elif group_alive(pgid) and kill_group(pgid):
            swept += 1
            log.warning("killed orphaned agent group %d (%s) of session %s",
                        pgid, command, session_id)
        if tag is not None:
            tags.add(tag)
        db.forget_agent_group(pgid)
    if tags:
        tools = kill_tree(tagged_processes(tags))
        if tools:
            log.warning("killed %d orphaned agent tool process(es): %s", len(tools), tools)
    reconciled = 0
    for session in db.sessions_in_states((SessionState.RUNNING, SessionState.STARTING)):
        if session.id in keep:
            continue
        if session.current_turn_id is not None:
            db.close_turn(session.current_turn_id, state="interrupted", stop_reason="cancelled",
                          status=(RESTART_STATUS, dict(RESTART_META)))
            # A restart that interrupted a turn parks the queue (DESIGN.md §9):
            # nothing queued runs until the user resumes it.
            db.queue_set_auto_run(session.id, False)
        db.set_session_state(session.id, SessionState.WAITING_FOR_INPUT,
                             only_from=(SessionState.RUNNING, SessionState.STARTING))
        reconciled += 1
    return {"swept_groups": swept, "reconciled_sessions": reconciled}
