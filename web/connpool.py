"""Which unauthenticated connections the listener keeps (issue 40, item 7).

Another local program shares the person's address (127.0.0.1), so a cap per
address that refuses new connections hands that program the control plane:
holding 64 connections was enough to get every request of the person's page
a 503.  Here the bound is on *unauthenticated* connections only, and a new
connection is never refused for it: room is made.

- A connection counts from its accept until its request carries the right
  token (``authenticate``: then it leaves the pool for good; nobody without
  the token can make such a connection) or it is closed.
- At most ``per_peer`` connections of one address, ``total`` in all.  A new
  connection over a bound closes another one of its address (then of all):
  the one **idle the longest**, that is the one on which a byte last moved,
  either way, the longest ago.  Whatever it was doing: no head yet, half a
  head, kept alive between requests, lingering after its close, or an answer
  its client does not read (a write that cannot finish moves no byte).  The
  person's connections move bytes when the person uses them; a flood's
  connections that do not are the first to go, and a flood that keeps all of
  its connections moving pays with work, bounded by the server's, not with
  the person's slots.  A new connection is the most recently active one, so
  a flood over the bound displaces its own connections first.

Nothing here does I/O: closing calls the connection's ``evict`` (the listener
closes its socket); the clock is passed in (for the log's pace only).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["ConnPool", "Held"]

log = logging.getLogger(__name__)

#: At most one warning about closed connections this often.
WARN_EVERY_S: Final = 60.0


@dataclass(eq=False)
class Held:
    """One connection in the pool."""

    peer: str
    #: Closes the connection (called at most once, by the pool).
    evict: Callable[[], None]
    authenticated: bool = False
    evicted: bool = False


class ConnPool:
    def __init__(self, *, per_peer: int, total: int) -> None:
        self.per_peer = per_peer
        self.total = total
        # Least recently active first.
        self._all: OrderedDict[Held, None] = OrderedDict()
        self._peers: dict[str, OrderedDict[Held, None]] = {}
        self._warned_at = -WARN_EVERY_S
        self._unwarned = 0

    def open(self, peer: str, evict: Callable[[], None], now: float) -> Held:
        """A new connection, counted; others are closed to make room for it."""
        held = Held(peer, evict)
        self._all[held] = None
        self._peers.setdefault(peer, OrderedDict())[held] = None
        for group, bound in ((self._peers[peer], self.per_peer), (self._all, self.total)):
            while len(group) > max(bound, 1):
                # The first is the least recently active; never the new one.
                self._evict(next(c for c in group if c is not held), now)
        return held

    def touch(self, held: Held) -> None:
        """Bytes moved on ``held``: it is the most recently active."""
        if held in self._all:
            self._all.move_to_end(held)
            self._peers[held.peer].move_to_end(held)

    def authenticate(self, held: Held) -> None:
        """``held`` carried the token: out of the pool, never evicted."""
        held.authenticated = True
        self._forget(held)

    def close(self, held: Held) -> None:
        self._forget(held)

    def count(self, peer: str | None = None) -> int:
        """Unauthenticated connections counted (of ``peer``, or all)."""
        return len(self._all if peer is None else self._peers.get(peer, ()))

    def _forget(self, held: Held) -> None:
        if held in self._all:
            del self._all[held]
            group = self._peers[held.peer]
            del group[held]
            if not group:
                del self._peers[held.peer]

    def _evict(self, victim: Held, now: float) -> None:
        self._unwarned += 1
        if now - self._warned_at >= WARN_EVERY_S:  # a flood is one line a minute, not one a close
            log.warning("closed %d idle unauthenticated connection(s) to make room, the last "
                        "from %s (the bound: %d per address, %d in all)", self._unwarned,
                        victim.peer, self.per_peer, self.total)
            self._warned_at, self._unwarned = now, 0
        self._forget(victim)
        victim.evicted = True
        victim.evict()
