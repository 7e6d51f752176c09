"""The fake provider's Chat Completions stream, read the way an OpenAI client reads it.

No agent CLI needed: a raw HTTP client posts ``/v1/chat/completions`` and parses
the SSE body (``data: {chunk}`` events, ``data: [DONE]`` last), accumulating
``delta.content`` and ``delta.tool_calls`` by index as the SDKs do.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.fake_provider import FakeProvider

SHELL_TOOLS = {
    "qwen": {"name": "run_shell_command", "parameters": {"type": "object", "properties": {
        "command": {"type": "string"}, "is_background": {"type": "boolean"},
        "description": {"type": "string"}}}},
    "opencode": {"name": "bash", "parameters": {"type": "object", "properties": {
        "command": {"type": "string"}, "description": {"type": "string"}}}},
}


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(token_interval_s=0.05, n_tokens=40, wait_s=5.0,
                      tool_command="touch x") as p:
        yield p


@contextmanager
def _post(provider: FakeProvider, body: dict[str, Any]) -> Iterator[http.client.HTTPResponse]:
    conn = http.client.HTTPConnection("127.0.0.1", provider.port, timeout=10)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        try:
            yield resp
        finally:
            resp.close()  # the socket stays open until the response lets go of it too
    finally:
        conn.close()


def _events(provider: FakeProvider, body: dict[str, Any]) -> list[Any]:
    """Each ``data:`` payload, parsed; ``[DONE]`` kept as the string."""
    with _post(provider, body) as resp:
        assert resp.status == 200
        assert resp.getheader("Content-Type") == "text/event-stream"
        raw = resp.read().decode()
    out: list[Any] = []
    for block in raw.split("\n\n"):
        if not block.strip():
            continue
        (line,) = block.splitlines()
        assert line.startswith("data: "), line
        data = line[len("data: "):]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def _request(text: str, *, tools: str | None = "opencode", stream: bool = True,
             usage: bool = True, history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "fake-model", "stream": stream,
        "messages": [{"role": "system", "content": "be brief"},
                     {"role": "user", "content": [{"type": "text", "text": text}]},
                     *(history or [])],
    }
    if tools:
        body["tools"] = [{"type": "function", "function": SHELL_TOOLS[tools]}]
    if usage:
        body["stream_options"] = {"include_usage": True}
    return body


def _accumulate(events: list[Any]) -> tuple[str, dict[int, dict[str, str]], list[str]]:
    """(text, tool calls by index, finish reasons), as a client builds them."""
    text = ""
    calls: dict[int, dict[str, str]] = {}
    finishes: list[str] = []
    for ev in events[:-1]:
        assert ev["object"] == "chat.completion.chunk"
        for choice in ev["choices"]:
            delta = choice["delta"]
            text += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                call = calls.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
                call["id"] += tc.get("id", "")
                fn = tc.get("function") or {}
                call["name"] += fn.get("name", "")
                call["arguments"] += fn.get("arguments", "")
            if choice["finish_reason"]:
                finishes.append(choice["finish_reason"])
    return text, calls, finishes


def test_text_stream_ends_with_usage_then_done(provider: FakeProvider) -> None:
    events = _events(provider, _request("QUICK: hi"))
    assert events[-1] == "[DONE]"
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    text, calls, finishes = _accumulate(events)
    assert (text, calls, finishes) == ("tok0 tok1 tok2 ", {}, ["stop"])
    assert events[-2]["choices"] == [] and events[-2]["usage"]["completion_tokens"] == 3
    assert [r.mode for r in provider.snapshot()] == ["quick"]


def test_no_usage_chunk_unless_asked(provider: FakeProvider) -> None:
    events = _events(provider, _request("QUICK: hi", usage=False))
    assert all("usage" not in ev for ev in events[:-1])


@pytest.mark.parametrize("agent", ["qwen", "opencode"])
def test_tool_call_in_deltas_then_text_after_the_result(
    provider: FakeProvider, agent: str
) -> None:
    events = _events(provider, _request("TOOL: make it", tools=agent))
    text, calls, finishes = _accumulate(events)
    assert text == "" and finishes == ["tool_calls"]
    (call,) = calls.values()
    assert call["name"] == SHELL_TOOLS[agent]["name"] and call["id"]
    args = json.loads(call["arguments"])
    assert args["command"] == "touch x"
    assert set(args) <= set(SHELL_TOOLS[agent]["parameters"]["properties"])  # type: ignore[index]
    # The arguments arrive in more than one delta, as from the real API.
    pieces = [tc for ev in events[:-1] for c in ev["choices"]
              for tc in c["delta"].get("tool_calls") or []]
    assert len(pieces) >= 3 and "id" in pieces[0] and "id" not in pieces[1]

    history: list[dict[str, Any]] = [{"role": "assistant", "content": None, "tool_calls": [
                   {"id": call["id"], "type": "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]}}]},
               {"role": "tool", "tool_call_id": call["id"], "content": ""}]
    after = _events(provider, _request("TOOL: make it", tools=agent, history=history))
    assert _accumulate(after)[0] == "tok0 tok1 tok2 "
    assert [r.mode for r in provider.snapshot()] == ["tool", "quick"]


def test_side_requests_answer_at_once(provider: FakeProvider) -> None:
    # No tools offered (a title request): a short stream, whatever the marker.
    events = _events(provider, _request("SLOW: a title please", tools=None))
    assert _accumulate(events)[0] == "tok0 tok1 tok2 "
    # Not streamed: one chat.completion.
    with _post(provider, _request("SLOW: hi", stream=False)) as resp:
        body = json.loads(resp.read())
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert [r.mode for r in provider.snapshot()] == ["side"]


def test_client_going_away_mid_stream_is_recorded_as_aborted(provider: FakeProvider) -> None:
    with _post(provider, _request("SLOW: many tokens")) as resp:
        assert resp.readline().startswith(b"data: ")
    deadline = time.monotonic() + 5
    while provider.snapshot()[0].open and time.monotonic() < deadline:
        time.sleep(0.02)
    (rec,) = provider.snapshot()
    assert (rec.api, rec.mode, rec.aborted, rec.completed) == ("chat", "slow", True, False)
    assert rec.tokens_sent < 40
