"""Two kinds of cancel sample taken alternately on one session (the queued and restored
phases), so that both see the same drift of a shared machine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .measure import log

__all__ = ["Sample", "interleave"]

#: One cancel: ms from the request to each stage (``response``, ``pending_true``, ...).
Sample = dict[str, float]


async def interleave(label: str, samples: int, warmup: int,
                     plain: Callable[[], Awaitable[Sample]],
                     variant: Callable[[], Awaitable[Sample]],
                     ) -> tuple[list[Sample], list[Sample]]:
    """``warmup + samples`` pairs, in the order plain/variant then variant/plain
    (so neither always follows the other); the warm-up pairs are dropped."""
    kept_plain: list[Sample] = []
    kept_variant: list[Sample] = []
    for i in range(warmup + samples):
        if i % 2 == 0:
            a, b = await plain(), await variant()
        else:
            b, a = await variant(), await plain()
        if i >= warmup:
            kept_plain.append(a)
            kept_variant.append(b)
        if (i + 1) % 50 == 0:
            log(f"{label}: {i + 1}/{warmup + samples} pairs")
    return kept_plain, kept_variant
