"""The pinned ACP agents' own protocol schema against what ``protocols.acp``
writes and reads.

claude-agent-acp and codex-acp are built on the ACP TypeScript SDK and ship its
generated JSON Schema (``@agentclientprotocol/sdk/schema/v1`` and ``v2``): every
method, stop reason and update the core relies on in a cancel must still be in
the schema of the SDK the pinned release depends on, so a repin that drops one
fails here rather than in a user's turn (as test_codex_schema does for Codex).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from .cli import AGENTS_DIR

pytestmark = pytest.mark.agents

REPO = Path(__file__).resolve().parents[2]
#: profile → (npm package, the ACP versions its release speaks)
PINNED = {"claude": ("@agentclientprotocol/claude-agent-acp", (1,)),
          "codex-acp": ("@agentclientprotocol/codex-acp", (1, 2))}


def _pin(package: str) -> str:
    text = (REPO / "scripts" / "install_agents.sh").read_text()
    found = re.search(rf'"\S+ {re.escape(package)} (\S+)"', text)
    assert found, f"scripts/install_agents.sh pins no {package}"
    return found.group(1)


def _schema(name: str, version: int) -> dict[str, Any]:
    package, _ = PINNED[name]
    modules = AGENTS_DIR / name / "node_modules"
    manifest = modules / package / "package.json"
    if not manifest.exists():
        pytest.skip(f"{package} is not installed in {AGENTS_DIR} (run scripts/install_agents.sh)")
    assert json.loads(manifest.read_text())["version"] == _pin(package)
    path = modules / "@agentclientprotocol" / "sdk" / "schema" / f"v{version}" / "schema.json"
    assert path.exists(), f"{package} ships no ACP v{version} schema at {path}"
    schema: dict[str, Any] = json.loads(path.read_text())
    return schema


def _methods(node: object) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "x-method" and isinstance(value, str):
                found.add(value)
            found |= _methods(value)
    elif isinstance(node, list):
        for item in node:
            found |= _methods(item)
    return found


def _consts(node: dict[str, Any], key: str | None = None) -> set[str]:
    variants = node.get("oneOf") or node.get("anyOf") or [node]
    out: set[str] = set()
    for v in variants:
        value = v.get("properties", {}).get(key, {}).get("const") if key else v.get("const")
        if isinstance(value, str):
            out.add(value)
    return out


CASES = [(name, v) for name, (_, versions) in PINNED.items() for v in versions]


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_the_methods_a_cancel_uses_are_in_the_pinned_schema(name: str, version: int) -> None:
    methods = _methods(_schema(name, version))
    used = {"initialize", "session/new", "session/prompt", "session/cancel", "session/resume",
            "session/update", "session/request_permission", "$/cancel_request"}
    if version == 1:
        used.add("session/load")  # folded into session/resume in v2
    assert used <= methods, used - methods


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_a_permission_answered_by_a_cancel_is_the_cancelled_outcome(name: str,
                                                                  version: int) -> None:
    defs = _schema(name, version)["$defs"]
    assert "cancelled" in _consts(defs["RequestPermissionOutcome"], "outcome")
    assert "sessionId" in defs["RequestPermissionRequest"]["properties"]


def test_v1_stop_reasons_are_ours() -> None:
    defs = _schema("claude", 1)["$defs"]
    assert _consts(defs["StopReason"]) == {"end_turn", "max_tokens", "max_turn_requests",
                                           "refusal", "cancelled"}


def test_v2_ends_a_turn_with_the_idle_state_update() -> None:
    defs = _schema("codex-acp", 2)["$defs"]
    assert "state_update" in _consts(defs["SessionUpdate"], "sessionUpdate")
    assert {"idle", "running", "requires_action"} <= _consts(defs["StateUpdate"], "state")
    assert "stopReason" in defs["IdleStateUpdate"]["properties"]
    assert "protocolVersion" in defs["InitializeResponse"]["properties"]
