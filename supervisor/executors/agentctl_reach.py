"""The agentctl link's reachability (DESIGN.md §20): down, back, and the
cancel it owes its running turn on the way back.

A mixin of ``AgentctlLink`` (supervisor/executors/agentctl_link.py), kept apart
so each module stays small.  While the event stream is down the link is not
``reachable`` (since ``down_since``); when it opens again the cancel the turn
is owed (``PendingTurn.owed``, or a ``Cancel`` frame left unanswered: data on
the turn, supervisor/executors/agentctl_turn.py) is sent before the link is
reachable for anyone else.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from protocols.agentctl_wire import CancelAck
from protocols.prompt_parts import Line
from protocols.transport import AgentClosed, AgentRefused, AgentTimeout

from ..config import Timeouts
from .agentctl_http import first_set
from .agentctl_turn import PendingTurn

__all__ = ["LinkReach"]

log = logging.getLogger(__name__)


class LinkReach:
    """Reachability and the owed cancel (module doc); the link holds the state."""

    url: str
    timeouts: Timeouts
    reachable: bool
    down_since: float | None
    owed_sent_at: float | None
    session_id: str | None
    closed: trio.Event
    _reach: trio.Event
    _turn: PendingTurn | None

    async def request(self, method: str, path: str, body: dict[str, Any] | Line | None, *,
                      timeout_s: float, expect: tuple[int, ...] = (200,),
                      held: bool = False) -> tuple[int, dict[str, Any]]:
        raise NotImplementedError  # AgentctlLink's

    def _went_down(self, reason: str) -> None:
        if not self.reachable:
            return
        log.warning("agentctl %s: link down (%s); re-connecting", self.url, reason)
        self.reachable = False
        self.down_since = trio.current_time()
        self._reach.set()
        self._reach = trio.Event()

    async def _came_back(self) -> None:
        """The stream is open again: the held work first (bounded by its own
        requests), then the link is reachable for everyone else."""
        log.info("agentctl %s: link back after %.1fs", self.url,
                 trio.current_time() - (self.down_since or trio.current_time()))
        try:
            await self._send_owed()
        except (AgentTimeout, AgentRefused, AgentClosed) as exc:
            # (A refusal that closed the link has cancelled this reader too.)
            log.warning("agentctl %s: on the link's return: %s", self.url, exc)
        self.reachable = True
        self.down_since = None
        self._reach.set()
        self._reach = trio.Event()

    def owe(self, turn: PendingTurn) -> None:
        """``turn``'s cancel met the link down: held, and sent first on its return."""
        turn.owed = True
        self.owed_sent_at = None

    async def _send_owed(self) -> None:
        """The link is back: a cancel it owes the running turn goes first,
        before the link is reachable for anything else — one held while it was
        down, or a ``Cancel`` frame not answered before the cut (the cut may
        have swallowed it, or only its answer: sent again either way, agentctl's
        cancel of one turn is idempotent).  A turn that ended meanwhile: its
        end comes with the replayed events, nothing is sent."""
        turn = self._turn
        if turn is None or not turn.cancel_due_on_return:
            return
        held, frame = turn.owed, turn.frame
        _, data = await self.request("POST", "/api/v1/acp/cancel",
                                     {"session_id": self.session_id, "join_s": 0,
                                      "turn_id": turn.id},
                                     timeout_s=self.timeouts.agent_request_s,
                                     expect=(200, 504), held=True)
        turn.owed = False
        if frame.sent:
            # The HTTP answer stands for the frame's (the operation reads it).
            frame.answer(CancelAck(turn_id=turn.id, running=bool(data.get("turn_running")),
                                   error=None if data.get("success") else str(
                                       data.get("error") or "agentctl could not write "
                                                            "the cancel")))
        if held:
            self.owed_sent_at = trio.current_time()
        log.info("agentctl %s: the cancel %s is sent (turn %s)", self.url,
                 "held while the link was down" if held else "the cut left unanswered",
                 turn.id)

    async def until_changed(self) -> None:
        """Return at the next change of ``reachable``, or when the link closes."""
        await first_set(self._reach, self.closed)
