"""Subagents (DESIGN.md §13): each session's child sessions, as its agent reports
them, and the cancel of one.

The agent's core (protocols/acp_subagents.py) turns ACP's ``subagent_update`` and a
v2 child's ``state_update`` into ``SubagentChanged`` events; the execution's pump
hands them to ``Subagents.record``, and the notifier publishes
``session.subagent.changed {session_id, subagent}``.  The session DTO's
``subagents`` lists the children of the session's latest turn that had any (the
children are the turn's work: a new turn's first child replaces the list).
Nothing is persisted: after a restart, or once the agent process is gone, no child
runs (``agent_stopped`` says so for those still listed as running).  A parent's
cancel the agent did not confirm, escalated (supervisor/cancellation.py), cancels
the children still at work with it (``parent_stopped``): the agent is given up on.

``SubagentControl.cancel`` is ``subagent.cancel``: it stops one child through its
own protocol cancel (ACP ``session/cancel`` on the child's session id) while the
parent's turn goes on.  It answers once the cancel is written; the child's end
arrives as a ``session.subagent.changed`` (``cancelling``, then ``cancelled``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from protocols.adapters import AgentAdapter
from protocols.events import SUBAGENT_ACTIVE, SUBAGENT_LIVE, SubagentChanged

from .errors import Conflict, NotFound

__all__ = ["SubagentControl", "Subagents"]

#: What ``subagent.cancel`` did: the cancel was written; the child was being
#: cancelled already; it had ended already (nothing sent: a no-op answer).
CancelOutcome = Literal["cancel_sent", "already_cancelling", "already_finished"]


@dataclass(frozen=True, slots=True)
class _Entry:
    turn_id: str | None
    ev: SubagentChanged
    #: Stopped with its parent's escalated cancel (``parent_stopped``): the agent
    #: that ran it was given up on, so what it says of the child later is moot.
    settled: bool = False

    def dto(self) -> dict[str, Any]:
        ev = self.ev
        return {"id": ev.subagent_id, "title": ev.title, "state": ev.state,
                "cancellable": ev.cancellable, "turn_id": self.turn_id}


class Subagents:
    """Each session's child sessions (memory only), in announcement order."""

    def __init__(self) -> None:
        self._sessions: dict[str, dict[str, _Entry]] = {}

    def dtos(self, session_id: str) -> list[dict[str, Any]]:
        """The session DTO's ``subagents``: ``[]`` when none."""
        return [e.dto() for e in self._sessions.get(session_id, {}).values()]

    def get(self, session_id: str, subagent_id: str) -> dict[str, Any] | None:
        entry = self._sessions.get(session_id, {}).get(subagent_id)
        return None if entry is None else entry.dto()

    def record(self, session_id: str, turn_id: str | None,
               ev: SubagentChanged) -> dict[str, Any]:
        """A child announced or changed (during ``turn_id``, None: between
        turns); its DTO, to publish."""
        children = self._sessions.setdefault(session_id, {})
        known = children.get(ev.subagent_id)
        if known is not None and known.settled:
            return known.dto()  # its agent was given up on: it stays stopped
        if known is not None:
            turn_id = known.turn_id  # a child stays its turn's
        elif self._new_turn(children, turn_id):
            self._prune(children)
        entry = children[ev.subagent_id] = _Entry(turn_id, ev)
        return entry.dto()

    @staticmethod
    def _new_turn(children: dict[str, _Entry], turn_id: str | None) -> bool:
        """Whether a child first seen during ``turn_id`` is a new turn's first:
        some listed child is another turn's."""
        if turn_id is None:
            return False  # between turns: no turn to replace the list
        return any(e.turn_id not in (None, turn_id) for e in children.values())

    @staticmethod
    def _prune(children: dict[str, _Entry]) -> None:
        """The earlier turns' children that ended are history; one still at
        work stays listed (it can be stopped)."""
        for key in [k for k, e in children.items() if e.ev.state not in SUBAGENT_LIVE]:
            del children[key]

    def parent_stopped(self, session_id: str) -> list[dict[str, Any]]:
        """The session's turn was cancelled by escalation (its agent did not
        confirm in time and was given up on): every child still at work
        (running, or its own cancel pending) is cancelled with it; their DTOs,
        to publish.  Later reports of the agent on them change nothing."""
        changed = []
        for key, entry in (children := self._sessions.get(session_id, {})).items():
            if entry.ev.state in SUBAGENT_LIVE:
                children[key] = _Entry(entry.turn_id, replace(
                    entry.ev, state="cancelled", cancellable=False, stop_reason="cancelled"),
                    settled=True)
                changed.append(children[key].dto())
        return changed

    def agent_stopped(self, session_id: str) -> list[dict[str, Any]]:
        """The session's agent process is gone, and every child with it: those
        still listed as running become ``unknown``; their DTOs, to publish."""
        changed = []
        for key, entry in (children := self._sessions.get(session_id, {})).items():
            if entry.ev.state in SUBAGENT_LIVE:
                children[key] = replace(entry, ev=replace(entry.ev, state="unknown",
                                                          cancellable=False))
                changed.append(children[key].dto())
        return changed

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)


class SubagentControl:
    """``subagent.cancel``: one child stopped through its own protocol cancel."""

    def __init__(self, adapter_of: Callable[[str], AgentAdapter | None],
                 subagents: Subagents) -> None:
        #: The adapter of a session's running agent (``Agents.running_adapter``).
        self._adapter_of = adapter_of
        self._subagents = subagents

    async def cancel(self, session_id: str, subagent_id: str) -> tuple[CancelOutcome,
                                                                       dict[str, Any]]:
        """The outcome and the child's DTO as it was when asked.  ``NotFound``:
        the session has no such child; ``Conflict``: it runs but cannot be
        cancelled (the agent did not grant ``cancel``, or its executor cannot
        send it).  A child that has ended is a no-op answer, not an error (as
        ``agent.cancel`` with nothing running is a success)."""
        dto = self._subagents.get(session_id, subagent_id)
        if dto is None:
            raise NotFound(f"no subagent {subagent_id!r} in session {session_id}")
        if dto["state"] == "cancelling":
            return "already_cancelling", dto
        if dto["state"] not in SUBAGENT_ACTIVE:
            return "already_finished", dto
        adapter = self._adapter_of(session_id)
        if adapter is None:
            return "already_finished", dto
        if not dto["cancellable"]:
            raise Conflict(f"the agent does not let subagent {subagent_id!r} be cancelled")
        if not await adapter.cancel_subagent(subagent_id):
            known = adapter.subagent(subagent_id)
            if known is not None and known.state not in SUBAGENT_ACTIVE:
                return ("already_cancelling" if known.state == "cancelling"
                        else "already_finished"), dto
            raise Conflict(f"subagent {subagent_id!r} cannot be cancelled through this "
                           "agent's executor")
        return "cancel_sent", dto
