"""The pinned Codex's own app-server schema (``codex app-server
generate-json-schema``) against what ``protocols.codex`` writes and reads.

Run against the CLI that scripts/install_agents.sh pins (the test checks the
installed version is the pin): every method, parameter and decision the core
uses must still be in that version's schema, so a repin that drops one fails
here rather than in a user's turn.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from protocols.codex import PERMISSIONS_METHOD

from .cli import AGENTS_DIR, find_cli

pytestmark = pytest.mark.agents

REPO = Path(__file__).resolve().parents[2]
CODEX = find_cli("codex")


def _pin() -> str:
    text = (REPO / "scripts" / "install_agents.sh").read_text()
    found = re.search(r'"codex @openai/codex (\S+)"', text)
    assert found, "scripts/install_agents.sh pins no @openai/codex"
    return found.group(1)


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if CODEX is None:
        pytest.skip(f"codex CLI is not installed in {AGENTS_DIR} (run scripts/install_agents.sh)")
    version = subprocess.run([CODEX, "--version"], capture_output=True, text=True, timeout=60,
                             check=True).stdout.split()[-1]
    assert version == _pin(), f"installed codex {version}, pinned {_pin()}"
    out = tmp_path_factory.mktemp("codex-schema")
    subprocess.run([CODEX, "app-server", "generate-json-schema", "--out", str(out)],
                   capture_output=True, timeout=120, check=True)
    files = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    v2 = json.loads((out / "codex_app_server_protocol.v2.schemas.json").read_text())
    top = json.loads((out / "codex_app_server_protocol.schemas.json").read_text())
    return {"files": files, "defs": {**top["definitions"], **v2["definitions"]}}


def _methods(union: dict[str, Any]) -> set[str]:
    return {m for variant in union.get("oneOf", [])
            for m in variant.get("properties", {}).get("method", {}).get("enum", [])}


def _props(schema: dict[str, Any], name: str) -> set[str]:
    return set(schema["defs"][name].get("properties", {}))


def _enum(schema: dict[str, Any], name: str) -> set[str]:
    node = schema["defs"][name]
    return {v for variant in node.get("oneOf", [node]) for v in variant.get("enum", [])}


def test_the_client_requests_we_send_are_in_the_schema(schema: dict[str, Any]) -> None:
    sent = {"initialize", "thread/start", "thread/resume", "turn/start", "turn/interrupt",
            "turn/steer", "thread/revert"}
    assert sent <= _methods(schema["files"]["ClientRequest"])


def test_their_parameters_are_in_the_schema(schema: dict[str, Any]) -> None:
    assert {"clientInfo"} <= _props(schema, "InitializeParams")
    assert {"cwd", "approvalPolicy", "sandbox", "ephemeral"} <= _props(schema, "ThreadStartParams")
    assert {"threadId", "cwd", "approvalPolicy", "sandbox", "excludeTurns"} <= _props(
        schema, "ThreadResumeParams")
    assert {"threadId", "input"} <= _props(schema, "TurnStartParams")
    assert {"threadId", "turnId"} <= _props(schema, "TurnInterruptParams")
    assert {"threadId", "input", "expectedTurnId"} <= _props(schema, "TurnSteerParams")
    assert {"threadId", "beforeTurnId"} <= _props(schema, "ThreadRevertParams")
    assert {"thread"} <= _props(schema, "ThreadRevertResponse")


def test_the_profiles_policies_are_in_the_schema(schema: dict[str, Any]) -> None:
    # The codex profile's thread_params, and the tests' "untrusted".
    assert {"on-request", "untrusted", "never"} <= _enum(schema, "AskForApproval")
    assert {"workspace-write", "read-only", "danger-full-access"} <= _enum(schema, "SandboxMode")


def test_the_approvals_we_answer_and_their_decisions_are_in_the_schema(
        schema: dict[str, Any]) -> None:
    asked = {"item/commandExecution/requestApproval", "item/fileChange/requestApproval",
             PERMISSIONS_METHOD}
    assert asked <= _methods(schema["files"]["ServerRequest"])
    for response in ("CommandExecutionRequestApprovalResponse",
                     "FileChangeRequestApprovalResponse"):
        decisions = json.dumps(schema["files"][response])
        for decision in ("accept", "acceptForSession", "decline", "cancel"):
            assert f'"{decision}"' in decisions, (response, decision)


def test_the_notifications_we_read_are_in_the_schema(schema: dict[str, Any]) -> None:
    read = {"thread/started", "turn/started", "turn/completed", "item/started",
            "item/completed", "item/agentMessage/delta", "item/reasoning/textDelta",
            "item/reasoning/summaryTextDelta", "turn/plan/updated", "serverRequest/resolved"}
    assert read <= _methods(schema["files"]["ServerNotification"])
