"""A remote agent's link that can be down for a while and come back (DESIGN.md §20).

An agentctl reached over a network (at a configured URL) may stop answering
without being gone: a cable, a VPN, a proxy.  Its link then re-connects on its
own (``AgentctlLink(reconnect=True)``) and the turn it runs stays open.  What
the session layer needs of such a link is this small face: whether it answers
now, a wait until it does, and when a cancel held while it was down went out.
``LinkDown`` is what a request to it raises meanwhile (an ``AgentTimeout``, so
a caller that knows nothing of link loss treats it as a slow agent).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import trio

from protocols.transport import AgentTimeout

__all__ = ["LinkDown", "LinkHold"]


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
    #: Told of a turn the agent's host cancelled by itself, no backend
    #: connected for ``offline_cancel_s`` (its id), before the turn's end.
    on_offline: Callable[[str], None] | None

    async def until_changed(self) -> None:
        """Return at the next change of ``reachable`` (or when the link closes)."""
        ...


class LinkDown(AgentTimeout):
    """The agent's host does not answer now; its link keeps trying.  A cancel
    that met it is held and sent first when the link returns (``hold``)."""

    def __init__(self, message: str, hold: LinkHold) -> None:
        super().__init__(message)
        self.hold = hold
