"""The cancel path's tracing hook: diagnostics for the benchmarks, the debug
endpoint and the tests, off in the product unless ``[server] trace_cancels``.

When it is off nothing on the cancel path records anything (no call, no
counter): the parts that would tell it hold ``None``.  When it is on it
keeps, per operation, the stage marks (``trio.current_time()``): received,
admitted, step_over (a stop after the step: its step ended), adapter_sent,
agent_answered, committed (its turn's close transaction returned),
reconciled, published; the last settled operations (bounded); and how many
operations began, and how many their turn's close settled (no task woken to
settle them).
"""

from __future__ import annotations

import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import trio

__all__ = ["CancelTrace", "Traced"]

#: The operation traced (``supervisor.turn.cancel_op.CancelOperation``).
Op = TypeVar("Op")


@dataclass(eq=False)
class Traced(Generic[Op]):
    """One settled operation and its stage marks."""

    op: Op
    marks: dict[str, float] = field(default_factory=dict)


class CancelTrace(Generic[Op]):
    def __init__(self, keep: int = 256) -> None:
        self.started = 0
        self.settled_by_close = 0
        self.settled: deque[Traced[Op]] = deque(maxlen=keep)
        self._marks: weakref.WeakKeyDictionary[Op, dict[str, float]] = (
            weakref.WeakKeyDictionary())
        #: Settled, its publication still to come (then its ``published`` mark).
        self._unpublished: weakref.WeakKeyDictionary[Op, dict[str, float]] = (
            weakref.WeakKeyDictionary())

    def begun(self, op: Op, received: float) -> None:
        self.started += 1
        self._marks[op] = {"received": received, "admitted": trio.current_time()}

    def mark(self, op: Op, name: str) -> None:
        """A stage of a running operation (``step_over``: the step a stop
        after the step waited for ended, as the pump saw it)."""
        marks = self._marks.get(op)
        if marks is not None:
            marks[name] = trio.current_time()

    def ended(self, op: Op, sent_at: float | None, answered_at: float | None, *,
              by_close: bool) -> None:
        """The operation settled (``by_close``: in its turn's close); when its
        cancel was written to the agent, and when the agent's answer came."""
        marks = self._marks.pop(op, {})
        if sent_at is not None:
            marks["adapter_sent"] = sent_at
        if answered_at is not None:
            marks["agent_answered"] = answered_at
        marks["reconciled"] = trio.current_time()
        self.settled_by_close += by_close
        self.settled.append(Traced(op, marks))
        self._unpublished[op] = marks

    def published(self, op: Op) -> None:
        """The settle and every answer of it are handed to the bus."""
        marks = self._unpublished.pop(op, None)
        if marks is not None:
            marks["published"] = trio.current_time()
