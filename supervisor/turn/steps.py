"""A turn's tool calls, and the rule of a stop after the current step (DESIGN.md §18).

Pure: the pump tells ``ToolCalls`` every tool event of the turn (the receipt
reads what finished and what was cut), and while a stop waits for the step,
``StepWait.over`` says, event by event, whether the cancel is due now.  The
rule, one row per case:

- every tool call running at acceptance has finished (completed, failed or
  cancelled by the agent): due;
- a permission request arrives: due (the cancel answers it as cancelled);
- a tool call that starts meanwhile: not due (it is cut by the cancel, with
  the turn);
- anything else (text, plan, the awaited calls' own progress): not due.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocols.events import PermissionRequested, ToolCallStarted, ToolCallUpdated

__all__ = ["ENDED", "STEP_EVENTS", "StepWait", "ToolCalls"]

#: The events a step's tool calls and its wait are told of.
STEP_EVENTS = (ToolCallStarted, ToolCallUpdated, PermissionRequested)

#: A tool call's statuses after which it runs no more.
ENDED = frozenset({"completed", "failed", "cancelled"})


@dataclass(slots=True)
class ToolCalls:
    """The turn's tool calls: running (id → title, in start order), and how
    each that ended, ended."""

    running: dict[str, str] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)

    def see(self, event: object) -> None:
        match event:
            case ToolCallStarted(tool_call_id=tid, title=title, status=status):
                if status in ENDED:
                    self._ended(tid, status)
                else:
                    self.running[tid] = title
            case ToolCallUpdated(tool_call_id=tid, status=status, title=title):
                if status in ENDED:
                    self._ended(tid, status)
                elif title and tid in self.running:
                    self.running[tid] = title

    def _ended(self, tid: str, status: str) -> None:
        self.running.pop(tid, None)
        if tid in self.finished or tid in self.cancelled:
            return
        (self.cancelled if status == "cancelled" else self.finished).append(tid)

    def cut(self) -> None:
        """The turn ended: what still runs counts as cancelled with it."""
        for tid in list(self.running):
            self._ended(tid, "cancelled")


@dataclass(frozen=True, slots=True)
class StepWait:
    """A stop waiting for the step that ran at its acceptance."""

    awaited: frozenset[str]
    #: The running tool's title (the first awaited one), for "Stopping after this step…".
    title: str

    @classmethod
    def of(cls, tools: ToolCalls) -> StepWait | None:
        """The wait for what runs now (None: nothing runs, a cancel now)."""
        if not tools.running:
            return None
        return cls(frozenset(tools.running), next(iter(tools.running.values())))

    def over(self, event: object, tools: ToolCalls) -> bool:
        """Whether the cancel is due after ``event`` (``tools`` already told of it)."""
        if isinstance(event, PermissionRequested):
            return True
        return not any(tid in tools.running for tid in self.awaited)

    def payload(self) -> dict[str, object]:
        """The ``after_step`` phase's own fields."""
        return {"tool_call_ids": sorted(self.awaited), "title": self.title}
