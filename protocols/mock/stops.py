"""The scripts for the stop levels (DESIGN.md §18): ``/steps`` and ``/stray``.

``/steps N ms [permission]`` (3 steps of 500 ms unless told): N shell-like tool calls in
sequence, titled ``step I of N: sleep S``, each running ``ms``, a text chunk after each,
and between one step's end and the next one's start a short "think" (``THINK_S``, a
model's round trip), so a client that cancels the moment a step completes stops the
turn before the next step starts.  A cancel during a step ends the turn ``cancelled`` at
once and the running step is not reported again: an ACP client marks it cancelled
itself, and Codex leaves an interrupted command without an ``item/completed`` (its turn
ends ``interrupted``).  With ``permission`` the agent asks for the second step while the
first one still runs (half-way through it, as an agent running tools in parallel asks for
the next), so the request arrives while a client waits for the running step to finish;
the second step starts once both the first has ended and the answer has come.  An
answer that stops the turn (ACP ``cancelled``, Codex ``cancel``) ends it ``cancelled``
after the first step; any other answer is said and the steps go on.

``/stray``: a ``sleep 600`` left running in the agent's own process group (not a session
or group of its own), reported as a completed tool call ``stray: sleep 600``; the turn
says ``stray pid <pid>`` and ends ``end_turn``.  The agent never waits for it: it dies
with the group when the agent is swept.  In the sandbox's pid namespace the pid said is
the namespace's (the host's ``/proc/<pid>/status`` ``NSpid`` line ends with it).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from .base import Turn, Wait
from .scripts import Steps

__all__ = ["STRAY_COMMAND", "THINK_S", "steps", "steps_args", "stray"]

#: ``/steps``: the pause between one step's end and the next one's start.
THINK_S = 0.1
DEFAULT_STEPS = 3
DEFAULT_STEP_MS = 500
#: A bound on N, so a typo cannot queue a day of steps.
MAX_STEPS = 100
STRAY_COMMAND: Sequence[str] = ("sleep", "600")


def steps_args(text: str) -> tuple[int, int, bool]:
    """N, ms and whether to ask permission, from ``/steps N ms [permission]``; a word
    that is not a positive number leaves its default."""
    words = text.split()[1:]
    numbers = [int(w) for w in words[:2] if w.isdigit() and int(w) > 0]
    n = min(numbers[0], MAX_STEPS) if numbers else DEFAULT_STEPS
    ms = numbers[1] if len(numbers) > 1 else DEFAULT_STEP_MS
    return n, ms, "permission" in words


def _seconds(ms: int) -> str:
    return f"{ms / 1000:g}"


def steps(turn: Turn, text: str) -> Steps:
    n, ms, ask = steps_args(text)
    wire = turn.wire
    asking = ask and n > 1
    for i in range(1, n + 1):
        if i > 1:
            yield Wait(THINK_S, cancel=True)
            if turn.cancelled:
                yield from _stopped(turn)
                return
        tool_id = f"step{i}_{uuid.uuid4().hex[:8]}"
        title = f"step {i} of {n}: sleep {_seconds(ms)}"
        wire.command_started(turn, tool_id, title)
        if asking and i == 1:
            yield Wait(ms / 2000, cancel=True)
            if not turn.cancelled:
                turn.permission_rpc_id = wire.ask_permission(turn)
                yield Wait(ms / 2000, cancel=True)
        else:
            yield Wait(ms / 1000, cancel=True)
        if turn.cancelled:
            yield from _stopped(turn)
            return
        wire.command_finished(turn, tool_id, title, "completed")
        turn.chunk(f"step {i} of {n} done. ")
        if turn.permission_rpc_id is not None and i == 1:
            yield from _answered(turn)
            stop, said = wire.permission_settled(turn)
            if stop:
                turn.end("cancelled")
                return
            turn.chunk(f"{said}. ")
    turn.end("end_turn")


def _answered(turn: Turn) -> Steps:
    """Until the permission request is answered (Codex: or the turn interrupted, which
    clears it; an ACP client must answer it even then)."""
    codex = turn.wire.cancel_ends_permission
    while not turn.answered and not (codex and turn.cancelled):
        yield Wait(cancel=codex, answer=True)


def _stopped(turn: Turn) -> Steps:
    """A cancel came: settle a request still pending, then end the turn ``cancelled``."""
    if turn.permission_rpc_id is not None and not turn.answered:
        yield from _answered(turn)
        turn.wire.permission_settled(turn)
    turn.end("cancelled")


def stray(turn: Turn, text: str) -> Steps:
    tool_id = f"stray_{uuid.uuid4().hex[:8]}"
    title = "stray: " + " ".join(STRAY_COMMAND)
    turn.wire.command_started(turn, tool_id, title)
    spawn = turn.agent.spawn
    try:
        if spawn is None:
            raise OSError("this agent has no process of its own to leave one in")
        pid = spawn(STRAY_COMMAND)
    except OSError as exc:
        turn.wire.command_finished(turn, tool_id, title, "failed")
        turn.chunk(f"stray: cannot start it: {exc}")
    else:
        turn.wire.command_finished(turn, tool_id, title, "completed")
        turn.chunk(f"stray pid {pid}")
    turn.end("end_turn")
    yield from ()
