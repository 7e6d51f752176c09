"""Real steering end to end (DESIGN.md §9): ``message.add`` with
``delivery:"steer"`` during a running turn goes to the real Codex app-server as
``turn/steer``, and to the real claude-agent-acp as ``_session/steering`` (the
ACP steering extension it advertises); the agent takes it into the same turn,
whose next model request carries the steered text (the fake provider answers
it, by its marker)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.fake_provider import FakeProvider

from .cli import find_cli
from .test_end_to_end import STEP_S, TEST_S, _state, _streamed, e2e_session, provider

__all__ = ["provider"]  # the fixture, used by name

pytestmark = [pytest.mark.agents, pytest.mark.slow]


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.skipif(find_cli(name) is None,
                                                reason=f"{name} CLI is not installed"))
    for name in ("codex", "claude")
])
async def test_steer_goes_into_the_running_turn(
    name: str, provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(TEST_S):
        async with e2e_session(name, provider, tmp_path, monkeypatch) as e:
            mark, turn_id = await e.prompt("SLOW: stream many tokens")
            await e.wait(mark, _state("RUNNING"), "RUNNING")
            await e.wait(mark, _streamed(2), "two streamed tokens")
            before = len(e.provider.main_streams())
            reply = await e.ws.call("message.add", {
                "session_id": e.sid, "content": "QUICK: steered in", "delivery": "steer"},
                timeout=STEP_S)
            assert reply["delivery"] == "steered", reply
            assert reply["metadata"] == {"delivery": "steer"}
            assert reply["turn_id"] == turn_id and reply["role"] == "user"
            # The same turn goes on with the steered input: a new model request
            # whose latest user message is the steer (quick answer), then its end.
            await e.wait_streams(
                lambda s: any(r.mode == "quick" for r in s[before:]),
                "a model request carrying the steered text")
            assert await e.turn_end(mark, turn_id) == "end_turn"
            assert len(e.since(mark, "session.turn.completed")) == 1
            users = [m for m in await e.messages() if m["role"] == "user"]
            assert [(m["content"], m["turn_id"], m["metadata"]) for m in users] == [
                ("SLOW: stream many tokens", turn_id, {}),
                ("QUICK: steered in", turn_id, {"delivery": "steer"})]
            listed = await e.ws.call("queue.list", {"session_id": e.sid})
            assert listed["entries"] == []
