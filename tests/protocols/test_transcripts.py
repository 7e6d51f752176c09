"""Replay real agent traffic through the sans-IO cores.

Each transcript (``../shared/reference/agent-transcripts`` next to the
checkout, or the repository's copy in tests/fixtures; captured from the agent
CLIs) is walked in order: a ``->`` line is produced by calling the core as our
adapter would, and must equal what the real client wrote (request ids aside);
a ``<-`` line is fed to the core, in one piece or in small chunks.
Then the events must be what a user of the real agent saw.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from protocols.acp import AcpClient
from protocols.codex import CodexClient
from protocols.events import (
    AgentNotice,
    MessageChunk,
    OtherUpdate,
    PermissionOption,
    PermissionRequested,
    PermissionResolved,
    TurnEnded,
    UsageUpdated,
)
from protocols.turnstate import TurnState

from .helpers import FIXTURE_TRANSCRIPTS, SHARED_TRANSCRIPTS, TRANSCRIPTS, drain, parse_lines

ACP_FILES = [
    "auggie_0.36.0.jsonl",
    "claude_agent_acp_0.101.0.jsonl",
    "claude_code_acp_0.16.2.jsonl",
    "gemini_cli_0.61.0.jsonl",
]
CODEX_FILES = ["codex_app_server.jsonl", "codex_interrupt_then_followup.jsonl"]
#: Captured for this repository (not in ``../shared``): read from tests/fixtures only.
#: Codex 0.171 multi-agent: a ``spawn_agent`` child run to its end, a child interrupted
#: on its own, then the parent interrupted while its child runs (tests/fake_provider
#: ``SPAWN``).
CODEX_MULTI_AGENT = "codex-0.171-multi-agent.jsonl"
LOCAL_FILES = [CODEX_MULTI_AGENT]
#: None = each message in one piece; otherwise chunks of this many bytes.
CHUNKINGS = [None, 1, 7]


def test_the_copy_is_the_reference() -> None:
    """The repository's copy holds every transcript, as ``../shared`` has it (and the
    ones captured here)."""
    names = sorted(ACP_FILES + CODEX_FILES)
    assert sorted(p.name for p in FIXTURE_TRANSCRIPTS.glob("*.jsonl")) == sorted(
        names + LOCAL_FILES)
    if not SHARED_TRANSCRIPTS.is_dir():
        pytest.skip("no ../shared next to this checkout: only the copy is here")
    for name in names:
        assert (FIXTURE_TRANSCRIPTS / name).read_bytes() == (SHARED_TRANSCRIPTS / name).read_bytes()


def load(name: str) -> list[dict[str, Any]]:
    path: Path = TRANSCRIPTS / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class Replay:
    core: AcpClient | CodexClient
    chunk: int | None
    #: The transcript's ids for requests we sent -> the ids our core chose.
    ids: dict[Any, Any] = field(default_factory=dict)
    events: list[object] = field(default_factory=list)

    def wrote(self, theirs: dict[str, Any], ours: bytes) -> None:
        """Our core's bytes must be the real client's message, ids mapped."""
        [mine] = parse_lines(ours)
        if "id" in theirs and "method" in theirs:
            self.ids[theirs["id"]] = mine["id"]
            theirs = {**theirs, "id": mine["id"]}
        assert mine == theirs

    def feed(self, msg: dict[str, Any]) -> None:
        if "method" not in msg and msg.get("id") in self.ids:
            msg = {**msg, "id": self.ids[msg["id"]]}
        data = json.dumps(msg).encode() + b"\n"
        step = self.chunk or len(data)
        for i in range(0, len(data), step):
            self.core.receive_data(data[i : i + step])
            self.events += drain(self.core)
        # Real agents never make the core refuse or answer anything on its own.
        assert self.core.data_to_send() == b""

    def of(self, cls: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, cls)]


def replay_acp(name: str, chunk: int | None) -> Replay:
    # Captured from v1 clients: the v1 initialize is the one to compare with.
    r = Replay(AcpClient(acp_version=1), chunk)
    core = r.core
    assert isinstance(core, AcpClient)
    for rec in load(name):
        msg = rec["msg"]
        if rec["dir"] == "<-":
            r.feed(msg)
            continue
        match msg.get("method"):
            case "initialize":
                # Recorded before the subagents opt-in (ACP 2026-11-20): ours adds it.
                caps = {**msg["params"]["clientCapabilities"], "subagents": {}}
                r.wrote({**msg, "params": {**msg["params"], "clientCapabilities": caps}},
                        core.initialize()[1])
            case "session/new":
                r.wrote(msg, core.new_session(msg["params"]["cwd"])[1])
            case "session/prompt":
                [block] = msg["params"]["prompt"]
                r.wrote(msg, core.prompt(block["text"])[1])
            case "session/cancel":
                r.wrote(msg, core.cancel())
            case None:  # our answer to the agent's permission request
                option = msg["result"]["outcome"]["optionId"]
                r.wrote(msg, core.respond_permission(str(msg["id"]), option))
            case other:
                raise AssertionError(
                    f"transcript has a client call the test does not know: {other}"
                )
    return r


def _agent_chunks(name: str) -> list[str]:
    return [
        rec["msg"]["params"]["update"]["content"]["text"]
        for rec in load(name)
        if rec["dir"] == "<-"
        and rec["msg"].get("method") == "session/update"
        and rec["msg"]["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]


@pytest.mark.parametrize("chunk", CHUNKINGS)
@pytest.mark.parametrize("name", ACP_FILES)
def test_acp_transcript(name: str, chunk: int | None) -> None:
    r = replay_acp(name, chunk)
    assert [c.text for c in r.of(MessageChunk)] == _agent_chunks(name)
    expected_stops = ["cancelled", "end_turn"] if name.startswith("auggie") else ["cancelled"]
    assert [t.stop_reason for t in r.of(TurnEnded)] == expected_stops
    # Every update kind they send is read (options, commands, usage): none is
    # passed through, none warned about.
    assert r.of(AgentNotice) == []
    assert r.of(OtherUpdate) == []
    assert r.core.turn.state is TurnState.IDLE


def test_claude_agent_acp_usage_update_and_message_ids() -> None:
    r = replay_acp("claude_agent_acp_0.101.0.jsonl", None)
    assert r.of(UsageUpdated) == [UsageUpdated(usage={
        "input_tokens": None, "output_tokens": None, "context_used": 11, "context_size": 200000,
        "cost": None})]
    assert {c.message_id for c in r.of(MessageChunk)} == {"msg_4e5ea8b2f3474abbaafc"}


def test_auggie_permission_request() -> None:
    r = replay_acp("auggie_0.36.0.jsonl", None)
    assert r.of(PermissionRequested) == [
        PermissionRequested(
            request_id="0",
            title="Workspace Indexing Permission",
            tool_call_id="workspace-indexing-permission",
            options=(
                PermissionOption(
                    option_id="always-enable", name="Always index", kind="allow_always"
                ),
                PermissionOption(
                    option_id="always-disable", name="Never index", kind="reject_always"
                ),
                PermissionOption(
                    option_id="session-enable", name="Index for this session", kind="allow_once"
                ),
                PermissionOption(
                    option_id="session-disable", name="Skip for this session", kind="reject_once"
                ),
            ),
        )
    ]
    assert r.of(PermissionResolved) == [
        PermissionResolved(request_id="0", option_id="session-disable")
    ]
    # The permission came mid-turn and did not end it: the chunks after it belong to it.
    first_end = r.events.index(r.of(TurnEnded)[0])
    assert r.events.index(r.of(PermissionResolved)[0]) < first_end


def replay_codex(name: str, chunk: int | None) -> tuple[Replay, list[str | None]]:
    """Also returns the operation id (turn id) the core held at each interrupt."""
    records = load(name)
    client_info = next(r["msg"] for r in records if r["msg"].get("method") == "initialize")
    info = client_info["params"]["clientInfo"]
    r = Replay(CodexClient(client_name=info["name"], client_version=info["version"]), chunk)
    core = r.core
    assert isinstance(core, CodexClient)
    at_interrupt: list[str | None] = []
    for rec in records:
        msg = rec["msg"]
        if rec["dir"] == "<-":
            r.feed(msg)
            continue
        match msg.get("method"):
            case "initialize":
                r.wrote(msg, core.initialize()[1])
            case "initialized":
                r.wrote(msg, core.initialized())
            case "thread/start":
                params = dict(msg["params"])
                r.wrote(msg, core.thread_start(params.pop("cwd"), **params)[1])
            case "turn/start":
                [block] = msg["params"]["input"]
                r.wrote(msg, core.turn_start(block["text"])[1])
            case "turn/interrupt":
                at_interrupt.append(core.turn_id)
                r.wrote(msg, core.cancel())
            case other:
                raise AssertionError(
                    f"transcript has a client call the test does not know: {other}"
                )
    return r, at_interrupt


@pytest.mark.parametrize("chunk", CHUNKINGS)
@pytest.mark.parametrize("name", CODEX_FILES)
def test_codex_transcript(name: str, chunk: int | None) -> None:
    r, at_interrupt = replay_codex(name, chunk)
    records = load(name)
    deltas = [
        rec["msg"]["params"]["delta"]
        for rec in records
        if rec["dir"] == "<-" and rec["msg"].get("method") == "item/agentMessage/delta"
    ]
    assert [c.text for c in r.of(MessageChunk)] == deltas
    turns = [
        rec["msg"]["params"]["turn"]
        for rec in records
        if rec["dir"] == "<-" and rec["msg"].get("method") == "turn/completed"
    ]
    # interrupted -> cancelled; completed -> end_turn; each names its turn.
    expected = [TurnEnded(stop_reason="cancelled", turn_id=turns[0]["id"])]
    if name == "codex_interrupt_then_followup.jsonl":
        assert turns[1]["status"] == "completed"
        expected.append(TurnEnded(stop_reason="end_turn", turn_id=turns[1]["id"]))
    assert r.of(TurnEnded) == expected
    # The interrupt named the turn that was running: the operation id.
    assert at_interrupt == [turns[0]["id"]]
    assert r.of(AgentNotice) == []
    # configWarning, warning, thread/status/changed, rateLimits, userMessage items...
    assert "account/rateLimits/updated" in {o.kind for o in r.of(OtherUpdate)}
    core = r.core
    assert isinstance(core, CodexClient)
    assert core.turn.state is TurnState.IDLE
    assert core.turn_id is None


def test_codex_multi_agent_wire_facts() -> None:
    """What Codex 0.171's app-server sends for a ``spawn_agent`` child (the facts the
    Codex core's child threads are built on; the replay through the core is its own)."""
    records = [json.loads(line) for line in (FIXTURE_TRANSCRIPTS / CODEX_MULTI_AGENT)
               .read_text().splitlines() if line.strip()]
    got = [r["msg"] for r in records if r["dir"] == "<-" and "method" in r["msg"]]
    sent = [r["msg"] for r in records if r["dir"] == "->"]
    [parent] = {m["params"]["thread"]["id"] for m in got if m["method"] == "thread/started"}
    # No thread/started for a child: it is named by the parent's spawnAgent item.
    spawns = [m["params"] for m in got if m["method"] == "item/completed"
              and m["params"]["item"]["type"] == "collabAgentToolCall"
              and m["params"]["item"]["tool"] == "spawnAgent"]
    assert len(spawns) == 3
    children = []
    for p in spawns:
        item = p["item"]
        assert p["threadId"] == item["senderThreadId"] == parent
        [child] = item["receiverThreadIds"]
        assert set(item["agentsStates"]) == {child}
        assert item["agentsStates"][child]["status"] in ("pendingInit", "running")
        children.append((child, p["turnId"]))
    ends = {m["params"]["threadId"]: m["params"]["turn"] for m in got
            if m["method"] == "turn/completed"}
    parent_ends = [m["params"]["turn"] for m in got
                   if m["method"] == "turn/completed" and m["params"]["threadId"] == parent]
    for child, parent_turn in children:
        # The child's own turn: its rootTurnId is the parent's turn; its text streams
        # under its own threadId, never the parent's.
        [started] = [m["params"]["turn"] for m in got if m["method"] == "turn/started"
                     and m["params"]["threadId"] == child]
        assert started["rootTurnId"] == parent_turn
        assert any(m["method"] == "item/agentMessage/delta" and m["params"]["threadId"] == child
                   for m in got)
    # 1: the child runs to its end; the parent's wait returns its final text.
    assert ends[children[0][0]]["status"] == "completed"
    waits = [m["params"]["item"] for m in got if m["method"] == "item/completed"
             and m["params"]["item"].get("tool") == "wait"]
    assert waits[0]["agentsStates"][children[0][0]]["status"] == "completed"
    # 2: turn/interrupt of the child's turn: {} then its turn/completed "interrupted";
    # the parent's wait_agent does not return for that (timed out: no states), the
    # parent's turn then completes.
    interrupts = [m for m in sent if m.get("method") == "turn/interrupt"]
    assert interrupts[0]["params"] == {"threadId": children[1][0],
                                       "turnId": started_turn(got, children[1][0])}
    assert ends[children[1][0]]["status"] == "interrupted"
    assert waits[1]["receiverThreadIds"] == [] and waits[1]["agentsStates"] == {}
    # 3: the parent's own interrupt ends the parent's turn only; the child streams on
    # and completes afterwards (Codex does not stop it).
    assert interrupts[1]["params"]["threadId"] == parent
    assert [t["status"] for t in parent_ends] == ["completed", "completed", "interrupted"]
    assert ends[children[2][0]]["status"] == "completed"
    order = [(m["method"], m["params"].get("threadId")) for m in got
             if m["method"] == "turn/completed"]
    assert order[-2:] == [("turn/completed", parent), ("turn/completed", children[2][0])]


def started_turn(got: list[dict[str, Any]], thread_id: str) -> str:
    [turn] = [m["params"]["turn"]["id"] for m in got if m["method"] == "turn/started"
              and m["params"]["threadId"] == thread_id]
    return str(turn)
