"""``offline_cancel_s`` (DESIGN.md §20): a profile key, off by default, checked when the
configuration is read, and passed as agentctl's ``--offline-cancel-s`` to an agentctl
Turnvisor starts."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from supervisor.executors.agentctl import offline_args
from supervisor.profiles import ProfileError, parse_profiles


def _profile(**extra: Any) -> dict[str, Any]:
    return {"remote": {"protocol": "acp", "executor": "agentctl",
                       "command": [sys.executable, "-m", "protocols.mock_agent"], **extra}}


def test_off_by_default() -> None:
    profile = parse_profiles(_profile())["remote"]
    assert profile.offline_cancel_s is None and offline_args(profile) == []


def test_set_it_is_agentctls_flag() -> None:
    profile = parse_profiles(_profile(offline_cancel_s=30))["remote"]
    assert profile.offline_cancel_s == 30.0
    assert offline_args(profile) == ["--offline-cancel-s", "30"]
    assert offline_args(parse_profiles(_profile(offline_cancel_s=2.5))["remote"]) == [
        "--offline-cancel-s", "2.5"]


@pytest.mark.parametrize("value", [0, -1, "30", True])
def test_a_bad_value_is_refused_in_one_line(value: Any) -> None:
    with pytest.raises(ProfileError, match=r"\[agents\.remote\]: offline_cancel_s must be"):
        parse_profiles(_profile(offline_cancel_s=value))
