"""Cancel scopes that keep the concurrency rules (DESIGN.md §2).

A shield stops a caller's cancel from cutting work that must finish (a write
to an agent, a goodbye on a socket, a turn that must not be claimed and never
run); it must never make that work unbounded.  ``shielded_for`` is the one
shape: the shield and its deadline are the same scope, so the deadline is
inside the shield and bites whatever the caller does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio

__all__ = ["shielded_for"]


@contextmanager
def shielded_for(timeout_s: float) -> Iterator[trio.CancelScope]:
    """A shielded scope that ends its work after ``timeout_s`` at most.

    The caller's cancel does not reach the work inside; the deadline does
    (then the scope's ``cancelled_caught`` is set and the work was cut short).
    A cancel of the caller surfaces at its next checkpoint after the block."""
    with trio.CancelScope(shield=True, deadline=trio.current_time() + timeout_s) as scope:
        yield scope
