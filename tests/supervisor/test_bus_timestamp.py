"""``bus.timestamp``: the cached second gives the same text as formatting it whole."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from supervisor import bus

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _iso(ns: int) -> str:
    """What the timestamp was before the cache: ``isoformat`` truncating to the ms."""
    when = EPOCH + timedelta(microseconds=ns // 1000)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.mark.parametrize("ns", [
    0, 999_999, 1_000_000, 1_764_752_400_123_456_789, 1_764_752_400_999_999_999,
    1_764_752_401_000_000_000, 1_764_752_401_000_999_999, 1_764_752_459_001_000_000,
])
def test_each_timestamp_is_the_iso_text_of_its_millisecond(
        ns: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: ns)
    assert bus.timestamp() == _iso(ns)
    assert bus.timestamp() == _iso(ns)  # the cached one


def test_consecutive_timestamps_across_a_second_never_go_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    for ns in range(1_764_752_400_990_000_000, 1_764_752_401_020_000_000, 7_000_000):
        monkeypatch.setattr(time, "time_ns", lambda ns=ns: ns)
        seen.append(bus.timestamp())
        assert seen[-1] == _iso(ns)
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
