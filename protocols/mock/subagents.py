"""``/subagents N [ms] [hang|hang-all]``: N child sessions that stream for <ms>
(default 20 s) each while the parent streams too (DESIGN.md §13).

Each child is announced on the parent (ACP: ``subagent_update`` with
``capabilities.cancel``; Codex: a child thread, protocols/mock/codex.py), streams its own
chunks on its own session (thread) id, and ends ``idle`` with ``end_turn`` at its time, or
at once with ``cancelled`` when its own cancel (``session/cancel``, ``turn/interrupt``)
comes.  The parent streams until every child has ended, then ends its turn.  A cancel of
the parent ends the parent's turn at once and leaves the children running, as
claude-agent-acp does for a client that can cancel them (0.91+) and as Codex's child
threads go on after their parent's interrupt: the client must cancel each.  Where the client
cannot see children (ACP v1 without ``clientCapabilities.subagents``), the parent
streams alone for <ms>.

``hang``: the parent ignores its own cancel (as ``/hang`` does) and streams on until
<ms> has passed, so the client has to escalate; the children still honour theirs.
``hang-all``: the children ignore their cancels too (an agent deaf to every cancel).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

from .base import Child, Turn, Wait
from .scripts import CHUNK_INTERVAL_S, stream

__all__ = ["DEFAULT_MS", "subagents"]

DEFAULT_MS = 20_000


def _args(text: str) -> tuple[int, int, str]:
    words = text.split()[1:4]
    numbers = [int(w) for w in words[:2] if w.isdigit()]
    n = numbers[0] if numbers else 2
    ms = numbers[1] if len(numbers) > 1 else DEFAULT_MS
    hang = next((w for w in words if w in ("hang", "hang-all")), "")
    return max(1, min(n, 20)), max(ms, 1), hang


def subagents(turn: Turn, text: str) -> Iterator[Wait]:
    n, ms, hang = _args(text)
    parent_hears = not hang
    children_hear = hang != "hang-all"
    agent, wire = turn.agent, turn.wire
    if not wire.subagents:
        yield from stream(turn, ms, honour_cancel=parent_hears)
        return
    children: list[Child] = []
    for i in range(1, n + 1):
        child = Child(id=f"{agent.session_id}.sub{i}.{uuid.uuid4().hex[:6]}",
                      title=f"Subagent {i}", turn=turn)
        agent.children[child.id] = child
        wire.subagent_announced(child)
        children.append(child)
    deadline = turn.now + ms / 1000
    tick = 0
    while True:
        for child in children:
            if child.done:
                continue
            stopped = child.cancelled and children_hear
            if stopped or turn.now >= deadline:
                child.done = True
                wire.subagent_state(child, "idle", "cancelled" if stopped else "end_turn")
                agent.children.pop(child.id, None)
            else:
                if tick == 0:  # a tool first, so the child's trace has one to name
                    wire.subagent_tool(child, f"cat notes-{child.title[-1]}.txt")
                wire.subagent_chunk(child, f"{child.title} chunk{tick} ")
        parent_open = agent.turn is turn
        if parent_open:
            if turn.cancelled and parent_hears:
                turn.end("cancelled")
                parent_open = False
            elif all(c.done for c in children) and (not turn.cancelled
                                                    or turn.now >= deadline):
                turn.chunk("subagents done")
                turn.end("end_turn")
                return
            else:
                turn.chunk(f"parent chunk{tick} ")
        if not parent_open and all(c.done for c in children):
            return
        tick += 1
        # After the parent's end its cancel flag stays set: only a child's
        # cancel (which steps the script itself) or the timer wakes it then.
        yield Wait(min(CHUNK_INTERVAL_S, max(deadline - turn.now, 0.0)),
                   cancel=parent_open and parent_hears)
