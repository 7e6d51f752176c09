"""A conversation outlives its agent process: the mock agent as real
subprocesses sharing one state directory.

Each test talks to one agent process, stops it (its whole process group), then
starts a new one on the same ``$MOCK_AGENT_STATE_DIR`` and restores the
conversation: ACP ``session/resume`` and ``session/load``, Codex
``thread/resume``.  ``/recall`` proves the new process knows the earlier
prompts.  Also the Codex ``turn/steer`` of a running ``/delay`` turn.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from protocols.adapters import (
    AcpAdapter,
    AgentAdapter,
    CodexAdapter,
    ProtocolName,
    RestoreUnsupported,
    SteerUnsupported,
)
from protocols.events import AgentEvent, HistoryReplayed, MessageChunk, OptionsChanged, TurnEnded
from protocols.jsonrpc import LocalProtocolError
from protocols.process import start_agent_process, terminate_group
from protocols.transport import AgentRequestError

from .conftest import SETUP_S, TEST_TIMEOUTS
from .helpers import MOCK_AGENT, RecordingSendStream, read_chunks, steer_mid_turn

#: Wall-clock bound per test (two agent start-ups, a few turns).
TEST_S = 30.0


@asynccontextmanager
async def mock_agent(
    protocol: ProtocolName, env: dict[str, str], cwd: Path, *, restore: str = "both",
    steering: bool = False,
) -> AsyncIterator[tuple[AcpAdapter | CodexAdapter, RecordingSendStream]]:
    """A mock agent process, initialized (no session yet), torn down with its group."""
    flags = ["--steering"] if steering else []
    proc = await start_agent_process(
        [*MOCK_AGENT, "--protocol", protocol, "--restore", restore, *flags], cwd=str(cwd),
        env=env)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        written = RecordingSendStream(proc.stdin)
        cls = AcpAdapter if protocol == "acp" else CodexAdapter
        adapter = cls(written, proc.stdout, timeouts=TEST_TIMEOUTS)
        async with trio.open_nursery() as nursery:
            await nursery.start(adapter.connection.run)
            with trio.fail_after(SETUP_S):
                await adapter.initialize()
            try:
                yield adapter, written
            finally:
                nursery.cancel_scope.cancel()
    finally:
        await terminate_group(proc, grace_s=1.0)
    assert proc.returncode is not None


def drain_events(adapter: AgentAdapter) -> list[AgentEvent]:
    out: list[AgentEvent] = []
    while True:
        try:
            out.append(adapter.events.receive_nowait())
        except trio.WouldBlock:
            return out


async def answer(adapter: AgentAdapter, text: str) -> str:
    """Run one turn; the agent text it streamed."""
    drain_events(adapter)
    ended = await adapter.prompt(text)
    assert ended.stop_reason == "end_turn", ended
    chunks: list[str] = []
    await read_chunks(adapter, TurnEnded, chunks)
    return "".join(chunks)


async def first_conversation(protocol: ProtocolName, env: dict[str, str], cwd: Path) -> str:
    """Two prompts in a first agent process, which is then stopped; its session id."""
    async with mock_agent(protocol, env, cwd) as (adapter, _):
        session_id = await adapter.new_session(str(cwd))
        assert await answer(adapter, "/recall") == "recall: (nothing)"
        assert await answer(adapter, "remember the milk") == "remember the milk"
    return session_id


@pytest.mark.parametrize(
    ("protocol", "restore", "method", "wire"),
    [
        ("acp", "both", "resume", "session/resume"),
        ("acp", "resume", "resume", "session/resume"),
        ("acp", "load", "load", "session/load"),
        ("codex", "both", "thread/resume", "thread/resume"),
    ],
)
async def test_a_new_process_restores_the_conversation(
    protocol: ProtocolName, restore: str, method: str, wire: str,
    agent_env: dict[str, str], tmp_path: Path,
) -> None:
    with trio.fail_after(TEST_S):
        session_id = await first_conversation(protocol, agent_env, tmp_path)
        async with mock_agent(protocol, agent_env, tmp_path, restore=restore) as (
            adapter, written
        ):
            restored = await adapter.restore_session(session_id, str(tmp_path))
            assert (restored.agent_session_id, restored.method) == (session_id, method)
            assert adapter.agent_session_id == session_id
            [request] = [m for m in written.lines() if m.get("method") == wire]
            id_key = "threadId" if protocol == "codex" else "sessionId"
            assert request["params"][id_key] == session_id
            assert request["params"]["cwd"] == str(tmp_path)

            replay = drain_events(adapter)
            # The restored session offers its options again (kept with the session;
            # Codex: the thread's answer, then with model/list's choices).
            offered = [e for e in replay if isinstance(e, OptionsChanged)][-1]
            assert [(o["id"], o["current"]) for o in offered.options][:1] == [
                ("mode" if protocol == "acp" else "model",
                 "default" if protocol == "acp" else "mock-fast")]
            replay = [e for e in replay if not isinstance(e, OptionsChanged)]
            if method == "load":
                # Both turns replayed (two prompts, two answers), none of it live text.
                assert restored.replayed == 4
                assert replay == [HistoryReplayed(session_id=session_id, updates=4, by_kind={
                    "user_message_chunk": 2, "agent_message_chunk": 2})]
            else:
                assert restored.replayed == 0
                assert not any(isinstance(e, MessageChunk | HistoryReplayed) for e in replay)

            assert await answer(adapter, "/recall") == "recall: /recall | remember the milk"
            # And the new prompts are kept too, for the next process.
            assert await answer(adapter, "/recall") == (
                "recall: /recall | remember the milk | /recall")


@pytest.mark.parametrize("protocol", ["acp", "codex"])
async def test_the_state_directory_holds_one_json_file_per_session(
    protocol: ProtocolName, agent_env: dict[str, str], tmp_path: Path,
) -> None:
    with trio.fail_after(TEST_S):
        session_id = await first_conversation(protocol, agent_env, tmp_path)
    state_dir = Path(agent_env["MOCK_AGENT_STATE_DIR"])
    assert sorted(os.listdir(state_dir)) == [f"{session_id}.json"]  # no temporary file left
    stored = json.loads((state_dir / f"{session_id}.json").read_text())
    # Each message names its turn (a Codex thread/revert drops turns by id).
    turns = [m.pop("turn") for m in stored["messages"]]
    assert turns[0] == turns[1] != turns[2] == turns[3], turns
    assert stored == {"id": session_id, "protocol": protocol, "cwd": str(tmp_path), "messages": [
        {"role": "user", "text": "/recall"},
        {"role": "agent", "text": "recall: (nothing)"},
        {"role": "user", "text": "remember the milk"},
        {"role": "agent", "text": "remember the milk"},
    ], "options": {"mode": "default", "model": "mock-fast"}}


async def test_the_default_state_directory_is_in_the_home_not_the_project(
    tmp_path: Path,
) -> None:
    """Its state never shows as a change of the user's project (DESIGN.md §12)."""
    home = tmp_path / "home"
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("MOCK_AGENT_STATE_DIR", "XDG_STATE_HOME")} | {"HOME": str(home)}
    with trio.fail_after(TEST_S):
        session_id = await first_conversation("acp", env, project)
    state = home / ".local" / "state" / "turnvisor-mock-agent"
    assert (state / f"{session_id}.json").is_file()
    assert os.listdir(project) == []


