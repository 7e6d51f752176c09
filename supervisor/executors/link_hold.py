"""A remote agent's link that can be down for a while and come back (DESIGN.md §20).

An agentctl reached over a network (at a configured URL) may stop answering
without being gone: a cable, a VPN, a proxy.  Its link then re-connects on its
own (``AgentctlLink(reconnect=True)``) and the turn it runs stays open.  What
the session layer needs of such a link is this small face: whether it answers
now, a wait until it does, when a cancel held while it was down went out, and
the turns its host cancelled by itself meanwhile (``OfflineStops``).
``LinkDown`` is what a request to it raises meanwhile (an ``AgentTimeout``, so
a caller that knows nothing of link loss treats it as a slow agent).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

import trio

from protocols.transport import AgentTimeout

__all__ = ["LinkDown", "LinkHold", "OfflineStops"]

#: How long the link's reader waits for the session to take an offline stop.
#: Taking it is one synchronous step; the bound is for a session that stops
#: watching meanwhile, so the event stream is never held up for longer.
HAND_S = 10.0


class OfflineStops:
    """The turns an agent's host cancelled by itself, no backend connected for
    ``offline_cancel_s`` (DESIGN.md §20), handed from the link's reader to the
    session watching the link, one at a time.

    A value the link holds from its construction, not a callback set on it:
    the reader ``hand``s a turn's id and waits until the watcher has taken it,
    so the session records the offline stop before the turn's end (replayed
    right after it on the stream) is read.  With nobody watching (the session
    not up yet) the stop is not kept: the turn's end still says it ended."""

    def __init__(self) -> None:
        # (No buffer: a send succeeds only into a watcher waiting in ``next``.)
        self._send, self._receive = trio.open_memory_channel[tuple[str, trio.Event]](0)

    async def hand(self, turn_id: str) -> bool:
        """Give ``turn_id`` to the watcher; whether one took it (within ``HAND_S``)."""
        taken = trio.Event()
        try:
            self._send.send_nowait((turn_id, taken))
        except trio.WouldBlock:
            await trio.lowlevel.checkpoint()
            return False
        with trio.move_on_after(HAND_S):
            await taken.wait()
        return taken.is_set()

    @asynccontextmanager
    async def next(self) -> AsyncIterator[str]:
        """The next turn handed; its ``hand`` returns when this block is left."""
        turn_id, taken = await self._receive.receive()
        try:
            yield turn_id
        finally:
            taken.set()


class LinkHold(Protocol):
    @property
    def reachable(self) -> bool:
        """Whether the agent's host answers now (its event stream is open)."""
        ...

    @property
    def down_since(self) -> float | None:
        """``trio.current_time()`` when it stopped answering (None: it answers)."""
        ...

    @property
    def owed_sent_at(self) -> float | None:
        """When the cancel held while the link was down was sent, first thing
        on its return (None: none was held, or it is still owed)."""
        ...

    #: Set once the link is closed for good (it does not come back).
    closed: trio.Event
    #: The turns the agent's host cancelled by itself (``OfflineStops``).
    offline: OfflineStops

    async def until_changed(self) -> None:
        """Return at the next change of ``reachable`` (or when the link closes)."""
        ...


class LinkDown(AgentTimeout):
    """The agent's host does not answer now; its link keeps trying.  A cancel
    that met it is held and sent first when the link returns (``hold``)."""

    def __init__(self, message: str, hold: LinkHold) -> None:
        super().__init__(message)
        self.hold = hold
