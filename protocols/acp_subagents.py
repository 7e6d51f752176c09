"""ACP subagent sessions (stabilized 2026-11-20), the client's side, sans-IO.

An agent exposes a subagent as a *child session* with its own ``sessionId``.  It
announces the child on the parent session, before any traffic of the child::

    {"method": "session/update", "params": {"sessionId": PARENT, "update": {
        "sessionUpdate": "subagent_update", "sessionId": CHILD,
        "title": "...", "description": "...",
        "capabilities": {"cancel": {}},
        "state": {"state": "running"}}}}

Later ``subagent_update``\\ s patch it: an omitted field keeps its value, ``null``
clears it.  ``state`` is ACP's work state (``running``, ``requires_action``,
``unknown``, ``idle`` with a ``stopReason``).  In v1 the client opts in with
``clientCapabilities.subagents: {}`` and the child's work state arrives only on the
parent's ``subagent_update``; in v2 every client handles children, and the child's
state also arrives on its own stream (``state_update`` with the child's
``sessionId``), mirrored on the parent.  The child's messages, tool calls and plans
are ordinary ``session/update``\\ s carrying its ``sessionId``.  A client may stop a
child's current work with ``session/cancel {sessionId: CHILD}`` when the child
advertises ``capabilities.cancel``.  (claude-agent-acp 0.101 runs Claude's Task /
Agent tool this way, granting ``cancel``; since 0.91 a parent's cancel leaves
background children running for a client that can cancel them, so a client that
wants them stopped cancels each.)

``ChildSessions`` keeps what the client knows of each child and says what changed
as a ``SubagentChanged``; ``AcpClient`` (protocols/acp.py) routes the child's
updates here and writes the cancels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from . import acp_v2
from .acp_incoming import HISTORY_KINDS
from .events import SUBAGENT_ACTIVE, SubagentActivity, SubagentChanged, SubagentState

__all__ = ["ChildSessions", "subagent_state"]

#: A child's updates that are its work (messages, tool calls, plans), v1 and v2.
_WORK: Final[frozenset[str]] = HISTORY_KINDS | acp_v2.HISTORY_KINDS

#: ACP work states that are ours unchanged.
_SAME: Final[frozenset[str]] = frozenset({"running", "requires_action", "unknown"})


def subagent_state(state: object, stop_reason: object) -> SubagentState:
    """ACP's ``{state, stopReason}`` as Turnvisor's subagent state."""
    if isinstance(state, str) and state in _SAME:
        return state  # type: ignore[return-value]
    if state == "idle":
        if stop_reason == "cancelled":
            return "cancelled"
        if stop_reason == "error":
            return "failed"
        return "completed"
    return "unknown"


@dataclass(slots=True)
class _Child:
    id: str
    title: str
    state: SubagentState
    can_cancel: bool
    stop_reason: str | None = None
    task: str = ""

    def event(self) -> SubagentChanged:
        return SubagentChanged(
            subagent_id=self.id, title=self.title, state=self.state,
            cancellable=self.can_cancel and self.state in SUBAGENT_ACTIVE,
            stop_reason=self.stop_reason, task=self.task)


def _content_text(content: object) -> str:
    """The text of an update's ``content`` (a block, or v2's list of blocks)."""
    blocks = content if isinstance(content, list) else [content]
    return "".join(b["text"] for b in blocks
                   if isinstance(b, dict) and isinstance(b.get("text"), str))


def _activity(sid: str, kind: str, update: dict[str, Any]) -> SubagentActivity:
    """A child's work update as its activity: the answer's text it streamed, or
    the title of a tool call it started (its trace, DESIGN.md §13)."""
    if kind in ("agent_message_chunk", "agent_message"):
        return SubagentActivity(subagent_id=sid, text=_content_text(update.get("content")))
    title = update.get("title")
    if kind in ("tool_call", "tool_call_update") and isinstance(title, str) and title:
        return SubagentActivity(subagent_id=sid, tool=title)
    return SubagentActivity(subagent_id=sid)


class ChildSessions:
    """The child sessions one ACP connection announced, by child session id."""

    def __init__(self) -> None:
        self._children: dict[str, _Child] = {}
        #: How many children were announced: a plain attribute, so that a cancel of a
        #: turn without children makes no call here (the cancel walk, docs/architecture.md).
        self.count = 0

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._children

    def get(self, session_id: str) -> SubagentChanged | None:
        child = self._children.get(session_id)
        return None if child is None else child.event()

    def read(self, kind: str, update: dict[str, Any],
             sid: object) -> SubagentChanged | SubagentActivity | None:
        """A ``subagent_update`` (on the parent) or an update on a known child's
        session ``sid``: what changed, that the child works, or nothing."""
        if kind == "subagent_update":
            return self.announced(update)
        if not isinstance(sid, str) or sid not in self._children:
            return None
        if kind == "state_update":
            return self.child_state(sid, update)
        return _activity(sid, kind, update) if kind in _WORK else None

    def announced(self, update: dict[str, Any]) -> SubagentChanged | None:
        """A ``subagent_update`` (on the parent): the child as it is now, or
        None when nothing the client shows changed (or it names no child)."""
        sid = update.get("sessionId")
        if not isinstance(sid, str) or not sid:
            return None
        child = self._children.get(sid)
        before = None if child is None else child.event()
        if child is None:
            child = self._children[sid] = _Child(id=sid, title=sid, state="unknown",
                                                 can_cancel=False)
            self.count = len(self._children)
        if "title" in update or "description" in update:
            title = update.get("title")
            description = update.get("description")
            child.title = (title if isinstance(title, str) and title else
                           description if isinstance(description, str) and description
                           else sid)
            child.task = (description if isinstance(description, str)
                          and description != child.title else "")
        if "capabilities" in update:
            caps = update.get("capabilities")
            child.can_cancel = isinstance(caps, dict) and isinstance(caps.get("cancel"), dict)
        if "state" in update:
            state = update.get("state")
            if isinstance(state, dict):
                self._set_state(child, state.get("state"), state.get("stopReason"))
            else:
                self._set_state(child, "unknown", None)
        after = child.event()
        return None if after == before else after

    def child_state(self, session_id: str, update: dict[str, Any]) -> SubagentChanged | None:
        """v2: a ``state_update`` on the child's own stream."""
        child = self._children.get(session_id)
        if child is None:
            return None
        before = child.event()
        self._set_state(child, update.get("state"), update.get("stopReason"))
        after = child.event()
        return None if after == before else after

    @staticmethod
    def _set_state(child: _Child, state: object, stop: object) -> None:
        new = subagent_state(state, stop)
        if child.state == "cancelling" and new in SUBAGENT_ACTIVE:
            return  # the cancel was sent: only its end changes what we show
        child.state = new
        child.stop_reason = stop if isinstance(stop, str) and state == "idle" else None

    def cancellable(self, session_id: str) -> bool:
        child = self._children.get(session_id)
        return child is not None and child.event().cancellable

    def start_cancel(self, session_id: str) -> SubagentChanged:
        """The child's cancel is being sent: it shows ``cancelling`` until it
        answers.  The caller checked ``cancellable``."""
        child = self._children[session_id]
        child.state = "cancelling"
        return child.event()

    def running_cancellable(self) -> list[str]:
        """Every child that runs and may be cancelled, in announcement order."""
        return [c.id for c in self._children.values() if c.event().cancellable]
