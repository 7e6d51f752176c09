"""File edits asked for the way a real model asks for them (tests only).

A test gives the provider an ``EditPlan`` (``FakeProvider.edit_plan``): the
files to change under a root, in order.  A prompt carrying the ``EDIT`` marker
then gets, request by request, one tool call per step, each in the agent's own
edit tool, as the real API streams it:

- Responses (Codex): a call of the freeform ``apply_patch`` tool (a
  ``custom_tool_call`` whose input is the patch, sent in two deltas), one edit
  per patch; ``*** Add File``, ``*** Update File`` (the whole old content
  replaced) and ``*** Delete File``.
- Anthropic Messages (Claude): ``Write`` for a new file; ``Read`` then
  ``Edit`` for an existing one (Claude Code edits only files it has read).

Which step comes next is counted from the request itself (the tool calls in
the conversation since the prompt), so a retried request repeats its step and
a new prompt starts over.  With ``wait_before = k`` the stream that would carry
edit ``k`` opens and stays silent (``wait_s``): a turn to cancel half-way, with
exactly ``k`` edits on disk.  Once every step was asked for, the answer is a
short text.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .formats import Item, _body_text, _sse

__all__ = ["EditPlan", "FileEdit", "anthropic_prompt", "apply_patch_text", "edit_mode",
           "responses_steps_done"]

_ids = itertools.count(1)


@dataclass(frozen=True)
class FileEdit:
    """``path`` relative to the plan's root; ``before`` None: a new file;
    ``after`` None: the file is deleted.  Texts end with a newline (a patch
    is made of whole lines)."""

    path: str
    before: str | None
    after: str | None

    def __post_init__(self) -> None:
        for text in (self.before, self.after):
            if text is not None and not text.endswith("\n"):
                raise ValueError(f"{self.path}: the texts of an edit end with a newline")
        if self.before is None and self.after is None:
            raise ValueError(f"{self.path}: an edit creates, changes or deletes a file")


@dataclass(frozen=True)
class EditPlan:
    #: Absolute: Claude's tools take absolute paths, Codex's patch takes them relative.
    root: str
    edits: tuple[FileEdit, ...]
    #: The index of the edit whose stream stays silent; None: no pause.
    wait_before: int | None = None

    def claude_steps(self) -> list[tuple[int, str, dict[str, Any]]]:
        """(edit index, tool name, input) of each Anthropic tool call, in order."""
        steps: list[tuple[int, str, dict[str, Any]]] = []
        for i, e in enumerate(self.edits):
            path = f"{self.root.rstrip('/')}/{e.path}"
            if e.after is None:
                raise ValueError(f"{e.path}: Claude has no delete tool")
            if e.before is None:
                steps.append((i, "Write", {"file_path": path, "content": e.after}))
            else:
                steps.append((i, "Read", {"file_path": path}))
                steps.append((i, "Edit", {"file_path": path, "old_string": e.before,
                                          "new_string": e.after}))
        return steps


def apply_patch_text(edit: FileEdit) -> str:
    """The patch of one edit, in the grammar Codex's apply_patch tool declares."""
    lines = ["*** Begin Patch"]
    if edit.after is None:
        lines.append(f"*** Delete File: {edit.path}")
    elif edit.before is None:
        lines.append(f"*** Add File: {edit.path}")
        lines += [f"+{line}" for line in edit.after.splitlines()]
    else:
        lines += [f"*** Update File: {edit.path}", "@@"]
        lines += [f"-{line}" for line in edit.before.splitlines()]
        lines += [f"+{line}" for line in edit.after.splitlines()]
    lines.append("*** End Patch")
    return "\n".join(lines) + "\n"


def edit_mode(done: int, steps: list[int], wait_before: int | None) -> str:
    """``steps``: the edit index of each step.  ``edit`` (the next tool call),
    ``wait`` (silent before edit ``wait_before``) or ``quick`` (all asked for)."""
    if done >= len(steps):
        return "quick"
    first_of_edit = done == 0 or steps[done - 1] != steps[done]
    return "wait" if first_of_edit and steps[done] == wait_before else "edit"


