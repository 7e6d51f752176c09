"""Small measuring helpers shared by the cancel-latency phases."""

from __future__ import annotations

import resource
import sys
import time

import psutil

__all__ = ["cpu_s", "log", "ms", "raise_nofile"]


def ms(t: float) -> float:
    """Seconds (a perf_counter difference) as milliseconds, to the microsecond."""
    return round(t * 1000, 3)


def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 65536
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def cpu_s(proc: psutil.Process) -> float:
    """User + system CPU seconds of one process (the kernel counts them in ticks)."""
    t = proc.cpu_times()
    return float(t.user + t.system)


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
