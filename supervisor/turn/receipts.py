"""A stop's receipt (DESIGN.md §18): what the stop did and what still runs.

Built in two steps.  At the turn's close, in the close's own step, from what
memory holds (``receipt_of``): who stopped it and how, the latency from
acceptance to the agent's confirmation, the turn's tool calls finished and
cut, its subagents stopped and still running, the queue entries the close
parked.  That goes out at once in the cancel's answer, with nothing on the
answer's path waiting for a scan or a disk.  Then, in this module's own
nursery (``Receipts.follow_up``), what takes time: the processes still alive
in the agent's process group once the stopped tools had a moment to exit,
and the files the turn changed (its checkpoint after the close); the whole
receipt is then stored with the turn and in its status message, whose update
every page sees.  A crash between the two loses the second step only.

What is a stray: a process of the agent's group that is not the agent's own.
An agent may run long-lived helpers in its group for its whole life (Claude's
engine under claude-agent-acp, Codex under codex-acp, MCP servers): those are
in the group when the agent is ready, before any turn could leave anything,
and after a restore, before its first prompt.  ``own`` keeps that baseline per
running agent; a stray is any other live member, and ``kill_strays`` ends only
those (each named by pid and start time, so a reused pid is never hit).  A
helper an agent starts lazily during a turn is reported as a stray: the
receipt names its command, and nothing is ended unless the person asks.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

import trio

from protocols.adapters import AgentClosed, AgentTimeout
from protocols.process_group import Stray, StraysEnded

from ..errors import SupervisorError
from ..models import Message
from ..storage.db import StoreError
from ..storage.store import Store
from ..subagents import Subagents
from ..workspace.turn_checkpoints import TurnCheckpoints
from .cancel_op import CancelOperation
from .execution_state import Execution, TurnHandle
from .turn_outcome import wire_outcome

__all__ = ["STRAYS_AFTER_S", "Receipts", "receipt_of"]

log = logging.getLogger(__name__)

#: How long the stopped tools' processes get to exit before the agent's
#: process group is read (a shell cut by the cancel exits in milliseconds).
STRAYS_AFTER_S: Final = 0.3
#: Bound on the second step (the checkpoint waits for its own bounds first).
FOLLOW_UP_S: Final = 30.0
#: Subagent states after which a child runs no more.
_CHILD_ENDED: Final = frozenset({"completed", "cancelled", "failed"})


def wall_clock(at: float) -> str:
    """A ``trio.current_time()`` instant as ISO 8601 UTC."""
    wall = time.time() - (trio.current_time() - at)
    return datetime.fromtimestamp(wall, UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def receipt_of(op: CancelOperation, turn: TurnHandle | None, *, queue_parked: int,
               children: list[dict[str, Any]], agent_version: str | None) -> dict[str, Any]:
    """The first step's receipt of a settled stop (``turn``: the turn it
    stopped, None when no agent ran it: a reconciled record)."""
    # (The result's fields read directly: this runs on the answer's path.)
    result = op.result
    acted_on = None if result is None else result.turn_id
    outcome = None if result is None or op.error is not None else result.outcome
    answered = None if result is None else result.answered_at
    finished: list[str] = []
    cancelled: list[str] = []
    stopped: set[str] = set()
    # DESIGN.md §20: when a cancel held on a link that was down went out (read
    # inline: this runs on the answer's path).
    held_sent: float | None = None
    if turn is not None:
        held_sent = turn.held_sent_at or (
            None if turn.link_hold is None else turn.link_hold.owed_sent_at)
        if held_sent is not None and held_sent < op.received:
            held_sent = None  # an earlier outage's, not this stop's
        turn.tools.cut()  # what still ran when the turn ended was cut with it
        finished, cancelled = list(turn.tools.finished), list(turn.tools.cancelled)
        stopped = set(turn.subagents_stopped)
    stopped |= {str(c["id"]) for c in children if c.get("state") == "cancelled"
                and c.get("turn_id") == acted_on}
    # A child still winding down from the stop is stopped, not running.
    running = [str(c["id"]) for c in children
               if c.get("state") not in _CHILD_ENDED and str(c["id"]) not in stopped]
    return {
        "turn_id": acted_on or op.turn_id or "",
        "outcome": wire_outcome(outcome, acted_on, op.turn_id),
        "by": op.by, "when": op.when.value,
        "accepted_at": wall_clock(op.received),
        "confirmed_ms": None if answered is None else round((answered - op.received) * 1000, 1),
        "tool_calls": {"finished": finished, "cancelled": cancelled},
        "subagents": {"stopped": sorted(stopped), "running": running},
        "queue_parked": queue_parked,
        "files_changed": None, "revertible": False, "strays": None,
        "agent_version": agent_version,
        "resent": 0 if turn is None else turn.cancel_resends,
        # DESIGN.md §20: from acceptance to the held cancel's send on the link's return.
        "link_down_ms": None if held_sent is None else round((held_sent - op.received) * 1000,
                                                             1),
        # The second step (strays, files) is still to come.
        "complete": False,
    }


class Receipts:
    """The receipts' second step, each in this nursery, and the latest
    receipt of each session (``session.kill_strays`` updates it)."""

    def __init__(self, store: Store, subagents: Subagents,
                 checkpoints: TurnCheckpoints | None) -> None:
        self.store = store
        self.subagents = subagents
        self.checkpoints = checkpoints
        #: session id → (its latest receipt, the status message it is shown in).
        self.latest: dict[str, tuple[dict[str, Any], Message | None]] = {}
        #: Each running agent's own processes, (pid, start time): module doc.
        self.own: weakref.WeakKeyDictionary[Execution, set[tuple[int, int]]] = (
            weakref.WeakKeyDictionary())
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def settling(self, op: CancelOperation, turn: TurnHandle | None, ex: Execution | None,
                 status: Message | None = None, queue_parked: int = 0) -> None:
        """``op`` stops ``turn`` (None: no agent ran it) and settles next: its
        receipt's first step on it (its answer carries it), the second started
        here (``status``: the close's status message, updated with it)."""
        if op.receipt is not None or op.error is not None or not (
                turn or (op.result is not None and op.result.turn_id)):
            return
        op.receipt = receipt_of(op, turn, queue_parked=queue_parked,
                                children=self.subagents.dtos(op.session_id),
                                agent_version=None if ex is None
                                else ex.agent.adapter.agent_version)
        self.latest[op.session_id] = (op.receipt, status)
        if self._nursery is None:
            return
        try:
            self._nursery.start_soon(self._complete, op.session_id, op.receipt, status, ex)
        except RuntimeError:  # (shutting down: the first step, in the answer, is all there is)
            log.info("session %s: shutting down, the receipt is not completed", op.session_id)

    async def _complete(self, session_id: str, receipt: dict[str, Any],
                        status: Message | None, ex: Execution | None) -> None:
        turn_id = receipt["turn_id"]
        try:
            with trio.move_on_after(FOLLOW_UP_S):
                # First of all a pause: nothing here competes with the answer's
                # way out, and the stopped tools' processes get time to exit.
                await trio.sleep(STRAYS_AFTER_S)
                if self.checkpoints is not None and turn_id:
                    receipt |= await self._files(session_id, turn_id)
                control = None if ex is None else ex.agent.strays
                if control is not None and ex is not None and not ex.stopped.is_set():
                    receipt["strays"] = [s.wire() for s in await self.strays(ex)]
                elif ex is not None and ex.stopped.is_set():
                    receipt["strays"] = []  # its whole group was ended with it
            receipt["complete"] = True
            if turn_id:
                await self.store.set_receipt(turn_id, receipt, status)
        except (StoreError, SupervisorError, OSError, AgentClosed, AgentTimeout) as exc:
            log.warning("session %s: the receipt of turn %s is incomplete: %s", session_id,
                        turn_id, exc)
        except Exception:
            log.exception("session %s: the receipt of turn %s failed", session_id, turn_id)

    async def _files(self, session_id: str, turn_id: str) -> dict[str, Any]:
        assert self.checkpoints is not None
        try:
            diff = await self.checkpoints.turn_diff(session_id, turn_id)
        except SupervisorError:
            return {"files_changed": None, "revertible": False}
        files = diff["files"]
        return {"files_changed": len(files), "revertible": bool(files)}

    async def baseline(self, ex: Execution) -> None:
        """The agent's own processes, as its group holds them now (it is ready,
        or has just restored its conversation; no turn has run since)."""
        control = ex.agent.strays
        if control is None:
            return
        try:
            found = await control.scan()
        except (OSError, AgentClosed, AgentTimeout) as exc:
            log.warning("session %s: its agent's processes could not be read (%s): a "
                        "receipt may name its helpers as strays", ex.session_id, exc)
            return
        self.own.setdefault(ex, set()).update((s.pid, s.start) for s in found)

    async def strays(self, ex: Execution) -> list[Stray]:
        """What the agent's group holds beyond the agent's own."""
        assert ex.agent.strays is not None
        own = self.own.get(ex, set())
        return [s for s in await ex.agent.strays.scan() if (s.pid, s.start) not in own]

    async def end_strays(self, ex: Execution, only: Sequence[Stray]) -> StraysEnded:
        """End ``only`` these (never the agent's own); what is left, its own left out."""
        assert ex.agent.strays is not None
        own = self.own.get(ex, set())
        ended = await ex.agent.strays.end(
            [s for s in only if (s.pid, s.start) not in own])
        return StraysEnded(ended.killed, tuple(s for s in ended.remaining
                                               if (s.pid, s.start) not in own))

    async def strays_ended(self, session_id: str, remaining: list[dict[str, Any]]) -> None:
        """``session.kill_strays`` ended some: the latest receipt says what is
        left, stored and shown."""
        kept = self.latest.get(session_id)
        if kept is None:
            return
        receipt, status = kept
        receipt["strays"] = remaining
        if receipt["turn_id"]:
            await self.store.set_receipt(receipt["turn_id"], receipt, status)
