"""Notifications of DESIGN.md §4, built in one place and published on the bus."""

from __future__ import annotations

from typing import Any, Protocol

from .bus import EventBus
from .models import Message, QueueState, Session, Task, TextAppend
from .projection import CancellationProjection, Progress

__all__ = ["AgentStatus", "NoAgents", "Notifier", "workspace_channel"]


def workspace_channel(workspace_id: str) -> str:
    """The bus key every connection of a workspace listens on (its task and
    session lists), beside the per-session keys (session ids are UUIDs)."""
    return f"workspace:{workspace_id}"


class AgentStatus(Protocol):
    """What a session's DTO says of its agent (``supervisor.execution_state.Agents``)."""

    def agent_live(self, session_id: str) -> bool: ...
    def agent_protocol(self, session: Session) -> str | None: ...


class NoAgents:
    """No agent runs (a store without a lifecycle: tools, tests of the store)."""

    def agent_live(self, session_id: str) -> bool:
        return False

    def agent_protocol(self, session: Session) -> str | None:
        return None


class Notifier:
    def __init__(self, bus: EventBus, agents: AgentStatus | None = None) -> None:
        self.bus = bus
        self.projection = CancellationProjection(self.cancellation_changed)
        #: Whether a session's agent process runs, and the dialect it speaks.
        self._agents: AgentStatus = agents or NoAgents()

    def agent_live(self, session_id: str) -> bool:
        return self._agents.agent_live(session_id)

    def agent_protocol(self, session: Session) -> str | None:
        return self._agents.agent_protocol(session)

    def session_dto(self, session: Session) -> dict[str, Any]:
        progress = self.projection.get(session.id)
        return session.to_dto(progress.pending, progress.revision,
                              self.agent_live(session.id), self.agent_protocol(session))

    def state_payload(self, session: Session) -> dict[str, Any]:
        progress = self.projection.get(session.id)
        return {
            "session_id": session.id, "task_id": session.task_id,
            "new_state": session.state.value, "updated_at": session.updated_at,
            "cancellation_pending": progress.pending,
            "cancellation_revision": progress.revision,
            "agent_live": self.agent_live(session.id),
            "current_turn_id": session.current_turn_id,
        }

    def state_changed(self, session: Session) -> None:
        self.bus.publish(session.id, "session.state_changed", self.state_payload(session))
        self.session_changed(session)

    # -- the workspace's lists (every connection of the workspace, subscribed or not) --

    def task_changed(self, task: Task) -> None:
        self.bus.publish(workspace_channel(task.workspace_id), "task.changed",
                         {"task": task.to_dto()})

    def task_removed(self, task: Task) -> None:
        self.bus.publish(workspace_channel(task.workspace_id), "task.removed",
                         {"task_id": task.id})

    def session_changed(self, session: Session) -> None:
        self.bus.publish(workspace_channel(session.workspace_id), "session.changed",
                         {"session": self.session_dto(session)})

    def session_removed(self, session: Session) -> None:
        self.bus.publish(workspace_channel(session.workspace_id), "session.removed",
                         {"session_id": session.id, "task_id": session.task_id})

    def cancellation_changed(self, session_id: str, progress: Progress) -> None:
        self.bus.publish(session_id, "session.cancellation_changed", {
            "session_id": session_id, "cancellation_pending": progress.pending,
            "cancellation_revision": progress.revision,
        })

    def message_added(self, msg: Message) -> None:
        self.bus.publish(msg.session_id, "session.message.added",
                         {"session_id": msg.session_id, "message": msg.to_dto()})

    def message_updated(self, msg: Message, appended: TextAppend | None = None) -> None:
        """The whole message; ``appended``: it only grew by that text, which
        connections subscribed with ``text_appends`` get instead
        (``session.message.appended``, docs/contract-notes.md)."""
        append = None
        if appended is not None:
            append = ("session.message.appended", {
                "session_id": msg.session_id, "message_id": msg.id, "turn_id": msg.turn_id,
                "offset": appended.offset, "text": appended.text})
        self.bus.publish(msg.session_id, "session.message.updated",
                         {"session_id": msg.session_id, "message": msg.to_dto()}, append)

    def permission_requested(self, msg: Message) -> None:
        meta = msg.metadata
        self.bus.publish(msg.session_id, "session.permission.requested", {
            "session_id": msg.session_id, "request_id": meta.get("request_id"),
            "message_id": msg.id, "title": msg.content, "options": meta.get("options", []),
        })

    def permission_cancelled(self, session_id: str, request_id: str) -> None:
        self.bus.publish(session_id, "session.permission.cancelled",
                         {"session_id": session_id, "request_id": request_id})

    def turn_completed(self, session_id: str, turn_id: str, stop_reason: str) -> None:
        self.bus.publish(session_id, "session.turn.completed",
                         {"session_id": session_id, "turn_id": turn_id,
                          "stop_reason": stop_reason})

    def cancel_progress(self, session_id: str, turn_id: str, phase: str) -> None:
        """DESIGN.md §9: a cancel's phase on a running turn (sent, late, escalated)."""
        self.bus.publish(session_id, "session.cancel.progress",
                         {"session_id": session_id, "turn_id": turn_id, "phase": phase})

    def queue_changed(self, state: QueueState) -> None:
        """DESIGN.md §9: the session's queue as committed, with its revision."""
        self.bus.publish(state.session_id, "session.queue.changed", state.payload())

    def turn_stalled(self, session_id: str, turn_id: str, silent_s: float) -> None:
        """DESIGN.md §9: the running turn has been silent for ``silent_s``."""
        self.bus.publish(session_id, "session.turn.stalled",
                         {"session_id": session_id, "turn_id": turn_id,
                          "silent_s": round(silent_s)})

    def agent_cancelled(self, session_id: str, turn_id: str) -> None:
        self.bus.publish(session_id, "session.agent.cancelled",
                         {"session_id": session_id, "turn_id": turn_id})
