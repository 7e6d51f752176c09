"""The queue's gate: what the turn and cancel paths tell the queue, synchronously.

A user cancel must stop anything queued from starting in the very step it is
admitted; a turn's close must say in its own transaction whether the queue
parks; a normal end must run the queue's head.  Those paths sit below the
queue (``supervisor.session.queue`` starts turns through the lifecycle), so they do
not call it: they change this gate's state, and the queue's own task
(``TurnQueue.run``) takes the work the gate asks for (``requests``) and runs
it in the queue's nursery.  Nothing here awaits.
"""

from __future__ import annotations

from typing import Literal

import trio

from ..models import StopReason
from .turn_outcome import StopRequest

__all__ = ["QueueGate", "Request"]

#: What the queue is asked to do for a session: run its head if it may, or
#: write the park a user cancel left to write.
Request = Literal["kick", "park"]


class QueueGate:
    def __init__(self) -> None:
        #: Per session, the number of user cancels seen (bumped at admission):
        #: a start on its way checks it as it claims the turn.
        self._epoch: dict[str, int] = {}
        #: Sessions whose user cancel's park is not written yet (nothing starts).
        self.parking: set[str] = set()
        #: Sessions whose user cancel's own close parked the queue (no write left).
        self._parked_by_close: set[str] = set()
        #: Work for the queue's task, one entry per session and kind (bounded
        #: by the number of sessions), in the order asked.
        self._asked: dict[tuple[str, Request], None] = {}
        self._wake = trio.Event()

    def epoch(self, session_id: str) -> int:
        return self._epoch.get(session_id, 0)

    def user_cancelled(self, session_id: str) -> None:
        """At a user cancel's admission (or join), before any await: no start
        already on its way may claim a turn now, and the queue parks.  The park
        is written by the cancelled turn's close (``turn_outcome.parks``), in the same
        transaction; a cancel that closed no turn parks when it settles."""
        self._epoch[session_id] = self.epoch(session_id) + 1
        self.parking.add(session_id)

    def cancel_settled(self, session_id: str) -> None:
        """The session's cancel operation settled (it answers right after)."""
        if session_id not in self.parking:
            return  # not a user cancel (a send now's), or already written
        if session_id in self._parked_by_close:
            self.parked(session_id)
            return
        self._ask(session_id, "park")

    def parked(self, session_id: str) -> None:
        """The user cancel's park is written."""
        self.parking.discard(session_id)
        # (A retried close of the cancelled turn may have parked it meanwhile.)
        self._parked_by_close.discard(session_id)

    def turn_closed(self, session_id: str, parked: bool, request: StopRequest | None,
                    stop_reason: StopReason) -> None:
        """A turn of the session closed (``parked``: its close parked the queue,
        ``turn_outcome.parks``; ``stop_reason`` as recorded)."""
        if parked:
            if request is StopRequest.USER and session_id in self.parking:
                self._parked_by_close.add(session_id)  # the cancel has nothing left to write
            return
        if request is StopRequest.INTERRUPT and stop_reason == "cancelled":
            return  # the send now starts its own entry
        self._ask(session_id, "kick")

    def takeover_settled(self, session_id: str) -> None:
        """A turn taken over after a restart is settled.  Until then the session
        counts as busy, so a kick meanwhile (the adopted turn's close, replayed,
        or a message queued behind it) started nothing: the head runs now if it
        may (the queue checks busy and park as ever)."""
        self._ask(session_id, "kick")

    def _ask(self, session_id: str, what: Request) -> None:
        self._asked[(session_id, what)] = None
        self._wake.set()

    async def requests(self) -> list[tuple[str, Request]]:
        """The work asked for since the last call (waits until there is some)."""
        await self._wake.wait()
        asked, self._asked = list(self._asked), {}
        self._wake = trio.Event()
        return asked
