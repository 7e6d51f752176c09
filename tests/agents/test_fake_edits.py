"""The fake provider's ``EditPlan`` (tests/fake_provider/edits.py), read as an agent
reads it: no agent CLI, a raw HTTP client posts the request the agent would
(the prompt, then the conversation with each earlier tool call and its result)
and parses the SSE body for the tool call asked for."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fake_provider import FakeProvider
from tests.fake_provider.edits import EditPlan, FileEdit, apply_patch_text

ROOT = "/srv/app"
PLAN = EditPlan(ROOT, (FileEdit("new.txt", None, "a\nb\n"), FileEdit("old.txt", "x\n", "y\n"),
                       FileEdit("gone.txt", "z\n", None)))


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(wait_s=0.3) as p:
        yield p


def _events(provider: FakeProvider, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", provider.port, timeout=10)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        raw = conn.getresponse().read().decode()
    finally:
        conn.close()
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: ")]


def test_apply_patch_text_adds_updates_and_deletes() -> None:
    assert apply_patch_text(PLAN.edits[0]) == (
        "*** Begin Patch\n*** Add File: new.txt\n+a\n+b\n*** End Patch\n")
    assert apply_patch_text(PLAN.edits[1]) == (
        "*** Begin Patch\n*** Update File: old.txt\n@@\n-x\n+y\n*** End Patch\n")
    assert apply_patch_text(PLAN.edits[2]) == (
        "*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch\n")
    with pytest.raises(ValueError, match="newline"):
        FileEdit("a", None, "no newline")


def _codex_body(done: int) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "input_text", "text": "<environment_context/>"}]},
        {"role": "user", "content": [{"type": "input_text", "text": "EDIT: the files"}]}]
    for i in range(done):
        items += [{"type": "custom_tool_call", "call_id": f"c{i}", "name": "apply_patch",
                   "input": "..."},
                  {"type": "custom_tool_call_output", "call_id": f"c{i}", "output": "ok"}]
    return {"input": items, "stream": True,
            "tools": [{"type": "custom", "name": "apply_patch"}]}


def test_codex_gets_one_apply_patch_call_per_edit_then_text(provider: FakeProvider) -> None:
    provider.edit_plan = PLAN
    for done, edit in enumerate(PLAN.edits):
        events = _events(provider, "/v1/responses", _codex_body(done))
        items = [e["item"] for e in events if e["type"] == "response.output_item.done"]
        assert [(i["type"], i["name"], i["input"]) for i in items] == [
            ("custom_tool_call", "apply_patch", apply_patch_text(edit))]
        deltas = "".join(e["delta"] for e in events
                         if e["type"] == "response.custom_tool_call_input.delta")
        assert deltas == apply_patch_text(edit)
    events = _events(provider, "/v1/responses", _codex_body(len(PLAN.edits)))
    assert any(e["type"] == "response.output_text.delta" for e in events)
    assert [r.mode for r in provider.main_streams()] == ["edit", "edit", "edit", "quick"]

    # Without the apply_patch tool the model cannot edit: the stream says so.
    body = {**_codex_body(0), "tools": []}
    _events(provider, "/v1/responses", body)
    assert provider.main_streams()[-1].mode == "no-edit-tool"


def _claude_body(done: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>x</system-reminder>"},
        {"type": "text", "text": "EDIT: the files"}]}]
    for n, (name, args) in enumerate(done):
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": name,
                                               "input": args}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{n}", "content": "ok"},
                {"type": "text", "text": "<system-reminder>y</system-reminder>"}]}]
    return {"messages": messages, "stream": True, "model": "m", "tools": [{"name": "Write"}]}


def test_claude_writes_new_files_and_reads_before_it_edits(provider: FakeProvider) -> None:
    plan = EditPlan(ROOT, PLAN.edits[:2], wait_before=1)
    provider.edit_plan = plan
    done: list[tuple[str, dict[str, Any]]] = []
    for _ in range(3):
        events = _events(provider, "/v1/messages", _claude_body(done))
        start = next(e for e in events if e["type"] == "content_block_start")
        args = json.loads("".join(e["delta"]["partial_json"] for e in events
                                  if e["type"] == "content_block_delta"))
        done.append((start["content_block"]["name"], args))
    assert done == [
        ("Write", {"file_path": f"{ROOT}/new.txt", "content": "a\nb\n"}),
        ("Read", {"file_path": f"{ROOT}/old.txt"}),
        ("Edit", {"file_path": f"{ROOT}/old.txt", "old_string": "x\n", "new_string": "y\n"})]
    # The pause comes before the second edit's first step (its Read), not before its Edit.
    assert [r.mode for r in provider.main_streams()] == ["edit", "wait", "edit"]
    assert all(r.completed for r in provider.main_streams())
    events = _events(provider, "/v1/messages", _claude_body(done))
    assert any(e.get("delta", {}).get("type") == "text_delta" for e in events)
    with pytest.raises(ValueError, match="delete"):
        PLAN.claude_steps()
