"""Phase ``queued``: a message queued behind the running turn does not slow its cancel.

Per dialect, on the dialect's latency session, pairs of samples alternate:

- plain: the usual ``/delay 30000`` turn cancelled after its first chunk;
- queued: the same, but once the first chunk arrived a ``message.add`` with
  ``delivery:"queue"`` puts an entry behind the running turn (DESIGN.md §9) before
  the cancel is sent.

The user cancel parks the queue (``auto_run`` false, as designed): after each
queued sample the entry is removed (``queue.remove``) and the queue resumed
(``queue.set_auto_run`` true); after a plain sample it is resumed too, so that
both kinds start from the same state: an empty queue that runs.

Each kind's server stages (the orchestrator's marks, paired to its samples by
time) are reported too: the queue's own cost would show there, apart from the
machine's (the queued kind's cancel follows its ``message.add`` round trip at
once, and what the agent and the client were doing just before a cancel moves
its e2e by a tenth of a millisecond either way: docs/performance.md, run P).
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any, Final

from .interleave import Sample, interleave
from .measure import log
from .stats import paired

if TYPE_CHECKING:
    from .harness import Bench

__all__ = ["queued"]

QUEUED_CONTENT = "queued behind the cancelled turn"
#: The server's marks of an operation, in order (``/api/v1/debug/cancel-stages``).
MARKS: Final = ("admitted", "adapter_sent", "agent_answered", "reconciled", "published")


def stages_by_kind(ops: list[dict[str, Any]],
                   windows: list[tuple[str, float, float]]) -> dict[str, dict[str, float]]:
    """Median ms of each server stage per kind of sample: an operation belongs
    to the sample whose send and answer (the client's clock) bracket its
    ``received_s`` (the same clock)."""
    per: dict[str, dict[str, list[float]]] = {}
    for op in ops:
        received = op.get("received_s")
        if received is None:
            continue
        kind = next((k for k, sent, answered in windows if sent <= received <= answered), None)
        if kind is None:
            continue
        into = per.setdefault(kind, {})
        marks, last = op["marks_ms"], 0.0
        for mark in MARKS:
            if mark in marks:
                into.setdefault(mark, []).append(marks[mark] - last)
                last = marks[mark]
    return {kind: {mark: round(statistics.median(v), 3) for mark, v in d.items()} | {
        "n": len(d.get("admitted", []))} for kind, d in per.items()}


async def queued(bench: Bench, sessions: dict[str, str]) -> dict[str, Any]:
    main = bench.main
    out: dict[str, Any] = {"samples_per_kind": bench.p.queued_samples, "dialects": {}}
    for agent in bench.mock_agents():
        sid = sessions[agent]
        parked: list[bool] = []
        windows: list[tuple[str, float, float]] = []

        async def resume(sid: str = sid) -> None:
            await main.call("queue.set_auto_run", {"session_id": sid, "auto_run": True})

        def window(kind: str, sid: str = sid,
                   windows: list[tuple[str, float, float]] = windows) -> None:
            sent, answered = bench.e2e_clock[sid][-1]
            windows.append((kind, sent, answered))

        async def plain(sid: str = sid) -> Sample:
            sample = await bench.e2e_sample(main, sid)
            window("plain")
            await resume()
            return sample

        async def with_entry(sid: str = sid, parked: list[bool] = parked) -> Sample:
            entry: dict[str, Any] = {}

            async def enqueue() -> None:
                added = await main.call("message.add", {
                    "session_id": sid, "content": QUEUED_CONTENT, "delivery": "queue"})
                if added.get("delivery") != "queued":
                    raise RuntimeError(f"message.add delivery queue answered {added}")
                entry.update(added["entry"])

            sample = await bench.e2e_sample(main, sid, before_cancel=enqueue)
            window("queued")
            state = await main.call("queue.remove", {"session_id": sid,
                                                     "entry_id": entry["id"]})
            if state.get("entries"):
                raise RuntimeError(f"the queue is not empty after queue.remove: {state}")
            parked.append(state.get("auto_run") is False)
            await resume()
            return sample

        await resume()
        plain_s, queued_s = await interleave(f"queued {agent}", bench.p.queued_samples,
                                             bench.p.warmup, plain, with_entry)
        d = paired([s["response"] for s in plain_s], [s["response"] for s in queued_s],
                   "queued")
        d["pending_true"] = paired([s["pending_true"] for s in plain_s],
                                   [s["pending_true"] for s in queued_s], "queued")
        # Counted over the kept samples only (the warm-up pairs come first).
        d["queue_parked_by_cancel"] = sum(parked[-len(queued_s):])
        d["samples_ms"] = {"plain": [s["response"] for s in plain_s],
                           "queued": [s["response"] for s in queued_s]}
        # (The server keeps its last 256 operations: the last pairs' share.)
        d["server_stages_ms"] = stages_by_kind(await bench.stages(sid), windows)
        out["dialects"][agent] = d
        log(f"queued {agent}: e2e p50 plain {d['plain_ms']['p50']} ms, queued "
            f"{d['queued_ms']['p50']} ms (ratio {d['ratio_p50']}); queue parked by "
            f"{d['queue_parked_by_cancel']}/{len(queued_s)} cancels")
    return out
