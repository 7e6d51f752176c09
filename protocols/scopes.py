"""Cancel scopes that keep the concurrency rules (DESIGN.md §2).

A shield stops a caller's cancel from cutting work that must finish (a write
to an agent, a goodbye on a socket, a turn's close that must not be left
half-done); it must never make that work unbounded, nor lift the bound of a
scope around it (a 35 s shield inside a 2 s one would run for 35 s).
``shielded_for`` is the one shape: the shield and its deadline are the same
scope, so the deadline is inside the shield and bites whatever the caller
does, and it is the sooner of its own and the one in effect where it is
entered, unless that one is already past (the caller is being cancelled:
exactly what the shield is for).
"""

from __future__ import annotations

import math

import trio

__all__ = ["shielded_for"]


def shielded_for(timeout_s: float) -> trio.CancelScope:
    """A shielded scope that ends its work after ``timeout_s`` at most (sooner if
    a scope around it ends sooner).

    The caller's cancel does not reach the work inside; the deadline does
    (then the scope's ``cancelled_caught`` is set and the work was cut short).
    A cancel of the caller surfaces at its next checkpoint after the block."""
    deadline = trio.current_time() + timeout_s
    enclosing = trio.current_effective_deadline()
    if enclosing != -math.inf:
        deadline = min(deadline, enclosing)
    return trio.CancelScope(shield=True, deadline=deadline)
