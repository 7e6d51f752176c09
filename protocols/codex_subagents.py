"""Codex multi-agent child threads, the client's side, sans-IO (DESIGN.md §13).

With Codex's multi-agent feature a turn may spawn agents.  Each is a thread of its
own, announced as it starts::

    {"method": "thread/started", "params": {"thread": {"id": CHILD,
        "parentThreadId": PARENT, "agentNickname": "...", "agentRole": "...", ...}}}

and, on the parent, by the spawn tool's item (``collabAgentToolCall`` with ``tool:
spawnAgent``, ``senderThreadId: PARENT``, ``receiverThreadIds: [CHILD]`` and the
children's last known ``agentsStates``).  The child runs turns of its own: its
``turn/started``, ``item/*`` and ``turn/completed`` carry ``threadId: CHILD``, and
are the child's, never the parent's (its text is not the parent's answer; its turn's
end does not end the parent's).  A client stops a child's current work as it stops
any thread's: ``turn/interrupt {threadId: CHILD, turnId}``, the child's turn then
completing ``interrupted``; the parent's turn goes on.  A child may spawn children
of its own: they are shown beside it, as the parent's.

``ChildThreads`` keeps what the client knows of each child and says what changed as
the same ``SubagentChanged`` an ACP child session gives; ``CodexClient``
(protocols/codex.py) routes a child's traffic here and writes the interrupts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from .events import (
    SUBAGENT_ACTIVE,
    SUBAGENT_LIVE,
    SubagentActivity,
    SubagentChanged,
    SubagentState,
)

__all__ = ["ChildThreads"]

#: A child's turn status (``turn/completed``) → its state and stop reason.
_TURN_END: Final[dict[str, tuple[SubagentState, str]]] = {
    "completed": ("completed", "end_turn"),
    "interrupted": ("cancelled", "cancelled"),
    "failed": ("failed", "error"),
}
#: ``agentsStates``' statuses that say a child's work is over: its state then.
_AGENT_OVER: Final[dict[str, tuple[SubagentState, str]]] = {
    "interrupted": ("cancelled", "cancelled"),
    "completed": ("completed", "end_turn"),
    "shutdown": ("completed", "end_turn"),
    "errored": ("failed", "error"),
}
#: ``agentsStates``' statuses of a child at work.
_AGENT_WORKING: Final = frozenset({"pendingInit", "running"})
#: How much of a spawn's prompt titles a child that has no nickname or role.
_TITLE_CHARS: Final = 60


@dataclass(slots=True)
class _Child:
    id: str
    title: str
    state: SubagentState = "running"
    #: The child's running turn: what its ``turn/interrupt`` names (None: none known).
    turn_id: str | None = None
    stop_reason: str | None = None

    def event(self) -> SubagentChanged:
        return SubagentChanged(
            subagent_id=self.id, title=self.title, state=self.state,
            cancellable=self.turn_id is not None and self.state in SUBAGENT_ACTIVE,
            stop_reason=self.stop_reason)

    def set(self, state: SubagentState, stop: str | None = None) -> None:
        if self.state == "cancelling" and state in SUBAGENT_ACTIVE:
            return  # the interrupt was sent: only the turn's end changes what we show
        self.state = state
        self.stop_reason = stop


class ChildThreads:
    """The child threads of one Codex thread (and theirs), by thread id."""

    def __init__(self) -> None:
        self._children: dict[str, _Child] = {}
        #: How many children were seen: a plain attribute, so that a cancel of a turn
        #: without children makes no call here (the cancel walk, docs/architecture.md).
        self.count = 0

    def __contains__(self, thread_id: object) -> bool:
        # An agent's id may be any JSON value: only a string names a thread.
        return isinstance(thread_id, str) and thread_id in self._children

    def get(self, thread_id: str) -> SubagentChanged | None:
        child = self._children.get(thread_id)
        return None if child is None else child.event()

    def _add(self, thread_id: str, title: str) -> _Child:
        child = self._children.get(thread_id)
        if child is None:
            child = self._children[thread_id] = _Child(id=thread_id, title=title or thread_id)
            self.count = len(self._children)
        elif title and child.title == child.id:
            child.title = title
        return child

    def _changed(self, child: _Child, before: SubagentChanged | None) -> SubagentChanged | None:
        after = child.event()
        return None if after == before else after

    def thread_started(self, thread: object, parent: str | None) -> SubagentChanged | None:
        """A ``thread/started``: a child if its parent is ``parent`` or one of its
        children; None for any other thread (the parent's own among them)."""
        if not isinstance(thread, dict) or parent is None:
            return None
        tid, up = thread.get("id"), thread.get("parentThreadId")
        if not isinstance(tid, str) or not tid or (up != parent and up not in self):
            return None
        before = self.get(tid)
        return self._changed(self._add(tid, _title(thread)), before)

    def collab_item(self, item: dict[str, Any], parent: str | None) -> list[SubagentChanged]:
        """A ``collabAgentToolCall`` item of ``parent`` (or of a child): a spawn
        announces its receivers; any call reports its targets' last known states."""
        sender = item.get("senderThreadId")
        if parent is None or (sender != parent and sender not in self):
            return []
        changed: list[SubagentChanged] = []
        states = item.get("agentsStates")
        states = states if isinstance(states, dict) else {}
        receivers = item.get("receiverThreadIds")
        spawned = receivers if item.get("tool") == "spawnAgent" and isinstance(
            receivers, list) else []
        prompt = item.get("prompt")
        for tid in spawned:
            if isinstance(tid, str) and tid and tid not in self._children:
                self._add(tid, _snippet(prompt))
                changed.append(self._children[tid].event())
        for tid, state in states.items():
            child = self._children.get(tid)
            status = state.get("status") if isinstance(state, dict) else None
            if child is None or not isinstance(status, str):
                continue
            before = child.event()
            if status in _AGENT_OVER and child.turn_id is None:
                # Only a child with no turn known to be running: its own
                # turn/completed says more, and comes on its own stream.
                child.set(*_AGENT_OVER[status])
            elif status in _AGENT_WORKING and child.state not in SUBAGENT_LIVE:
                child.set("running")
            event = self._changed(child, before)
            if event is not None and event not in changed:
                changed.append(event)
        return changed

    def child_traffic(self, method: str,
                      params: dict[str, Any]) -> SubagentChanged | SubagentActivity | None:
        """A notification on a child's thread: its turn starting or ending (what
        changed), or its work (that it works)."""
        thread = params.get("threadId")
        child = self._children.get(thread) if isinstance(thread, str) else None
        if child is None:
            return None
        turn = params.get("turn")
        turn = turn if isinstance(turn, dict) else {}
        before = child.event()
        if method == "turn/started":
            tid = turn.get("id")
            child.turn_id = tid if isinstance(tid, str) else None
            child.set("running")
            return self._changed(child, before)
        if method == "turn/completed":
            if child.turn_id is not None and turn.get("id") not in (None, child.turn_id):
                return None  # an earlier turn's late end
            child.turn_id = None
            child.set(*_TURN_END.get(str(turn.get("status")), ("failed", "error")))
            return self._changed(child, before)
        return _activity(child.id, method, params)

    def cancellable(self, thread_id: str) -> bool:
        child = self._children.get(thread_id)
        return child is not None and child.event().cancellable

    def start_cancel(self, thread_id: str) -> tuple[SubagentChanged, dict[str, Any]]:
        """The child's interrupt is being sent: it shows ``cancelling`` until its
        turn ends; the ``turn/interrupt`` params.  The caller checked ``cancellable``."""
        child = self._children[thread_id]
        child.state = "cancelling"
        return child.event(), {"threadId": child.id, "turnId": child.turn_id}

    def running_cancellable(self) -> list[str]:
        """Every child whose turn runs and may be interrupted, in order seen."""
        return [c.id for c in self._children.values() if c.event().cancellable]


def _activity(child_id: str, method: str, params: dict[str, Any]) -> SubagentActivity:
    """A child thread's work as its activity (its trace, DESIGN.md §13): the
    answer's text it streamed, or what a tool item it started does."""
    delta = params.get("delta")
    if method == "item/agentMessage/delta" and isinstance(delta, str):
        return SubagentActivity(subagent_id=child_id, text=delta)
    item = params.get("item")
    if method == "item/started" and isinstance(item, dict):
        command = item.get("command")
        if item.get("type") == "commandExecution" and isinstance(command, str | list):
            shown = command if isinstance(command, str) else " ".join(map(str, command))
            return SubagentActivity(subagent_id=child_id, tool=shown[:200])
        tool = item.get("tool")
        if item.get("type") == "mcpToolCall" and isinstance(tool, str):
            return SubagentActivity(subagent_id=child_id, tool=tool)
        if item.get("type") == "fileChange":
            return SubagentActivity(subagent_id=child_id, tool="Edit files")
    return SubagentActivity(subagent_id=child_id)


def _title(thread: dict[str, Any]) -> str:
    """The name Codex gave the agent, else its role ("" for neither)."""
    for key in ("agentNickname", "agentRole"):
        value = thread.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _snippet(prompt: object) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        return ""
    text = " ".join(prompt.split())
    return text if len(text) <= _TITLE_CHARS else text[:_TITLE_CHARS - 1] + "…"