@pytest.mark.parametrize("protocol", ["acp", "codex"])
async def test_an_unknown_session_is_refused(
    protocol: ProtocolName, agent_env: dict[str, str], tmp_path: Path,
) -> None:
    with trio.fail_after(TEST_S):
        async with mock_agent(protocol, agent_env, tmp_path) as (adapter, _):
            for unknown in ("no-such-session", "../../etc/passwd"):
                with pytest.raises(AgentRequestError) as caught:
                    await adapter.restore_session(unknown, str(tmp_path))
                # ACP "resource not found"; Codex answers as codex 0.169 does.
                assert caught.value.code == (-32002 if protocol == "acp" else -32600)
                assert adapter.agent_session_id is None
            # The agent is fine: a fresh session works.
            await adapter.new_session(str(tmp_path))
            assert await answer(adapter, "/recall") == "recall: (nothing)"


async def test_an_acp_agent_that_advertises_no_restore(
    agent_env: dict[str, str], tmp_path: Path,
) -> None:
    with trio.fail_after(TEST_S):
        session_id = await first_conversation("acp", agent_env, tmp_path)
        async with mock_agent("acp", agent_env, tmp_path, restore="none") as (adapter, written):
            assert (adapter.core.can_resume, adapter.core.can_load) == (False, False)
            with pytest.raises(RestoreUnsupported):
                await adapter.restore_session(session_id, str(tmp_path))
            # Nothing was asked of the agent.
            assert [m["method"] for m in written.lines()] == ["initialize"]


