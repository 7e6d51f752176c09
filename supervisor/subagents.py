"""Subagents (DESIGN.md §13): each session's child sessions, as its agent reports
them, and the cancel of one.

The agent's core (protocols/acp_subagents.py) turns ACP's ``subagent_update`` and a
v2 child's ``state_update`` into ``SubagentChanged`` events; the execution's pump
hands them to ``Subagents.record``, and the notifier publishes
``session.subagent.changed {session_id, subagent}``.  The session DTO's
``subagents`` lists the children of the session's latest turn that had any (the
children are the turn's work: a new turn's first child replaces the list).
Each child also keeps a trace: its last activity (the DTO's ``last_activity``:
the tool it started, or the end of the text it streams) and its output (the tail of
its text, the titles of its tools).  When a child ends, its trace is written as a
``subagent`` message of the parent session (supervisor/turn/subagent_traces.py), so
that the transcript keeps a line per child after the turn and after a reload.
Nothing else is persisted: after a restart, or once the agent process is gone, no child
runs (``agent_stopped`` says so for those still listed as running).  A parent's
cancel the agent did not confirm, escalated (supervisor/session/cancellation.py), cancels
the children still at work with it (``parent_stopped``): the agent is given up on.

``SubagentControl.cancel`` is ``subagent.cancel``: it stops one child through its
own protocol cancel (ACP ``session/cancel`` on the child's session id) while the
parent's turn goes on.  It answers once the cancel is written; the child's end
arrives as a ``session.subagent.changed`` (``cancelling``, then ``cancelled``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from protocols.adapters import AgentAdapter
from protocols.events import SUBAGENT_ACTIVE, SUBAGENT_LIVE, SubagentChanged

from .errors import Conflict, NotFound

__all__ = ["SubagentControl", "Subagents"]

#: What ``subagent.cancel`` did: the cancel was written; the child was being
#: cancelled already; it had ended already (nothing sent: a no-op answer).
CancelOutcome = Literal["cancel_sent", "already_cancelling", "already_finished"]


#: How much of a child's streamed text its trace keeps (the end of it), in
#: characters, and how many tool titles: a trace is one message, not a log.
TRACE_TEXT_CHARS: Final = 8000
TRACE_TOOLS: Final = 40
#: A row's "last activity" is a glance, at most this long.
ACTIVITY_CHARS: Final = 80
#: Streamed text changes the last activity with every chunk: it is published at
#: most this often (seconds) per child; a tool's start is published at once.
ACTIVITY_EVERY_S: Final = 1.0
#: What a trace says of a child's end, by its state (``cancelled`` is
#: ``stopped_by_you`` when the person asked for it).
OUTCOMES: Final = {"completed": "finished", "cancelled": "stopped", "failed": "failed"}


@dataclass(slots=True)
class _Trace:
    """What a child did, kept while it works and written once it ends."""

    text: str = ""
    text_cut: bool = False
    tools: list[str] = field(default_factory=list)
    tools_more: int = 0
    last: str = ""
    published_at: float = -math.inf
    #: The person stopped it (its own Stop, or the turn's cancel).
    by_user: bool = False
    written: bool = False

    def add(self, text: str, tool: str) -> None:
        if text:
            self.text += text
            if len(self.text) > TRACE_TEXT_CHARS:
                self.text, self.text_cut = self.text[-TRACE_TEXT_CHARS:], True
            line = " ".join(self.text.split())
            self.last = line if len(line) <= ACTIVITY_CHARS else "…" + line[-ACTIVITY_CHARS:]
        if tool:
            if len(self.tools) < TRACE_TOOLS:
                self.tools.append(tool)
            else:
                self.tools_more += 1
            self.last = tool if len(tool) <= ACTIVITY_CHARS else tool[:ACTIVITY_CHARS] + "…"


@dataclass(frozen=True, slots=True)
class _Entry:
    turn_id: str | None
    ev: SubagentChanged
    #: Stopped with its parent's escalated cancel (``parent_stopped``): the agent
    #: that ran it was given up on, so what it says of the child later is moot.
    settled: bool = False
    #: Shared by every version of the entry (``replace`` keeps it).
    trace: _Trace = field(default_factory=_Trace)

    def dto(self) -> dict[str, Any]:
        ev = self.ev
        return {"id": ev.subagent_id, "title": ev.title, "state": ev.state,
                "cancellable": ev.cancellable, "turn_id": self.turn_id,
                "task": ev.task, "last_activity": self.trace.last}

    def trace_message(self) -> tuple[str | None, str, dict[str, Any]]:
        """The ``subagent`` message of its end: turn id, content (its title), metadata."""
        ev, trace = self.ev, self.trace
        outcome = OUTCOMES.get(ev.state, "ran")
        if ev.state == "cancelled" and trace.by_user:
            outcome = "stopped_by_you"
        meta: dict[str, Any] = {
            "subagent_id": ev.subagent_id, "title": ev.title, "task": ev.task,
            "state": ev.state, "outcome": outcome, "output": trace.text,
            "output_cut": trace.text_cut, "tools": list(trace.tools),
            "tools_more": trace.tools_more}
        return self.turn_id, ev.title, meta


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
               ev: SubagentChanged, *, by_user: bool = False) -> dict[str, Any]:
        """A child announced or changed (during ``turn_id``, None: between
        turns); its DTO, to publish.  ``by_user``: a stop it reports is the
        person's (the turn's cancel was theirs)."""
        children = self._sessions.setdefault(session_id, {})
        known = children.get(ev.subagent_id)
        if known is not None and known.settled:
            return known.dto()  # its agent was given up on: it stays stopped
        if known is not None:
            turn_id = known.turn_id  # a child stays its turn's
            trace = known.trace
        else:
            if self._new_turn(children, turn_id):
                self._prune(children)
            trace = _Trace()
        if by_user and ev.state in ("cancelling", "cancelled"):
            trace.by_user = True
        entry = children[ev.subagent_id] = _Entry(turn_id, ev, trace=trace)
        return entry.dto()

    def activity(self, session_id: str, subagent_id: str, text: str, tool: str,
                 now: float) -> dict[str, Any] | None:
        """A child's work (a text chunk, a tool it started) added to its trace;
        its DTO when its last activity is to be published (a tool at once,
        text at most every ``ACTIVITY_EVERY_S``), else None."""
        entry = self._sessions.get(session_id, {}).get(subagent_id)
        if entry is None or (not text and not tool):
            return None
        trace = entry.trace
        before = trace.last
        trace.add(text, tool)
        if trace.last == before or (not tool and now - trace.published_at < ACTIVITY_EVERY_S):
            return None
        trace.published_at = now
        return entry.dto()

    def asked_to_stop(self, session_id: str, subagent_id: str) -> None:
        """The person's ``subagent.cancel`` was sent: its stop is theirs."""
        entry = self._sessions.get(session_id, {}).get(subagent_id)
        if entry is not None:
            entry.trace.by_user = True

    def take_ended(self, session_id: str) -> list[tuple[str | None, str, dict[str, Any]]]:
        """The trace messages of the children that ended since the last call
        (each child's once): turn id, content, metadata."""
        ended = []
        for entry in self._sessions.get(session_id, {}).values():
            if entry.ev.state not in SUBAGENT_LIVE and not entry.trace.written:
                entry.trace.written = True
                ended.append(entry.trace_message())
        return ended

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
                    settled=True, trace=entry.trace)
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
        self._subagents.asked_to_stop(session_id, subagent_id)
        return "cancel_sent", dto
