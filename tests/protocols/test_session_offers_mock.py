"""What the mock agent offers a session, through the adapters, as a real subprocess in
every dialect (ACP v1, v1 with ``--legacy-options``, v2, Codex): options offered, set
(the agent's ``/options`` says it took), changed by the agent itself; its commands;
``/usage``; ``/title``."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio

from protocols.adapters import AcpAdapter, CodexAdapter, ProtocolName
from protocols.events import (
    AgentEvent,
    CommandsChanged,
    MessageChunk,
    OptionsChanged,
    TitleChanged,
    TurnEnded,
    UsageUpdated,
)
from protocols.mock_agent import ACP_VERSION_ENV, STATE_DIR_ENV
from protocols.process import start_agent_process, terminate_group

from .conftest import SETUP_S, TEST_TIMEOUTS
from .helpers import MOCK_AGENT, REPO_ROOT, RecordingSendStream, parse_lines

TEST_S = 15.0
E = TypeVar("E", bound=AgentEvent)

#: dialect → (protocol, ACP version offered by the mock, extra arguments)
DIALECTS: dict[str, tuple[ProtocolName, str, list[str]]] = {
    "acp": ("acp", "1", []),
    "acp-legacy": ("acp", "1", ["--legacy-options"]),
    "acp2": ("acp", "2", []),
    "codex": ("codex", "1", []),
}


class Mock:
    def __init__(self, adapter: AcpAdapter | CodexAdapter, written: RecordingSendStream,
                 opened: list[AgentEvent]) -> None:
        self.adapter = adapter
        self.written = written
        #: The events up to the session's start (what it offered).
        self.opened = opened
        self.seen: list[AgentEvent] = []

    def sent(self, method: str) -> list[dict[str, Any]]:
        return [m for m in parse_lines(bytes(self.written.data)) if m.get("method") == method]

    async def turn(self, text: str) -> str:
        """Run a prompt; its text (the events it brought are in ``seen``)."""
        self.seen = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.adapter.prompt, text)
            while not isinstance(ev := await self.adapter.events.receive(), TurnEnded):
                self.seen.append(ev)
        return "".join(e.text for e in self.seen if isinstance(e, MessageChunk))

    def of(self, cls: type[E]) -> list[E]:
        return [e for e in self.seen if isinstance(e, cls)]


@pytest.fixture(params=list(DIALECTS))
def dialect(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
async def mock(dialect: str, tmp_path: Path) -> AsyncIterator[Mock]:
    protocol, version, extra = DIALECTS[dialect]
    env = {**os.environ, STATE_DIR_ENV: str(tmp_path / "state"), ACP_VERSION_ENV: version}
    proc = await start_agent_process([*MOCK_AGENT, "--protocol", protocol, *extra],
                                     cwd=str(REPO_ROOT), env=env)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        written = RecordingSendStream(proc.stdin)
        cls = AcpAdapter if protocol == "acp" else CodexAdapter
        adapter = cls(written, proc.stdout, timeouts=TEST_TIMEOUTS)
        async with trio.open_nursery() as nursery:
            await nursery.start(adapter.connection.run)
            with trio.fail_after(SETUP_S):
                await adapter.initialize()
                await adapter.new_session(str(tmp_path))
                # What came with the session: its options and commands (ACP), or
                # its options after thread/start and again after model/list (Codex).
                opened: list[AgentEvent] = []
                while not (sum(isinstance(e, OptionsChanged) for e in opened) == 2
                           if protocol == "codex" else
                           all(any(isinstance(e, cls) for e in opened)
                               for cls in (CommandsChanged, OptionsChanged))):
                    opened.append(await adapter.events.receive())
            try:
                with trio.fail_after(TEST_S):
                    yield Mock(adapter, written, opened)
            finally:
                nursery.cancel_scope.cancel()
    finally:
        await terminate_group(proc, grace_s=1.0)


def currents(ev: OptionsChanged) -> dict[str, str | None]:
    return {o["id"]: o["current"] for o in ev.options}


async def test_options_are_offered(dialect: str, mock: Mock) -> None:
    options = [e for e in mock.opened if isinstance(e, OptionsChanged)][-1]
    if dialect == "codex":
        assert currents(options) == {"model": "mock-fast", "reasoning_effort": "medium",
                                     "approval_policy": "never"}
        assert [c["value"] for c in options.options[0]["choices"]] == [
            "mock-fast", "mock-smart"]
        assert [c["value"] for c in options.options[1]["choices"]] == ["low", "medium"]
        assert mock.sent("model/list")
        return
    assert currents(options) == {"mode": "default", "model": "mock-fast"}
    assert [(o["category"], [c["value"] for c in o["choices"]]) for o in options.options] == [
        ("mode", ["default", "plan", "yolo"]), ("model", ["mock-fast", "mock-smart"])]
    assert options.options[0]["choices"][1] == {
        "value": "plan", "name": "Plan", "description": "Plans only, writes nothing"}


@pytest.mark.parametrize("dialect", ["acp", "acp-legacy", "acp2"])
async def test_commands_are_offered_after_the_session_starts(mock: Mock) -> None:
    [commands] = [e for e in mock.opened if isinstance(e, CommandsChanged)]
    by_name = {c["name"]: c for c in commands.commands}
    assert {"delay", "tool", "steps", "usage", "title", "options"} <= set(by_name)
    assert by_name["delay"] == {"name": "delay", "input_hint": "<ms>",
                                "description": "Stream a chunk every 100 ms for a while"}
    assert by_name["options"]["input_hint"] is None


@pytest.mark.parametrize("dialect", ["acp", "acp-legacy", "acp2"])
async def test_acp_set_applies_now(dialect: str, mock: Mock) -> None:
    assert await mock.adapter.set_option("mode", "plan") == "now"
    assert await mock.adapter.set_option("model", "mock-smart") == "now"
    [mode, model] = [e for e in [await mock.adapter.events.receive() for _ in range(2)]
                     if isinstance(e, OptionsChanged)]
    assert currents(mode) == {"mode": "plan", "model": "mock-fast"}
    assert currents(model) == {"mode": "plan", "model": "mock-smart"}
    methods = (["session/set_mode", "session/set_model"] if dialect == "acp-legacy"
               else ["session/set_config_option"] * 2)
    assert [m["method"] for m in parse_lines(bytes(mock.written.data))
            if m.get("method", "").startswith("session/set_")] == methods
    assert await mock.turn("/options") == "options: mode=plan model=mock-smart"


@pytest.mark.parametrize("dialect", ["codex"])
async def test_codex_set_applies_to_the_next_turn(mock: Mock) -> None:
    assert await mock.turn("/options") == "options: model=- effort=- approvalPolicy=-"
    assert await mock.adapter.set_option("model", "mock-smart") == "next_turn"
    changed = await mock.adapter.events.receive()
    assert isinstance(changed, OptionsChanged) and currents(changed)["model"] == "mock-smart"
    # mock-smart's efforts include high (mock-fast's do not).
    await mock.adapter.set_option("reasoning_effort", "high")
    await mock.adapter.set_option("approval_policy", "on-request")
    assert await mock.turn("/options") == (
        "options: model=mock-smart effort=high approvalPolicy=on-request")


async def test_unknown_options_are_refused_before_anything_is_sent(dialect: str,
                                                                   mock: Mock) -> None:
    before = bytes(mock.written.data)
    with pytest.raises(ValueError, match="not a choice"):
        await mock.adapter.set_option("model", "mock-huge")
    with pytest.raises(ValueError, match="no option 'colour'"):
        await mock.adapter.set_option("colour", "blue")
    assert bytes(mock.written.data) == before


@pytest.mark.parametrize("dialect", ["acp", "acp-legacy", "acp2"])
async def test_the_agents_own_mode_change(mock: Mock) -> None:
    assert await mock.turn("/agentset mode yolo") == "mode is now yolo"
    [changed] = mock.of(OptionsChanged)
    assert currents(changed) == {"mode": "yolo", "model": "mock-fast"}


async def test_usage(dialect: str, mock: Mock) -> None:
    assert await mock.turn("/usage 4000") == "usage: 4000 tokens"
    [usage] = mock.of(UsageUpdated)
    if dialect == "codex":
        assert usage.usage == {"input_tokens": 3000, "output_tokens": 1000,
                               "context_used": 4000, "context_size": 258400, "cost": None}
    else:
        assert usage.usage == {"input_tokens": None, "output_tokens": None,
                               "context_used": 4000, "context_size": 200000,
                               "cost": {"amount": 0.04, "currency": "USD"}}


async def test_title(dialect: str, mock: Mock) -> None:
    text = await mock.turn("/title Fix the flaky test")
    if dialect == "codex":
        assert mock.of(TitleChanged) == [] and "not part of the Codex" in text
    else:
        assert mock.of(TitleChanged) == [TitleChanged(title="Fix the flaky test")]
