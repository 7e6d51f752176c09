"""Shields that keep their caller's bound.

A shield protects cleanup from an outside cancellation (a task cancelled
while it closes a turn must still close it).  It must not also lift the
bound of a shield around it: a 35 s shield inside a 2 s one would run for 35 s.
``bounded_shield`` takes the sooner of its own deadline and the one in
effect where it is entered, unless that one is already past (the caller is
being cancelled: exactly what the shield is for), so every shield has a
deadline inside it that can bite.
"""

from __future__ import annotations

import math

import trio

__all__ = ["bounded_shield"]


def bounded_shield(seconds: float) -> trio.CancelScope:
    """A shielded scope ending within ``seconds``, or sooner if an enclosing
    shield ends sooner."""
    deadline = trio.current_time() + seconds
    enclosing = trio.current_effective_deadline()
    if enclosing != -math.inf:
        deadline = min(deadline, enclosing)
    return trio.CancelScope(shield=True, deadline=deadline)
