"""Notifications of DESIGN.md §4, built in one place and published on the bus.

Each notification is built as a ``Note`` (``*_notes``) and published with
``publish``: one call to the bus per change, so that what one change causes
(a turn's close: its text, status, state, queue, completion, pending=false and
the answers of the cancels it settled) reaches each connection as one batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .agent_offers import AgentOffers
from .agent_status import AgentStatus
from .bus import EventBus, Note, Reply
from .models import Message, QueueState, Session, Task, TextAppend
from .projection import CancellationProjection, Progress
from .subagents import Subagents

__all__ = ["Notifier", "workspace_channel"]


def workspace_channel(workspace_id: str) -> str:
    """The bus key every connection of a workspace listens on (its task and
    session lists), beside the per-session keys (session ids are UUIDs)."""
    return f"workspace:{workspace_id}"


class Notifier:
    def __init__(self, bus: EventBus, agents: AgentStatus | None = None,
                 subagents: Subagents | None = None, offers: AgentOffers | None = None) -> None:
        self.bus = bus
        #: What each session's agent offers: options, commands, usage (DESIGN.md §19).
        self.offers = offers or AgentOffers()
        self.projection = CancellationProjection()
        #: Whether a session's agent process runs, and the dialect it speaks.
        self._agents = agents or AgentStatus()
        #: Each session's child sessions (DESIGN.md §13).
        self._subagents = subagents or Subagents()
        #: DESIGN.md §15, what needs the person: each session's workspace and
        #: task (learnt from every DTO and state change built here), its
        #: unanswered permission cards (message ids) and whether a cancel of it
        #: is pending.  Kept here because every message and cancellation value
        #: already passes through; nothing is persisted (after a restart no
        #: permission waits and no cancel is pending).
        self._where: dict[str, tuple[str, str]] = {}
        self._asking: dict[str, set[str]] = {}
        #: Each session's stored attention (``turn_ended``/``failed``, persisted
        #: by the store until ``session.seen``) and its agent and title, as last
        #: heard: a change of it is announced as ``session.attention`` too.
        self._stored: dict[str, str | None] = {}
        self._names: dict[str, tuple[str, str | None]] = {}
        #: DESIGN.md §18: the last published phase of each pending cancel (the
        #: DTO's ``cancel_progress``: a reload still says "Stopping after this step…").
        self._phases: dict[str, dict[str, Any]] = {}

    def agent_live(self, session_id: str) -> bool:
        return self._agents.agent_live(session_id)

    def agent_protocol(self, session: Session) -> str | None:
        return self._agents.agent_protocol(session.agent, session.id)

    def _learn(self, session: Session) -> bool:
        """Remember where the session is and what it is called; True if its
        stored attention differs from what was last heard (none: null)."""
        self._where[session.id] = (session.workspace_id, session.task_id)
        self._names[session.id] = (session.agent, session.title)
        changed = self._stored.get(session.id) != session.attention
        self._stored[session.id] = session.attention
        return changed

    def attention_of(self, session_id: str) -> str | None:
        """DESIGN.md §15: ``approval`` while a permission waits (live: it dies
        with its agent), else what the store keeps until seen."""
        return "approval" if self._asking.get(session_id) else self._stored.get(session_id)

    def session_dto(self, session: Session) -> dict[str, Any]:
        """The session's DTO (learning where it is and what it is called)."""
        self._learn(session)
        return self._dto(session)

    def _dto(self, session: Session) -> dict[str, Any]:
        progress = self.projection.get(session.id)
        live, reachable, changed = self._agents.liveness(session.id)
        return session.to_dto(progress.pending, progress.revision,
                              live, self.agent_protocol(session)) | {
            "needs_approval": bool(self._asking.get(session.id)),
            "attention": self.attention_of(session.id),
            "cancel_progress": self._phases.get(session.id) if progress.pending else None,
            "reachable": reachable,
            "profile_changed": list(changed),
            **self.offers.dto(session.id, session.options, live),
            "subagents": self._subagents.dtos(session.id)}

    def task_dto(self, task: Task) -> dict[str, Any]:
        """The task DTO with how many of its sessions wait for an approval and
        how many are being cancelled (the task list's "Needs approval" and
        "Cancelling"), and its sessions that need the person (the store's,
        with a waiting approval over it)."""
        ids = [sid for sid, (_ws, tid) in self._where.items() if tid == task.id]
        entries = {a["session_id"]: dict(a) for a in task.attention}
        for sid in ids:
            if self._asking.get(sid):
                agent, title = self._names.get(sid, ("", None))
                entries[sid] = {"session_id": sid, "attention": "approval",
                                "agent": entries.get(sid, {}).get("agent", agent),
                                "title": entries.get(sid, {}).get("title", title)}
        return task.to_dto() | {
            "approval_count": sum(1 for sid in ids if self._asking.get(sid)),
            "cancelling_count": sum(1 for sid in ids if self.projection.get(sid).pending),
            "attention_sessions": list(entries.values())}

    def publish(self, notes: list[Note], replies: list[Reply] | None = None) -> None:
        """What one change causes, to the bus in one call."""
        self.bus.publish_all(notes, replies or ())

    def _attention(self, session_id: str, notes: list[Note]) -> None:
        """``session.attention`` to the whole workspace: every tab's task and
        session lists say "Needs approval" / "Cancelling" and draw the
        session's ``attention``, subscribed or not."""
        where = self._where.get(session_id)
        if where is None:
            return  # never listed nor changed in this backend: no tab shows it
        notes.append((workspace_channel(where[0]), "session.attention", {
            "session_id": session_id, "task_id": where[1],
            "needs_approval": bool(self._asking.get(session_id)),
            "cancelling": self.projection.get(session_id).pending,
            "attention": self.attention_of(session_id)}, None))

    def _track_permission(self, msg: Message, notes: list[Note]) -> None:
        if msg.kind != "permission":
            return
        asking = self._asking.setdefault(msg.session_id, set())
        before = bool(asking)
        if msg.metadata.get("status", "pending") == "pending":
            asking.add(msg.id)
        else:
            asking.discard(msg.id)
        if bool(asking) != before:
            self._attention(msg.session_id, notes)

    def state_payload(self, session: Session) -> dict[str, Any]:
        """``session.state_changed``'s payload (a subscription's first snapshot)."""
        return _state_of(self.session_dto(session))

    def state_changed(self, session: Session) -> None:
        self.publish(self.state_notes(session))

    def state_notes(self, session: Session, notes: list[Note] | None = None) -> list[Note]:
        """The session's state to its subscribers and its DTO to the workspace,
        both from one DTO built once."""
        notes = [] if notes is None else notes
        changed = self._learn(session)
        dto = self._dto(session)
        notes.append((session.id, "session.state_changed", _state_of(dto), None))
        self._session_notes(session, dto, changed, notes)
        return notes

    # -- the workspace's lists (every connection of the workspace, subscribed or not) --

    def task_changed(self, task: Task) -> None:
        self.bus.publish(workspace_channel(task.workspace_id), "task.changed",
                         {"task": self.task_dto(task)})

    def task_removed(self, task: Task) -> None:
        self.bus.publish(workspace_channel(task.workspace_id), "task.removed",
                         {"task_id": task.id})

    def session_changed(self, session: Session) -> None:
        """``session.changed`` with its DTO; and ``session.attention`` when
        what it keeps for the person changed (a turn ended, it failed, it was
        seen), so every tab and device redraws its marks."""
        changed = self._learn(session)
        notes: list[Note] = []
        self._session_notes(session, self._dto(session), changed, notes)
        self.publish(notes)

    def _session_notes(self, session: Session, dto: dict[str, Any], changed: bool,
                       notes: list[Note]) -> None:
        notes.append((workspace_channel(session.workspace_id), "session.changed",
                      {"session": dto}, None))
        if changed:
            self._attention(session.id, notes)

    def session_removed(self, session: Session) -> None:
        self._where.pop(session.id, None)
        self._asking.pop(session.id, None)
        self._stored.pop(session.id, None)
        self._names.pop(session.id, None)
        self._subagents.forget(session.id)
        self.offers.forget(session.id)
        self._phases.pop(session.id, None)
        self.bus.publish(workspace_channel(session.workspace_id), "session.removed",
                         {"session_id": session.id, "task_id": session.task_id})

    def cancellation_changed(self, session_id: str, progress: Progress) -> None:
        self.publish(self.cancellation_notes(session_id, progress))

    def cancellation_notes(self, session_id: str, progress: Progress) -> list[Note]:
        """The projection's 0→1 and 1→0 (only those come here): the session's
        subscribers hear the pair, every tab's lists "Cancelling"."""
        if not progress.pending:
            self._phases.pop(session_id, None)
        notes: list[Note] = [(session_id, "session.cancellation_changed", {
            "session_id": session_id, "cancellation_pending": progress.pending,
            "cancellation_revision": progress.revision}, None)]
        self._attention(session_id, notes)
        return notes

    def message_added(self, msg: Message) -> None:
        notes: list[Note] = []
        self._message_added(msg, notes)
        self.publish(notes)

    def _message_added(self, msg: Message, notes: list[Note]) -> None:
        self._track_permission(msg, notes)
        notes.append((msg.session_id, "session.message.added",
                      {"session_id": msg.session_id, "message": msg.to_dto()}, None))

    def message_updated(self, msg: Message, appended: TextAppend | None = None) -> None:
        self.publish(self.messages_updated(((msg, appended),)))

    def messages_updated(self, grown: Sequence[tuple[Message, TextAppend | None]],
                         notes: list[Note] | None = None) -> list[Note]:
        """Each whole message; with ``appended``: it only grew by that text,
        which connections subscribed with ``text_appends`` get instead
        (``session.message.appended``, docs/contract-notes.md)."""
        notes = [] if notes is None else notes
        for msg, appended in grown:
            self._track_permission(msg, notes)
            append = None
            if appended is not None:
                append = ("session.message.appended", {
                    "session_id": msg.session_id, "message_id": msg.id,
                    "turn_id": msg.turn_id, "offset": appended.offset, "text": appended.text})
            notes.append((msg.session_id, "session.message.updated",
                          {"session_id": msg.session_id, "message": msg.to_dto()}, append))
        return notes

    def permission_requested(self, msg: Message) -> None:
        meta = msg.metadata
        self.bus.publish(msg.session_id, "session.permission.requested", {
            "session_id": msg.session_id, "request_id": meta.get("request_id"),
            "message_id": msg.id, "title": msg.content, "options": meta.get("options", []),
        })

    def permission_cancelled(self, session_id: str, request_id: str) -> None:
        self.bus.publish(session_id, "session.permission.cancelled",
                         {"session_id": session_id, "request_id": request_id})

    def close_notes(self, session_id: str, turn_id: str,
                    grown: Sequence[tuple[Message, TextAppend | None]], *,
                    closed: tuple[Message | None, Session | None, QueueState | None] | None,
                    stop_reason: str, acknowledged: bool) -> list[Note]:
        """A turn's close: its last text (``grown``, written with the close
        whether or not this close won), and if it won (``closed``: the status
        message, the session if it left RUNNING, the queue if it parked) the
        status, the state, the queue, ``session.turn.completed`` and, when the
        agent itself confirmed a cancel, ``session.agent.cancelled``."""
        notes = self.messages_updated(grown)
        if closed is None:
            return notes
        status, session, queue = closed
        if status is not None:
            self._message_added(status, notes)
        if session is not None:
            self.state_notes(session, notes)
        if queue is not None:
            notes.append((queue.session_id, "session.queue.changed", queue.payload(), None))
        notes.append((session_id, "session.turn.completed",
                      {"session_id": session_id, "turn_id": turn_id,
                       "stop_reason": stop_reason}, None))
        if acknowledged:
            notes.append((session_id, "session.agent.cancelled",
                          {"session_id": session_id, "turn_id": turn_id}, None))
        return notes

    def turn_completed(self, session_id: str, turn_id: str, stop_reason: str) -> None:
        self.bus.publish(session_id, "session.turn.completed",
                         {"session_id": session_id, "turn_id": turn_id,
                          "stop_reason": stop_reason})

    def progress_note(self, session_id: str, turn_id: str, phase: str,
                      extra: dict[str, Any] | None = None) -> Note:
        """DESIGN.md §9, §18: a cancel's phase on a running turn (after_step
        with the awaited tool calls and the running tool's title; sent, late,
        escalated), kept for the session's DTO while the cancel is pending."""
        payload = {"session_id": session_id, "turn_id": turn_id, "phase": phase} | (extra or {})
        self._phases[session_id] = {k: v for k, v in payload.items() if k != "session_id"}
        return (session_id, "session.cancel.progress", payload, None)

    def options_changed(self, session_id: str, options: list[dict[str, Any]]) -> None:
        """DESIGN.md §19: the session's options, whole (the agent's or our change)."""
        self.bus.publish(session_id, "session.options.changed",
                         {"session_id": session_id, "options": options})

    def commands_changed(self, session_id: str) -> None:
        self.bus.publish(session_id, "session.commands.changed",
                         {"session_id": session_id,
                          "commands": self.offers.commands(session_id)})

    def usage_changed(self, session_id: str, turn_id: str | None) -> None:
        self.bus.publish(session_id, "session.usage.changed",
                         {"session_id": session_id, "turn_id": turn_id,
                          "usage": self.offers.usage(session_id)})

    def queue_changed(self, state: QueueState) -> None:
        """DESIGN.md §9: the session's queue as committed, with its revision."""
        self.bus.publish(state.session_id, "session.queue.changed", state.payload())

    def turn_stalled(self, session_id: str, turn_id: str, silent_s: float) -> None:
        """DESIGN.md §9: the running turn has been silent for ``silent_s``."""
        self.bus.publish(session_id, "session.turn.stalled",
                         {"session_id": session_id, "turn_id": turn_id,
                          "silent_s": round(silent_s)})

    def subagent_changed(self, session_id: str, subagent: dict[str, Any]) -> None:
        """DESIGN.md §13: a child session of the session was announced or changed."""
        self.bus.publish(session_id, "session.subagent.changed",
                         {"session_id": session_id, "subagent": subagent})

    def agent_cancelled(self, session_id: str, turn_id: str) -> None:
        self.bus.publish(session_id, "session.agent.cancelled",
                         {"session_id": session_id, "turn_id": turn_id})


def _state_of(dto: dict[str, Any]) -> dict[str, Any]:
    """``session.state_changed``'s payload: the state part of the session's DTO."""
    return {
        "session_id": dto["id"], "task_id": dto["task_id"], "new_state": dto["state"],
        "updated_at": dto["updated_at"], "cancellation_pending": dto["cancellation_pending"],
        "cancellation_revision": dto["cancellation_revision"], "agent_live": dto["agent_live"],
        "reachable": dto["reachable"],
        "current_turn_id": dto["current_turn_id"],
    }
