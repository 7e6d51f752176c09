"""The fake provider's ``SPAWN`` mode (Codex multi-agent), read as Codex 0.171 reads it: no
agent CLI, a raw HTTP client posts the requests Codex would (the request bodies below follow
what the real CLI sent: tests/fixtures/agent-transcripts/codex-0.171-multi-agent.jsonl) and
parses the SSE body for the function call asked for."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fake_provider import FakeProvider
from tests.fake_provider.formats import (
    CODEX_AGENT_TOOLS,
    CODEX_WAIT_AGENT_MS,
    SUBAGENT_PROMPT,
    spawned_agent_id,
)

CHILD = "01a249bd-87fb-7810-8069-510521c13a95"
AGENT_TOOLS = {"type": "namespace", "name": CODEX_AGENT_TOOLS,
               "description": "Tools for spawning and managing sub-agents.",
               "tools": [{"type": "function", "name": n, "parameters": {"type": "object"}}
                         for n in ("close_agent", "resume_agent", "send_input", "spawn_agent",
                                   "wait_agent")]}
SHELL = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}}


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(token_interval_s=0.01, n_tokens=5) as p:
        yield p


def _events(provider: FakeProvider, body: dict[str, Any]) -> list[dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", provider.port, timeout=10)
    try:
        conn.request("POST", "/v1/responses", json.dumps(body),
                     {"Content-Type": "application/json"})
        raw = conn.getresponse().read().decode()
    finally:
        conn.close()
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: ")]


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]}


def _call(events: list[dict[str, Any]]) -> tuple[str, str | None, dict[str, Any]]:
    [item] = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert item["type"] == "function_call", item
    return item["name"], item.get("namespace"), json.loads(item["arguments"])


def _text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")


def _done(name: str, args: dict[str, Any], call_id: str, output: str) -> list[dict[str, Any]]:
    return [{"type": "function_call", "status": "completed", "name": name,
             "namespace": CODEX_AGENT_TOOLS, "arguments": json.dumps(args), "call_id": call_id},
            {"type": "function_call_output", "call_id": call_id, "output": output}]


def test_spawn_then_wait_on_the_child_then_text(provider: FakeProvider) -> None:
    tools = [SHELL, AGENT_TOOLS]
    history = [_user("<environment_context>x</environment_context>"),
               _user("SPAWN: delegate to a subagent")]
    name, namespace, args = _call(_events(provider, {"input": history, "tools": tools}))
    assert (name, namespace, args) == ("spawn_agent", CODEX_AGENT_TOOLS,
                                       {"message": SUBAGENT_PROMPT})

    # spawn_agent's output (Codex 0.171) names the child: the parent waits on it.
    history += _done(name, args, "c1", json.dumps({"agent_id": CHILD, "nickname": "Mill"}))
    name, namespace, args = _call(_events(provider, {"input": history, "tools": tools}))
    assert (name, namespace, args) == ("wait_agent", CODEX_AGENT_TOOLS, {
        "targets": [CHILD], "timeout_ms": CODEX_WAIT_AGENT_MS})

    # The wait returned (here: timed out, as after the child's interrupt); Codex adds a
    # <subagent_notification> user message; the parent answers with text.
    history += _done(name, args, "c2", '{"status":{},"timed_out":true}')
    history.append(_user("<subagent_notification>\n{}\n</subagent_notification>"))
    assert _text(_events(provider, {"input": history, "tools": tools})) == "tok0 tok1 tok2 "

    # The child's own request (no agent tools at depth 1) streams slowly.
    child = [_user("<environment_context>x</environment_context>"), _user(SUBAGENT_PROMPT)]
    assert _text(_events(provider, {"input": child, "tools": [SHELL]})) == (
        "tok0 tok1 tok2 tok3 tok4 ")
    assert [r.mode for r in provider.main_streams()] == ["spawn", "wait-agent", "quick", "slow"]
    assert all(r.completed for r in provider.main_streams())


def test_a_new_spawn_prompt_starts_over_and_no_agent_tools_says_so(
        provider: FakeProvider) -> None:
    # An earlier SPAWN turn's calls do not count for the next SPAWN prompt.
    earlier = [_user("SPAWN: one"),
               *_done("spawn_agent", {"message": "x"}, "c1", json.dumps({"agent_id": CHILD}))]
    name, _, _ = _call(_events(provider, {"input": [*earlier, _user("SPAWN: two")],
                                          "tools": [SHELL, AGENT_TOOLS]}))
    assert name == "spawn_agent"
    # Without Codex's multi-agent tools the model cannot spawn: the stream says so.
    _events(provider, {"input": [_user("SPAWN: three")], "tools": [SHELL]})
    assert provider.main_streams()[-1].mode == "no-agent-tool"


def test_spawned_agent_id() -> None:
    assert spawned_agent_id(json.dumps({"agent_id": CHILD, "nickname": "Mill"})) == CHILD
    assert spawned_agent_id(f"spawned {CHILD} (Mill)") == CHILD
