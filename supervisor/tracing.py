"""The cancel path's tracing hook: diagnostics for the benchmarks, the debug
endpoint and the tests, off in the product unless ``[server] trace_cancels``.

When it is off nothing on the cancel path records anything (no call, no
counter): the parts that would tell it hold ``None``.  When it is on it
keeps, per operation, the stage marks (``trio.current_time()``): received,
admitted, adapter_sent, agent_answered, reconciled, published; the last
settled operations (bounded); and how many operations began, and how many
their turn's close settled (no task woken to settle them).
"""

from __future__ import annotations

import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from .cancel_op import CancelOperation

__all__ = ["CancelTrace", "Traced"]


@dataclass(eq=False)
class Traced:
    """One settled operation and its stage marks."""

    op: CancelOperation
    marks: dict[str, float] = field(default_factory=dict)


class CancelTrace:
    def __init__(self, keep: int = 256) -> None:
        self.started = 0
        self.settled_by_close = 0
        self.settled: deque[Traced] = deque(maxlen=keep)
        self._marks: weakref.WeakKeyDictionary[CancelOperation, dict[str, float]] = (
            weakref.WeakKeyDictionary())

    def begun(self, op: CancelOperation, received: float) -> None:
        self.started += 1
        self._marks[op] = {"received": received, "admitted": trio.current_time()}

    def ended(self, op: CancelOperation, *, by_close: bool) -> None:
        """The operation settled (``by_close``: in its turn's close)."""
        marks = self._marks.pop(op, {})
        result = op.result
        if result is not None and result.sent_at is not None:
            marks["adapter_sent"] = result.sent_at
        if result is not None and result.answered_at is not None:
            marks["agent_answered"] = result.answered_at
        now = trio.current_time()
        marks["reconciled"] = marks["published"] = now
        self.settled_by_close += by_close
        self.settled.append(Traced(op, marks))
