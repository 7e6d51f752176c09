"""The mock agent's scripts about its session (DESIGN.md §19), the same in every dialect:
``/usage`` (a usage report), ``/title NAME`` (the session's title), ``/options`` (the
option values in effect, so a test sees that a set took), ``/agentset ID VALUE`` (the
agent changes an option itself).  Each says what it did and ends the turn."""

from __future__ import annotations

from collections.abc import Iterator

from .base import Turn, Wait
from .scripts import number

__all__ = ["agentset", "options", "title", "usage"]


def usage(turn: Turn, text: str) -> Iterator[Wait]:
    used = number(text, 1234)
    turn.wire.usage(turn, used)
    turn.chunk(f"usage: {used} tokens")
    turn.end("end_turn")
    yield from ()


def title(turn: Turn, text: str) -> Iterator[Wait]:
    name = text.partition(" ")[2].strip() or "Mock session"
    turn.chunk(turn.wire.title(turn, name))
    turn.end("end_turn")
    yield from ()


def options(turn: Turn, text: str) -> Iterator[Wait]:
    turn.chunk(f"options: {turn.wire.options_text(turn)}")
    turn.end("end_turn")
    yield from ()


def agentset(turn: Turn, text: str) -> Iterator[Wait]:
    words = text.split()
    said = (turn.wire.agent_sets(turn, words[1], words[2]) if len(words) == 3
            else "usage: /agentset OPTION VALUE")
    turn.chunk(said)
    turn.end("end_turn")
    yield from ()