async def test_a_codex_agent_that_cannot_resume(agent_env: dict[str, str], tmp_path: Path) -> None:
    with trio.fail_after(TEST_S):
        session_id = await first_conversation("codex", agent_env, tmp_path)
        async with mock_agent("codex", agent_env, tmp_path, restore="none") as (adapter, _):
            with pytest.raises(AgentRequestError) as caught:
                await adapter.restore_session(session_id, str(tmp_path))
            assert caught.value.code == -32601


# -- turn/steer ----------------------------------------------------------------


async def test_codex_steer_reaches_the_running_turn(
    agent_env: dict[str, str], tmp_path: Path,
) -> None:
    with trio.fail_after(TEST_S):
        async with mock_agent("codex", agent_env, tmp_path) as (adapter, written):
            assert isinstance(adapter, CodexAdapter)
            await adapter.new_session(str(tmp_path))
            turn = await steer_mid_turn(adapter, written, "/delay 1500", "turn left", "turn/steer")
            turn_id = turn.operation_id
            assert turn.line["params"] == {
                "threadId": adapter.agent_session_id,
                "input": [{"type": "text", "text": "turn left"}],
                "expectedTurnId": turn_id,
            }
            assert turn.ended.stop_reason == "end_turn"
            # The next chunk after the steer says so; the stream goes on after it.
            chunks = turn.chunks
            steered = chunks.index("steered: turn left")
            assert all(c.startswith("chunk") for c in chunks[:steered])
            assert chunks[steered + 1:] and chunks[-1].startswith("chunk")

            # The turn is over: refused before anything is written.
            with pytest.raises(LocalProtocolError, match="no turn to steer"):
                await adapter.steer("too late")

            # A stale expectedTurnId (the finished turn's), written by hand
            # during the next turn, is the agent's error.
            async with trio.open_nursery() as nursery:
                nursery.start_soon(adapter.prompt, "/delay 1000")
                while adapter.operation_id is None:
                    await trio.sleep(0.01)
                rid, data = adapter.core.rpc.send_request("turn/steer", {
                    "threadId": adapter.agent_session_id,
                    "input": [{"type": "text", "text": "stale"}], "expectedTurnId": turn_id,
                })
                with pytest.raises(AgentRequestError, match="not the active turn"):
                    await adapter.connection.request(rid, data, timeout_s=5)
                await adapter.cancel()
            # The steer is a user message of the session.
            assert await answer(adapter, "/recall") == (
                "recall: /delay 1500 | turn left | /delay 1000")


async def test_acp_cannot_steer(agent_env: dict[str, str], tmp_path: Path) -> None:
    """Without the steering extension advertised: refused before anything is written."""
    with trio.fail_after(TEST_S):
        async with mock_agent("acp", agent_env, tmp_path) as (adapter, written):
            await adapter.new_session(str(tmp_path))
            with pytest.raises(SteerUnsupported):
                await adapter.steer("x")
            assert not [m for m in written.lines() if m.get("method") == "_session/steering"]


async def test_acp_steering_extension_reaches_the_running_turn(
    agent_env: dict[str, str], tmp_path: Path,
) -> None:
    with trio.fail_after(TEST_S):
        async with mock_agent("acp", agent_env, tmp_path, steering=True) as (adapter, written):
            assert isinstance(adapter, AcpAdapter) and adapter.core.can_steer
            session_id = await adapter.new_session(str(tmp_path))
            turn = await steer_mid_turn(
                adapter, written, "/delay 1500", "turn left", "_session/steering")
            assert turn.line["params"] == {
                "sessionId": session_id,
                "prompt": [{"type": "text", "text": "turn left"}],
                "_meta": {"steering": {"idleBehavior": "promptRequired"}},
            }
            # One turn, one answer: the steer went into it.
            assert turn.ended.stop_reason == "end_turn"
            assert "steered: turn left" in turn.chunks
            # The turn is over: refused before anything is written.
            with pytest.raises(LocalProtocolError, match="no turn to steer"):
                await adapter.steer("too late")
            # An agent whose turn ended while the steer was on its way says so
            # (promptRequired): nothing was delivered.
            rid, data = adapter.core.rpc.send_request("_session/steering", {
                "sessionId": session_id, "prompt": [{"type": "text", "text": "late"}],
                "_meta": {"steering": {"idleBehavior": "promptRequired"}}})
            result = await adapter.connection.request(rid, data, timeout_s=5)
            assert result["outcome"] == "promptRequired"
            assert await answer(adapter, "/recall") == "recall: /delay 1500 | turn left"