# -- Responses (Codex) ----------------------------------------------------------

def responses_steps_done(body: Any) -> int:
    """Tool calls in the conversation after the latest real user prompt."""
    items = body.get("input") if isinstance(body, dict) else None
    items = [i for i in items or [] if isinstance(i, dict)]
    start = 0
    for n, item in enumerate(items):
        if item.get("role") == "user":
            text = _body_text(item.get("content")).strip()
            if text and not text.startswith("<"):
                start = n + 1
    return sum(1 for item in items[start:]
               if str(item.get("type", "")) in ("function_call", "custom_tool_call"))


def responses_edit_events(plan: EditPlan, done: int, *, wait_s: float) -> Iterator[Item]:
    rid = f"resp_edit_{next(_ids)}"
    yield _sse("response.created", {"type": "response.created",
                                    "response": {"id": rid, "status": "in_progress"}})
    mode = edit_mode(done, list(range(len(plan.edits))), plan.wait_before)
    if mode == "wait":
        yield wait_s
    patch = apply_patch_text(plan.edits[done])
    item = {"type": "custom_tool_call", "id": f"ctc_{rid}", "call_id": f"call_{rid}",
            "name": "apply_patch", "input": patch, "status": "completed"}
    yield _sse("response.output_item.added", {
        "type": "response.output_item.added", "output_index": 0,
        "item": {**item, "input": "", "status": "in_progress"}})
    half = len(patch) // 2
    for piece in (patch[:half], patch[half:]):
        yield _sse("response.custom_tool_call_input.delta", {
            "type": "response.custom_tool_call_input.delta", "item_id": item["id"],
            "output_index": 0, "delta": piece})
    yield _sse("response.custom_tool_call_input.done", {
        "type": "response.custom_tool_call_input.done", "item_id": item["id"],
        "output_index": 0, "input": patch})
    yield _sse("response.output_item.done", {
        "type": "response.output_item.done", "output_index": 0, "item": item})
    yield _sse("response.completed", {"type": "response.completed", "response": {
        "id": rid, "status": "completed", "output": [],
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 11}}})


# -- Anthropic Messages (Claude) ------------------------------------------------

def anthropic_prompt(body: dict[str, Any]) -> tuple[str, int]:
    """The latest user message that carries prompt text (not only tool results
    and reminders), and the ``tool_use`` blocks of the assistant after it."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    start, prompt = 0, ""
    for n, msg in enumerate(messages):
        content = msg.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        texts = [str(b.get("text", "")).strip() for b in blocks
                 if isinstance(b, dict) and b.get("type") == "text"]
        texts = [t for t in texts if t and not t.startswith("<")]
        if msg.get("role") == "user" and texts:
            start, prompt = n + 1, " ".join(texts)
    done = sum(1 for msg in messages[start:] if msg.get("role") == "assistant"
               and isinstance(msg.get("content"), list)
               for b in msg["content"] if isinstance(b, dict) and b.get("type") == "tool_use")
    return prompt, done


def anthropic_edit_events(plan: EditPlan, done: int, *, wait_s: float,
                          model: str) -> Iterator[Item]:
    steps = plan.claude_steps()
    yield _sse("message_start", {"type": "message_start", "message": {
        "id": f"msg_edit_{next(_ids)}", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}})
    if edit_mode(done, [s[0] for s in steps], plan.wait_before) == "wait":
        yield wait_s
    _, name, args = steps[done]
    raw = json.dumps(args)
    half = len(raw) // 2
    yield _sse("content_block_start", {
        "type": "content_block_start", "index": 0,
        "content_block": {"type": "tool_use", "id": f"toolu_edit_{next(_ids):06d}",
                          "name": name, "input": {}}})
    for piece in (raw[:half], raw[half:]):
        yield _sse("content_block_delta", {
            "type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": piece}})
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield _sse("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                                 "usage": {"output_tokens": 1}})
    yield _sse("message_stop", {"type": "message_stop"})
