"""Session continuity with the real agent CLIs (DESIGN.md §10), offline
against the fake provider: a conversation is held in one agent process, the
process is torn down, a new one (same home, same cwd) reopens the session
through Turnvisor's adapter — ACP ``session/resume`` or ``session/load``,
Codex ``thread/resume`` — and the next prompt's request to the provider must
carry the earlier turn (memory, not just an answer).  Gemini CLI restores only
a session opened in an earlier UTC minute (its defect: docs/agents.md, Session
restore); its case waits for the minute to turn, and a test of its own pins
that a load in the same minute fails and loses the conversation.  An agent that cannot
restore must say so (``RestoreUnsupported`` or a refusal); that is asserted
per agent, never passed over.  Results print as ``[agent] restore ...`` lines
(``pytest -s``); docs/agents.md has the table.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from protocols.adapters import AgentRequestError
from tests.fake_provider import FakeProvider

from .cli import AGENTS_DIR, find_cli
from .harness import agent_session

pytestmark = [pytest.mark.agents, pytest.mark.slow]

#: agent → how it restores (None: it cannot, and says so).
EXPECTED: dict[str, str | None] = {
    "codex": "thread/resume",
    "claude": "resume",
    # Only in a later UTC minute than the session's session/new (see below).
    "gemini": "load",
    "auggie": "load",
    # codex-acp 2.x (auto: ACP 2, where resume is the baseline; v1 too:
    # test_codex_acp_versions.py).
    "codex-acp": "resume",
    # Qwen Code 0.24 and opencode 1.18 advertise loadSession too; resume is preferred.
    "qwen": "resume",
    "opencode": "resume",
}

#: Agents whose ``session/load`` in the UTC minute the session was opened in
#: destroys it.  Gemini CLI 0.61's ``AcpSessionManager.loadSession`` builds the
#: session's config (whose initialize starts a fresh chat recording under the
#: same session id, in ``chats/session-<UTC minute>-<id[:8]>.jsonl``) before it
#: looks the saved session up; in the minute of the session/new that is the
#: saved session's own file, and the fresh chat's ``$set: {messages: [...]}``
#: record folds the saved turns away.
SAME_MINUTE_LOSS = {"gemini"}

per_agent = pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.skipif(
        find_cli(name) is None,
        reason=f"{name} CLI is not installed in {AGENTS_DIR} (run scripts/install_agents.sh)",
    ))
    for name in EXPECTED
])

MARKER = "PELICAN-4711"


def utc_minute() -> str:
    """The minute Gemini CLI names a new chat recording by (``toISOString().slice(0, 16)``)."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M")


async def wait_past(minute: str) -> None:
    """Until the UTC minute is a later one than ``minute`` (at most a minute)."""
    with trio.fail_after(65):
        while utc_minute() == minute:
            await trio.sleep(0.25)


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
        # session/new has been answered: the agent named its recording by this
        # minute or an earlier one.
        opened = utc_minute()
    if name in SAME_MINUTE_LOSS:
        await wait_past(opened)
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


@pytest.mark.skipif(find_cli("gemini") is None,
                    reason=f"gemini CLI is not installed in {AGENTS_DIR} "
                           "(run scripts/install_agents.sh)")
async def test_gemini_load_in_the_minute_its_session_opened_loses_the_conversation(
    provider: FakeProvider, tmp_path: Path
) -> None:
    """Gemini CLI 0.61's defect, pinned so that a fixed release shows up here:
    a ``session/load`` in the UTC minute of the session's ``session/new`` fails
    with -32603 "No previous sessions found for this project", and a load in a
    later minute fails too (the saved turns are gone).  Turnvisor then starts
    fresh with the warning (supervisor/turn/restore.py)."""
    # Room for two agent starts and a turn inside one minute (~10 s here).
    with trio.fail_after(65):
        while dt.datetime.now(dt.UTC).second > 20:
            await trio.sleep(0.25)
    async with agent_session("gemini", provider, tmp_path, persist=True,
                             on_permission=lambda ev: None) as first:
        opened = utc_minute()
        ended = await first.prompt(f"QUICK: remember the word {MARKER}", timeout_s=40)
        assert ended.stop_reason == "end_turn", ended
        agent_session_id = first.adapter.agent_session_id
        assert agent_session_id is not None
    async with agent_session("gemini", provider, tmp_path, persist=True,
                             restore=agent_session_id, on_permission=lambda ev: None) as second:
        assert utc_minute() == opened, "the load did not run in the minute the session opened"
        assert second.restored is None, second.restored
        assert isinstance(second.restore_error, AgentRequestError), second.restore_error
        assert second.restore_error.code == -32603, second.restore_error
        answer = b"".join(data for _, way, data in second.wire if way == "<-")
        assert b"No previous sessions found for this project" in answer, second.wire_tail(4)
    await wait_past(opened)
    async with agent_session("gemini", provider, tmp_path, persist=True,
                             restore=agent_session_id, on_permission=lambda ev: None) as third:
        assert third.restored is None, "the conversation survived a same-minute load"
        assert isinstance(third.restore_error, AgentRequestError), third.restore_error
