"""The fake provider's ``STEPS`` script (``FakeProvider.step_commands``), read as an agent
reads it: a raw HTTP client posts the request the agent would (the prompt, then the
conversation with each earlier shell call and its result) and parses the SSE body for
what the model asks for next: command 1, command 2, then a text answer."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fake_provider import FakeProvider

COMMANDS = ("sleep 2; echo one > one.txt", "echo two > two.txt")


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(step_commands=COMMANDS) as p:
        yield p


def _events(provider: FakeProvider, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", provider.port, timeout=10)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        raw = conn.getresponse().read().decode()
    finally:
        conn.close()
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: ")]


def _codex_body(done: int) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "input_text", "text": "<environment_context/>"}]},
        {"role": "user", "content": [{"type": "input_text", "text": "STEPS: two commands"}]}]
    for i in range(done):
        items += [{"type": "function_call", "call_id": f"c{i}", "name": "shell_command",
                   "arguments": "{}"},
                  {"type": "function_call_output", "call_id": f"c{i}", "output": "ok"}]
    return {"input": items, "stream": True,
            "tools": [{"type": "function", "name": "shell_command"}]}


def test_codex_is_asked_for_each_command_in_turn_then_text(provider: FakeProvider) -> None:
    asked = []
    for done in range(len(COMMANDS)):
        events = _events(provider, "/v1/responses", _codex_body(done))
        items = [e["item"] for e in events if e["type"] == "response.output_item.done"]
        assert [(i["type"], i["name"]) for i in items] == [("function_call", "shell_command")]
        asked.append(json.loads(items[0]["arguments"])["command"])
    assert asked == list(COMMANDS)
    events = _events(provider, "/v1/responses", _codex_body(len(COMMANDS)))
    assert any(e["type"] == "response.output_text.delta" for e in events)
    assert [r.mode for r in provider.main_streams()] == ["step1", "step2", "quick"]


def _claude_body(done: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>x</system-reminder>"},
        {"type": "text", "text": "STEPS: two commands"}]}]
    for n in range(done):
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash",
                                               "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{n}", "content": "ok"}]}]
    return {"messages": messages, "stream": True, "model": "m", "tools": [{"name": "Bash"}]}


def test_claude_is_asked_for_each_command_in_turn_then_text(provider: FakeProvider) -> None:
    asked = []
    for done in range(len(COMMANDS)):
        events = _events(provider, "/v1/messages", _claude_body(done))
        start = next(e for e in events if e["type"] == "content_block_start")
        assert start["content_block"]["name"] == "Bash"
        args = json.loads("".join(e["delta"]["partial_json"] for e in events
                                  if e["type"] == "content_block_delta"))
        asked.append(args["command"])
        stop = next(e for e in events if e["type"] == "message_delta")
        assert stop["delta"]["stop_reason"] == "tool_use"
    assert asked == list(COMMANDS)
    events = _events(provider, "/v1/messages", _claude_body(len(COMMANDS)))
    assert any(e.get("delta", {}).get("type") == "text_delta" for e in events)
    assert [r.mode for r in provider.main_streams()] == ["step1", "step2", "quick"]
