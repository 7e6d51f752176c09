"""Percentiles and summaries of latency samples (milliseconds)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["paired", "percentile", "summary"]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between closest ranks; nan when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summary(values: Sequence[float]) -> dict[str, Any]:
    """n, p50, p90, p99, mean, min, max, rounded to microseconds."""
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 3),
        "p90": round(percentile(values, 90), 3),
        "p99": round(percentile(values, 99), 3),
        "mean": round(statistics.fmean(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def paired(plain: Sequence[float], variant: Sequence[float], name: str) -> dict[str, Any]:
    """Two interleaved sample sets of the same measurement: both summaries (``plain_ms``,
    ``<name>_ms``) and the variant's p50 and p99 over the plain one's."""
    a, b = summary(plain), summary(variant)
    return {
        "plain_ms": a, f"{name}_ms": b,
        "ratio_p50": round(b["p50"] / a["p50"], 3) if a.get("n") and b.get("n") else None,
        "ratio_p99": round(b["p99"] / a["p99"], 3) if a.get("n") and b.get("n") else None,
    }
