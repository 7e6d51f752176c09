"""Group commit of turn closes that become ready together.

A burst of cancels (a hundred sessions stopped at once) ends a hundred turns
within a few milliseconds, and each close was a transaction of its own: under
that load a COMMIT costs ~130 µs, on the one thread that also reads every
agent's answer and writes every client's frames.  Closes that are ready in the
same scheduler round now share one transaction.

Grouping costs the first close a scheduler round (it waits for the others of
its round to join), so it happens only in a burst: when another close ran
within ``WINDOW_S``.  A lone cancel's close (the one a person waits on) is
written at once, as before.  (Trio's statistics cannot say whether other
closes are coming: the tasks of the round under way are not counted as
runnable.)

Each close keeps its own outcome (``Db.close_turns``), and each caller
publishes its own notifications after the commit: a follower when it wakes, one
round after the leader.  A follower waits for the leader shielded (its close
may be committed by then, and its notifications must follow), bounded by the
store's own wait for the database, or sooner by the bound of a shield around
it (``shielded_for``: the caller's own deadline still bites).

Kept because its A/B paid beyond the noise (docs/performance.md, change 25):
bursts of 100, fifteen each, median 98.8 → 91.2 ms, Mann-Whitney U 163 of 225
(one-sided permutation p ≈ 0.05 on the medians), the slowest 166 → 104 ms;
and the burst target (≤ 100 ms) was met by 5.5 ms, less than that gain.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Final

import trio

from protocols.scopes import shielded_for

from .db import ClosedRow, StoreUnavailable, TurnClose

__all__ = ["CloseGroup"]

#: A close this soon after another one is in a burst.
WINDOW_S: Final = 0.002

#: Runs closes in one transaction (the store's, on its connection).
RunCloses = Callable[[Sequence[TurnClose]], Awaitable[list[ClosedRow]]]


class _Follower:
    __slots__ = ("close", "done", "error", "row")

    def __init__(self, close: TurnClose) -> None:
        self.close = close
        self.done = trio.Event()
        self.row: ClosedRow | None = None
        #: The group's failure: StoreUnavailable is the follower's too; None
        #: with no row: the group did not run, the follower closes alone.
        self.error: StoreUnavailable | None = None


class CloseGroup:
    def __init__(self, run: RunCloses, *, wait_s: float) -> None:
        self._run = run
        #: How long a follower waits for its leader (the leader's own wait for
        #: the database, and then some).
        self._follow_s = wait_s + 5.0
        self._gathering: list[_Follower] | None = None
        self._last_close = -float("inf")

    async def close(self, close: TurnClose) -> ClosedRow:
        if self._gathering is not None:
            return await self._follow(close, self._gathering)
        if trio.current_time() - self._last_close < WINDOW_S:
            return await self._lead(close)
        return await self._alone(close)

    async def _alone(self, close: TurnClose) -> ClosedRow:
        try:
            return (await self._run([close]))[0]
        finally:
            self._last_close = trio.current_time()

    async def _lead(self, close: TurnClose) -> ClosedRow:
        followers: list[_Follower] = []
        self._gathering = followers
        try:
            # One round: the closes of the tasks runnable now join.
            await trio.lowlevel.cancel_shielded_checkpoint()
        finally:
            self._gathering = None
        if not followers:
            return await self._alone(close)
        try:
            rows = await self._run([close, *(f.close for f in followers)])
        except StoreUnavailable as exc:
            for f in followers:
                f.error = StoreUnavailable(str(exc))
            raise
        else:
            for f, row in zip(followers, rows[1:], strict=True):
                f.row = row
            return rows[0]
        finally:
            self._last_close = trio.current_time()
            for f in followers:
                f.done.set()  # (neither a row nor an error: it closes alone)

    async def _follow(self, close: TurnClose, followers: list[_Follower]) -> ClosedRow:
        me = _Follower(close)
        followers.append(me)
        with shielded_for(self._follow_s):
            await me.done.wait()
        if me.row is not None:
            return me.row
        if me.error is not None:
            raise me.error
        if not me.done.is_set():
            raise StoreUnavailable("a grouped close did not finish in time")
        return await self._alone(close)
