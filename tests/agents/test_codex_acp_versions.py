"""codex-acp 2.x (``@agentclientprotocol/codex-acp``) in each ACP version it
speaks, offline against the fake provider: the profile's ``acp_version`` is
pinned to 1 or to 2 and the session must say which it negotiated (the DTO's
``protocol``).  Per version: a cancel mid-stream, a cancel with a permission
pending, and a restore in a new agent process (``session/resume``; the next
model request carries the earlier turn).  The ``auto`` profile (v2 with this
agent) runs every test of test_more_agents.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
import trio

from tests.fake_provider import FakeProvider

from .cli import AGENTS_DIR, find_cli
from .harness import agent_session
from .test_end_to_end import APPROVED_FILE, INTERVAL_S, TOKENS, allow, e2e_session
from .test_more_agents import TEST_S, TIMEOUTS, _cancel_slow_turn

NAME = "codex-acp"
pytestmark = [
    pytest.mark.agents, pytest.mark.slow,
    pytest.mark.skipif(find_cli(NAME) is None, reason=f"{NAME} CLI is not installed in "
                       f"{AGENTS_DIR} (run scripts/install_agents.sh)"),
]
per_version = pytest.mark.parametrize("version", [1, 2], ids=["acp1", "acp2"])
MARKER = "OSPREY-5150"


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(token_interval_s=INTERVAL_S, n_tokens=TOKENS, wait_s=30.0,
                      tool_command=f"touch {APPROVED_FILE}") as p:
        yield p


@per_version
async def test_cancel_mid_stream(version: int, provider: FakeProvider, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with trio.fail_after(TEST_S):
        async with e2e_session(NAME, provider, tmp_path, monkeypatch, timeouts=TIMEOUTS,
                               acp_version=version) as e:
            assert (await e.session())["protocol"] == f"acp/{version}"
            mark, turn_id, rev = await _cancel_slow_turn(e, "SLOW: stream many tokens")
            ms = await e.cancel()
            await e.assert_cancelled(mark, turn_id, rev)
            streamed = await e.agent_text(turn_id)
            assert "tok0 tok1 " in streamed and f"tok{TOKENS - 1} " not in streamed, streamed
            print(f"[{NAME} acp/{version}] mid-stream agent.cancel answered in {ms:.1f} ms")
            await e.quick_turn()


@per_version
async def test_cancel_with_permission_pending(version: int, provider: FakeProvider,
                                              tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    with trio.fail_after(TEST_S):
        async with e2e_session(NAME, provider, tmp_path, monkeypatch, policy=lambda p: ...,
                               timeouts=TIMEOUTS, acp_version=version) as e:
            rev = e.revision()
            mark, turn_id = await e.prompt("TOOL: create the file")
            asked = await e.wait(mark, lambda f: f["action"] == "session.permission.requested",
                                 "a permission request")
            ms = await e.cancel()
            await e.assert_cancelled(mark, turn_id, rev)
            assert [p["request_id"] for p in e.since(mark, "session.permission.cancelled")] == [
                asked["payload"]["request_id"]]
            assert not (Path(e.cwd) / APPROVED_FILE).exists()
            print(f"[{NAME} acp/{version}] agent.cancel with a permission pending answered "
                  f"in {ms:.1f} ms")
            e.policy = allow
            await e.quick_turn()


@per_version
async def test_a_new_agent_process_restores_the_conversation(
        version: Literal[1, 2], tmp_path: Path) -> None:
    with FakeProvider(token_interval_s=0.05, n_tokens=3, wait_s=30.0) as provider:
        async with agent_session(NAME, provider, tmp_path, persist=True, acp_version=version,
                                 on_permission=lambda ev: None) as first:
            assert first.adapter.wire_protocol == f"acp/{version}"
            ended = await first.prompt(f"QUICK: remember the word {MARKER}", timeout_s=60)
            assert ended.stop_reason == "end_turn", ended
            agent_session_id = first.adapter.agent_session_id
            assert agent_session_id is not None
        seen = len(provider.requests)
        async with agent_session(NAME, provider, tmp_path, persist=True, restore=agent_session_id,
                                 acp_version=version, on_permission=lambda ev: None) as second:
            assert second.restored is not None, second.restore_error
            assert second.restored.method == "resume"
            print(f"[{NAME} acp/{version}] restore -> resume in "
                  f"{second.restore_s * 1000:.0f} ms")
            ended = await second.prompt("QUICK: which word did I ask you to remember?",
                                        timeout_s=60)
            assert ended.stop_reason == "end_turn", ended
        asked = [json.dumps(body) for verb, _, body in provider.requests[seen:]
                 if verb == "POST" and body is not None
                 and "which word did I ask you" in json.dumps(body)]
        assert any(MARKER in b for b in asked), "the restored conversation forgot the earlier turn"
