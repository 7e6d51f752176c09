"""The mock agent's edits (``/write``, ``/append``, ``/rm``, ``/edits N``) as real
subprocesses in both dialects: the files change on disk under the session's cwd, and each
edit is a tool call whose payload carries the diff as real agents report it (ACP content
``{type: "diff", path, oldText, newText}``; Codex ``fileChange`` ``changes``)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from protocols.adapters import AcpAdapter, AgentAdapter, CodexAdapter, ProtocolName
from protocols.events import AgentEvent, MessageChunk, ToolCallStarted, ToolCallUpdated, TurnEnded
from protocols.process import start_agent_process, terminate_group

from .conftest import SETUP_S, TEST_TIMEOUTS
from .helpers import MOCK_AGENT, RecordingSendStream

TEST_S = 30.0


@asynccontextmanager
async def agent_in(protocol: ProtocolName, env: dict[str, str],
                   project: Path) -> AsyncIterator[AgentAdapter]:
    """A mock agent with a session whose cwd is ``project`` (the process runs elsewhere)."""
    proc = await start_agent_process([*MOCK_AGENT, "--protocol", protocol],
                                     cwd=str(project.parent), env=env)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        cls = AcpAdapter if protocol == "acp" else CodexAdapter
        adapter = cls(RecordingSendStream(proc.stdin), proc.stdout, timeouts=TEST_TIMEOUTS)
        async with trio.open_nursery() as nursery:
            await nursery.start(adapter.connection.run)
            with trio.fail_after(SETUP_S):
                await adapter.initialize()
                await adapter.new_session(str(project))
            try:
                yield adapter
            finally:
                nursery.cancel_scope.cancel()
    finally:
        await terminate_group(proc, grace_s=1.0)


async def turn(adapter: AgentAdapter, text: str) -> tuple[TurnEnded, list[AgentEvent]]:
    ended = await adapter.prompt(text)
    events: list[AgentEvent] = []
    while True:
        try:
            events.append(adapter.events.receive_nowait())
        except trio.WouldBlock:
            return ended, events


def reported(protocol: ProtocolName, events: list[AgentEvent]) -> list[dict[str, Any]]:
    """Each edit as the agent reported it at its start: ``{path, old, new}`` for ACP,
    ``{path, kind, diff}`` for Codex."""
    out: list[dict[str, Any]] = []
    for ev in events:
        if not isinstance(ev, ToolCallStarted):
            continue
        if protocol == "acp":
            [item] = ev.raw["content"]
            assert item["type"] == "diff"
            out.append({"path": item["path"], "old": item["oldText"], "new": item["newText"]})
        else:
            assert ev.raw["type"] == "fileChange"
            [change] = ev.raw["changes"]
            out.append({"path": change["path"], "kind": change["kind"]["type"],
                        "diff": change["diff"]})
    return out


def completed(events: list[AgentEvent]) -> int:
    return sum(1 for ev in events if isinstance(ev, ToolCallUpdated) and ev.status == "completed")


async def test_write_append_and_rm_edit_the_sessions_cwd_and_report_the_diff(
        protocol: ProtocolName, agent_env: dict[str, str], tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    target = project / "notes" / "a.txt"
    with trio.fail_after(TEST_S):
        async with agent_in(protocol, agent_env, project) as adapter:
            ended, events = await turn(adapter, "/write notes/a.txt hello world")
            assert ended.stop_reason == "end_turn"
            assert target.read_text() == "hello world\n"
            [first] = reported(protocol, events)
            assert completed(events) == 1
            assert first["path"] == str(target)

            _, events = await turn(adapter, "/append notes/a.txt second\\nthird")
            assert target.read_text() == "hello world\nsecond\nthird\n"
            [second] = reported(protocol, events)

            _, events = await turn(adapter, "/rm notes/a.txt")
            assert not target.exists()
            [third] = reported(protocol, events)

            _, events = await turn(adapter, "/rm notes/a.txt")
            text = "".join(ev.text for ev in events if isinstance(ev, MessageChunk))
            assert "no such file" in text and reported(protocol, events) == []
    if protocol == "acp":
        assert (first["old"], first["new"]) == (None, "hello world\n")
        assert (second["old"], second["new"]) == ("hello world\n",
                                                  "hello world\nsecond\nthird\n")
        assert (third["old"], third["new"]) == ("hello world\nsecond\nthird\n", "")
    else:
        assert first["kind"] == "add" and "+hello world" in first["diff"]
        assert second["kind"] == "update" and "+second\n+third\n" in second["diff"]
        assert third["kind"] == "delete" and "-hello world" in third["diff"]


async def test_edits_n_writes_one_file_per_tick_and_stops_at_a_cancel(
        protocol: ProtocolName, agent_env: dict[str, str], tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    with trio.fail_after(TEST_S):
        async with agent_in(protocol, agent_env, project) as adapter:
            ended, events = await turn(adapter, "/edits 3")
            assert ended.stop_reason == "end_turn"
            assert sorted(os.listdir(project)) == ["edit-1.txt", "edit-2.txt", "edit-3.txt"]
            assert (project / "edit-2.txt").read_text() == "edit 2\n"
            assert len(reported(protocol, events)) == completed(events) == 3
            for name in os.listdir(project):
                (project / name).unlink()

            result: list[TurnEnded] = []

            async def run() -> None:
                result.append(await adapter.prompt("/edits 50"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                while len(os.listdir(project)) < 2:
                    await trio.sleep(0.02)
                await adapter.cancel()
            written = len(os.listdir(project))
            assert result[0].stop_reason == "cancelled"
            assert 2 <= written < 50
            await trio.sleep(0.3)
            assert len(os.listdir(project)) == written, "no write after the cancel"
