"""The mock agent's faults for the reliability suite (not part of the DESIGN table):
``/stderr``, ``/bigline``, ``/partial``, ``/badutf8``, ``/wrongshape``, ``/closeout``
and ``/flood``."""

from __future__ import annotations

from .base import CloseOut, Err, Turn, Wait
from .scripts import Steps, echo, number

__all__ = ["FLOOD_CHUNK", "FLOOD_WAIT_S"]

#: ``/flood``: the size of each chunk, and how long it then waits for a cancel.
FLOOD_CHUNK = 16384
FLOOD_WAIT_S = 30.0
#: ``/partial``: the pause between the pieces of one message.
PARTIAL_PAUSE_S = 0.05


def stderr(turn: Turn, text: str) -> Steps:
    block = b"mock agent stderr noise " * 43 + b"\n"
    for _ in range(number(text, 1024)):
        turn.agent.emit(Err(block))
    return echo(turn, text)


def bigline(turn: Turn, text: str) -> Steps:
    turn.write(b'{"junk":"' + b"x" * (number(text, 20) * 1024 * 1024) + b'"}\n')
    return echo(turn, text)


def partial(turn: Turn, text: str) -> Steps:
    line = turn.wire.chunk(turn, "pieced together ")
    for piece in (line[:7], line[7:20], line[20:]):
        turn.write(piece)
        yield Wait(PARTIAL_PAUSE_S)
    yield from echo(turn, text)


def badutf8(turn: Turn, text: str) -> Steps:
    turn.write(b'{"method":"\xff\xfe broken"}\n')
    return echo(turn, text)


def wrongshape(turn: Turn, text: str) -> Steps:
    turn.write(b'[1, 2, 3]\n{"method": 5}\n{"id": 98765, "result": {}}\n')
    turn.notify(turn.wire.update_method, {"unexpected": True})
    return echo(turn, text)


def closeout(turn: Turn, text: str) -> Steps:
    turn.agent.emit(CloseOut())
    yield from ()


def flood(turn: Turn, text: str) -> Steps:
    # Not in turn.reply: the session's history would keep all of it.
    block = ("flood " * 2730 + "\n")[:FLOOD_CHUNK]
    for _ in range(number(text, 20) * 1024 * 1024 // FLOOD_CHUNK):
        if turn.cancelled:
            break
        turn.write(turn.wire.chunk(turn, block))
        # As fast as stdout takes it, reading input (the cancel) between chunks.
        yield Wait(0)
    if not turn.cancelled:
        yield Wait(FLOOD_WAIT_S, cancel=True)
    turn.end("cancelled" if turn.cancelled else "end_turn")
