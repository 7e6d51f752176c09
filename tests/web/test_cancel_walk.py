"""The cancel's fast path does not grow: its cross-module calls, measured with
``sys.setprofile`` (tests/support/walk.py says what is counted and how), stay
at or under today's figures, in both dialects of the mock agent.

Run with ``-s`` to see the walk (every distinct call with its count); a failure
shows it too.  ``python -m bench.cancel_walk`` prints the same walk for the docs
(docs/architecture.md, "The cancel path, down and back").
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.support.walk import DIALECTS, measure

# Ceilings: today's measured figures (b, per dialect), so that the test fails
# if the path grows.  Issue 45 lowers them as its refactor lands; its targets:
# at most 60 calls, no back-edge, one publication per turn close.  When a
# change lowers a figure, lower its ceiling here with it.  Issue 42 raised them
# by five: the stop receipt is in the cancel's answer (DESIGN.md §18), built in
# the close's step (the receipt's builder, the turn's tool calls, its children,
# the wire outcome), and the pump tells the turn's tool calls of each tool event.
# Issue 43 added one: the session's DTO (built once per close) carries what its
# agent offers (options, commands, usage: one call into supervisor/agent_offers.py).
#: Cross-module calls from the cancel's frame to its answer's write.
CALLS = {"acp": 126, "codex": 131}
#: Calls up the imports or the layers (a callback, a closure or an interface
#: called from below).
BACK_EDGES = {"acp": 0, "codex": 0}
#: Calls into ``supervisor/bus.py``'s ``publish*`` on the way back (one close):
#: the close's one publication (its notifications, pending=false and the
#: answer), and the update of the cancelled tool call that the agent sends
#: just before its answer, published when it is recorded.
PUBLISHES_PER_CLOSE = {"acp": 2, "codex": 2}
#: Hops to a worker thread on the path: none, and none may come, since the
#: profiler sees the Trio thread only (the walk would lose the thread's calls).
THREAD_HOPS = 0


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
async def test_the_cancel_fast_path_makes_no_more_calls_than_measured(
        dialect: str, tmp_path: Path) -> None:
    with trio.fail_after(60):
        (walk,) = await measure(tmp_path / "data", dialect)
    report = walk.report()
    print(report)
    assert walk.stopped_at_write, f"the answer's write was not seen\n{report}"
    figures = walk.figures()
    # The window holds the whole path: the cancel's way down (the gateway, the
    # admission, the write to the agent) and back (the agent's answer, the
    # close, its publication, the answer).
    assert figures["calls_down"] > 0 and figures["calls_back"] > 0, report
    assert any(e.callee.startswith("protocols/") for e, back in walk.path() if not back), \
        f"the protocol cancel is not on the way down\n{report}"
    assert figures["publishes_per_close"] >= 1, \
        f"no call into supervisor/bus.py's publish* on the way back: renamed?\n{report}"
    assert figures["thread_hops"] <= THREAD_HOPS, report
    assert figures["calls"] <= CALLS[dialect], report
    assert figures["back_edges"] <= BACK_EDGES[dialect], report
    assert figures["publishes_per_close"] <= PUBLISHES_PER_CLOSE[dialect], report
