"""Session continuity with the real agent CLIs (DESIGN.md §10), offline
against the fake provider: a conversation is held in one agent process, the
process is torn down, a new one (same home, same cwd) reopens the session
through Turnvisor's adapter — ACP ``session/resume`` or ``session/load``,
Codex ``thread/resume`` — and the next prompt's request to the provider must
carry the earlier turn (memory, not just an answer).  An agent that cannot
restore must say so (``RestoreUnsupported`` or a refusal); that is asserted
per agent, never passed over.  Results print as ``[agent] restore ...`` lines
(``pytest -s``); docs/agents.md has the table.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_provider import FakeProvider

from .cli import AGENTS_DIR, find_cli
from .harness import agent_session

pytestmark = [pytest.mark.agents, pytest.mark.slow]

#: agent → how it restores (None: it cannot, and says so).  Gemini CLI 0.61
#: advertises ``loadSession``, but its ``session/load`` starts the session's new
#: chat recording (which resets the stored messages) before it reads it, then
#: answers -32603 "No previous sessions found for this project": Turnvisor falls
#: back to a fresh session with the warning.
EXPECTED: dict[str, str | None] = {
    "codex": "thread/resume",
    "claude": "resume",
    "gemini": None,
    "auggie": "load",
    # codex-acp 2.x (auto: ACP 2, where resume is the baseline; v1 too:
    # test_codex_acp_versions.py).
    "codex-acp": "resume",
}

per_agent = pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.skipif(
        find_cli(name) is None,
        reason=f"{name} CLI is not installed in {AGENTS_DIR} (run scripts/install_agents.sh)",
    ))
    for name in EXPECTED
])

MARKER = "PELICAN-4711"


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(token_interval_s=0.05, n_tokens=3, wait_s=30.0) as p:
        yield p


@per_agent
async def test_a_new_agent_process_restores_the_conversation(
    name: str, provider: FakeProvider, tmp_path: Path
) -> None:
    async with agent_session(name, provider, tmp_path, persist=True,
                             on_permission=lambda ev: None) as first:
        ended = await first.prompt(f"QUICK: remember the word {MARKER}", timeout_s=60)
        assert ended.stop_reason == "end_turn", ended
        agent_session_id = first.adapter.agent_session_id
        assert agent_session_id is not None
    seen = len(provider.requests)
    async with agent_session(name, provider, tmp_path, persist=True, restore=agent_session_id,
                             on_permission=lambda ev: None) as second:
        method = second.restored.method if second.restored is not None else None
        print(f"[{name}] restore -> {method or second.restore_error!r} in "
              f"{second.restore_s * 1000:.0f} ms"
              + (f" ({second.restored.replayed} replayed)" if second.restored else ""))
        assert method == EXPECTED[name], (method, second.restore_error,
                                          bytes(second.stderr[-2000:]), second.wire_tail(4))
        if method is None:
            assert second.restore_error is not None  # refused out loud, never silently
            return
        ended = await second.prompt("QUICK: which word did I ask you to remember?",
                                    timeout_s=60)
        assert ended.stop_reason == "end_turn", ended
        later = [json.dumps(body) for verb, _, body in provider.requests[seen:]
                 if verb == "POST" and body is not None]
        asked = [b for b in later if "which word did I ask you" in b]
        assert asked, f"{name}: the provider never got the new prompt: {later[-2:]}"
        # Side requests (a title, a summary) carry only the new prompt; the model's
        # request must carry the earlier turn too.
        assert any(MARKER in b for b in asked), \
            f"{name}: the restored conversation forgot the earlier turn"
