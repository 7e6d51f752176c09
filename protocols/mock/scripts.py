"""The mock agent's behaviours, one script per prompt command (the table in
protocols/mock_agent.py), the same in every dialect: what differs by protocol is
the ``Wire`` the turn writes through.

Each script is a generator over its ``Turn``: it yields a ``Wait`` where the agent
would wait, and reads ``turn.cancelled`` / ``turn.answer`` when it is resumed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

from .. import mock_edits
from .base import Err, Exit, Turn, Wait

__all__ = ["CHUNK_INTERVAL_S", "echo", "number", "stream"]

CHUNK_INTERVAL_S = 0.1
#: ``/withdraw``: how long the request stands before the agent takes it back,
#: and how long it then waits for the client's answer to the withdrawal.
WITHDRAW_AFTER_S = 0.3
WITHDRAW_ANSWER_S = 10.0

Steps = Iterator[Wait]


def number(text: str, default: int) -> int:
    """The prompt's first argument as a number (``/delay 5000``), else ``default``."""
    words = text.split()
    try:
        given = int(words[1]) if len(words) > 1 else 0
    except ValueError:
        given = 0
    return given or default


def echo(turn: Turn, text: str) -> Steps:
    words = text.split(" ") or [""]
    for i, word in enumerate(words):
        turn.chunk(word + (" " if i < len(words) - 1 else ""))
    turn.end("end_turn")
    yield from ()


def stream(turn: Turn, ms: int, *, honour_cancel: bool) -> Steps:
    """A chunk every 100 ms for ``ms`` (steered input streamed as it comes)."""
    deadline = turn.now + ms / 1000
    n = 0
    while True:
        if honour_cancel and turn.cancelled:
            turn.end("cancelled")
            return
        steers = turn.take_steers()
        for steer in steers:
            turn.chunk(f"steered: {steer}")
        if not steers:
            turn.chunk(f"chunk{n} ")
        n += 1
        left = deadline - turn.now
        if left <= 0:
            break
        yield Wait(min(CHUNK_INTERVAL_S, left), cancel=honour_cancel)
    for steer in turn.take_steers(last=True):
        turn.chunk(f"steered: {steer}")
    turn.end("cancelled" if turn.cancelled else "end_turn")


def delay(turn: Turn, text: str) -> Steps:
    return stream(turn, number(text, 1000), honour_cancel=True)


def slow(turn: Turn, text: str) -> Steps:
    return stream(turn, number(text, 1000), honour_cancel=False)


def hang(turn: Turn, text: str) -> Steps:
    yield from ()


def pause(turn: Turn, text: str) -> Steps:
    """Silent for <ms>, then one chunk and the end: a stall that resolves."""
    yield Wait(number(text, 1000) / 1000)
    turn.chunk("back again")
    turn.end("end_turn")


def tool(turn: Turn, text: str) -> Steps:
    ms = number(text, 500)
    tool_id = f"tool_{uuid.uuid4().hex[:8]}"
    turn.wire.tool_started(turn, tool_id, ms)
    yield Wait(ms / 1000, cancel=True)
    if turn.cancelled:
        turn.end("cancelled")
        return
    turn.wire.tool_finished(turn, tool_id, ms)
    turn.chunk("tool finished")
    turn.end("end_turn")


def permission(turn: Turn, text: str) -> Steps:
    turn.permission_rpc_id = turn.wire.ask_permission(turn)
    yield from settle_permission(turn)


def settle_permission(turn: Turn) -> Steps:
    # Waits for the answer (or, where the protocol says so, the cancel).
    codex = turn.wire.cancel_ends_permission
    while not turn.answered and not (codex and turn.cancelled):
        yield Wait(cancel=codex, answer=True)
    stopped, said = turn.wire.permission_settled(turn)
    if stopped:
        turn.end("cancelled")
        return
    turn.chunk(said)
    turn.end("end_turn")


def withdraw(turn: Turn, text: str) -> Steps:
    rid = turn.permission_rpc_id = turn.wire.ask_permission(turn)
    yield Wait(WITHDRAW_AFTER_S, answer=True)
    if turn.answered or turn.cancelled:
        # Answered (or cancelled) before we took it back: as /permission.
        yield from settle_permission(turn)
        return
    if turn.wire.withdraw(turn, rid):
        yield Wait(WITHDRAW_ANSWER_S, answer=True)
        answer = turn.answer
        said = "no answer" if answer is None else str(answer.get("error", answer))
    else:
        said = "resolved"
    if turn.cancelled:
        turn.end("cancelled")
        return
    turn.chunk(f"withdrawn: {said}")
    turn.end("end_turn")


def crash(turn: Turn, text: str) -> Steps:
    turn.chunk("about to crash ")
    turn.agent.emit(Err(b"mock agent: crashing on purpose\n"))
    turn.agent.emit(Exit(1))
    yield from ()


def garbage(turn: Turn, text: str) -> Steps:
    turn.write(b"this is not JSON {\n")
    return echo(turn, text)


def recall(turn: Turn, text: str) -> Steps:
    turn.chunk("recall: " + (" | ".join(turn.earlier) or "(nothing)"))
    turn.end("end_turn")
    yield from ()


def edit_file(turn: Turn, edit: mock_edits.Edit) -> str:
    """Make one edit as a tool call carrying its diff; what happened, in a line."""
    tool_id = f"edit_{uuid.uuid4().hex[:8]}"
    turn.wire.edit_started(turn, tool_id, edit)
    try:
        edit.apply()
        status, said = "completed", f"{edit.done} {edit.path}"
    except OSError as exc:
        status, said = "failed", f"cannot edit {edit.path}: {exc}"
    turn.wire.edit_finished(turn, tool_id, edit, status)
    return said


def one_edit(turn: Turn, text: str) -> Steps:
    command = text.split()[0]
    planned = mock_edits.plan_edit(command, turn.agent.cwd, text.strip()[len(command):])
    turn.chunk(planned if isinstance(planned, str) else edit_file(turn, planned))
    turn.end("end_turn")
    yield from ()


def many_edits(turn: Turn, text: str) -> Steps:
    n = number(text, 5)
    for i in range(1, n + 1):
        if turn.cancelled:
            turn.end("cancelled")
            return
        planned = mock_edits.plan_edit("/write", turn.agent.cwd, f"edit-{i}.txt edit {i}")
        if isinstance(planned, str):
            turn.chunk(planned)
            break
        edit_file(turn, planned)
        if i < n:
            yield Wait(mock_edits.EDITS_INTERVAL_S, cancel=True)
            if turn.cancelled:
                turn.end("cancelled")
                return
    turn.chunk(f"{n} edits")
    turn.end("end_turn")
