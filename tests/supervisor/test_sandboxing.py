"""Without a working bwrap, profiles left to the default run unsandboxed, and
that is said once at start and in the agent picker's data."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import protocols.sandbox
import supervisor.workspace.sandboxing
from supervisor.config import Config
from supervisor.profiles import parse_profiles
from supervisor.workspace.sandboxing import (
    NO_SANDBOX_WARNING,
    check_sandbox,
    sandbox_modes,
    sandbox_warning,
)


def _no_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protocols.sandbox, "bwrap_works", lambda: False)
    monkeypatch.setattr(supervisor.workspace.sandboxing, "bwrap_works", lambda: False)


def test_without_bwrap_the_default_is_none_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_bwrap(monkeypatch)
    profiles = parse_profiles({"x": {"protocol": "acp", "command": ["x"], "sandbox": "none"},
                               "y": {"protocol": "acp", "command": ["y"], "sandbox": "bwrap"}})
    modes = sandbox_modes(profiles)
    assert modes["mock"] == "none" and modes["x"] == "none"
    assert modes["y"] == "bwrap"  # asked for explicitly: its launch fails clearly instead
    assert sandbox_warning(profiles) == NO_SANDBOX_WARNING
    # Every profile chose: nothing to warn about.
    chosen = {n: p for n, p in profiles.items() if p.sandbox is not None}
    assert sandbox_warning(chosen) is None


async def test_one_warning_at_start(monkeypatch: pytest.MonkeyPatch,
                                    caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    _no_bwrap(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="supervisor.workspace.sandboxing"):
        await check_sandbox(Config(data_dir=tmp_path, profiles=parse_profiles({})))
    assert [r.getMessage() for r in caplog.records
            if r.name == "supervisor.workspace.sandboxing"] == [NO_SANDBOX_WARNING]


def test_with_bwrap_no_warning() -> None:
    if not protocols.sandbox.bwrap_works():
        pytest.skip("bwrap cannot run here")
    profiles = parse_profiles({})
    assert set(sandbox_modes(profiles).values()) == {"bwrap"}
    assert sandbox_warning(profiles) is None
