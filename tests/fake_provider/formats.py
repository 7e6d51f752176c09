"""The five wire formats, as generators of what to write.

Each ``*_events`` generator yields ``bytes`` to write, ``Token`` (bytes that
carry one streamed text token) or a ``float`` (pause that long, waking early
if the client goes away).  Modes: ``slow``/``quick``/``side`` stream text,
``wait`` opens the stream and stays silent, ``tool`` asks for a shell command.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

_ids = itertools.count(1)

Item = bytes | float


class Token(bytes):
    """Bytes that carry one text token (counted in ``StreamRecord.tokens_sent``)."""


def _texts(n: int) -> list[str]:
    return [f"tok{i} " for i in range(n)]


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _body_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(c.get("text", "")) for c in content if isinstance(c, dict) and "text" in c
        )
    return ""


# -- OpenAI Responses (Codex) -------------------------------------------------

def tool_names(body: Any) -> list[str]:
    tools = body.get("tools") if isinstance(body, dict) else None
    return [str(t.get("name")) for t in tools or [] if isinstance(t, dict)]


def offers_escalation(body: Any) -> bool:
    """Codex's ``exec_command`` takes ``sandbox_permissions``: the model asks to
    run outside the sandbox, which an ``on-request`` policy turns into an
    approval request (codex-acp 2.x runs Codex that way: ``untrusted`` is gone
    from its config)."""
    tools = body.get("tools") if isinstance(body, dict) else None
    for t in tools or []:
        if isinstance(t, dict) and t.get("name") == "exec_command":
            props = (t.get("parameters") or {}).get("properties") or {}
            return "sandbox_permissions" in props
    return False


def responses_last_user(body: Any) -> tuple[str, bool]:
    """The latest real user prompt (tags like ``<environment_context>`` skipped) and
    whether a tool result follows it."""
    items = body.get("input") if isinstance(body, dict) else None
    has_result = False
    for item in reversed(items or []):
        if not isinstance(item, dict):
            continue
        if str(item.get("type", "")).endswith("_call_output"):
            has_result = True
        if item.get("role") == "user":
            text = _body_text(item.get("content")).strip()
            if text and not text.startswith("<"):
                return text, has_result
    return "", has_result


#: ``SPAWN`` (Codex): the namespace of Codex's multi-agent tools (0.171:
#: ``spawn_agent``, ``wait_agent``, ``send_input``, ``close_agent``, ``resume_agent``).
CODEX_AGENT_TOOLS = "multi_agent_v1"
#: ``wait_agent`` waits this long (ms) at most (the least Codex 0.171 takes): an
#: interrupted child is not a final state for it, the wait goes on until then.
CODEX_WAIT_AGENT_MS = 10_000


def tool_namespace(body: Any, name: str) -> str | None:
    """The namespace that offers function tool ``name`` (Codex groups its multi-agent
    tools in one), None when it is a top-level tool or not offered."""
    tools = body.get("tools") if isinstance(body, dict) else None
    for t in tools or []:
        if isinstance(t, dict) and t.get("type") == "namespace":
            for inner in t.get("tools") or []:
                if isinstance(inner, dict) and inner.get("name") == name:
                    return str(t.get("name"))
    return None


def responses_spawn_step(body: Any) -> tuple[str, dict[str, Any]]:
    """``SPAWN``: the parent's next function call, from what the conversation already
    holds after the prompt: first ``spawn_agent`` (its task is ``SUBAGENT_PROMPT``),
    then, once its output names the child, ``wait_agent`` on it; after that ``("", {})``
    (a short text answer ends the turn)."""
    items = [i for i in (body.get("input") if isinstance(body, dict) else None) or []
             if isinstance(i, dict)]
    start = max((n for n, i in enumerate(items) if i.get("role") == "user"
                 and "SPAWN" in _body_text(i.get("content"))), default=-1)
    calls = {str(i.get("call_id")): str(i.get("name")) for i in items[start + 1:]
             if i.get("type") == "function_call"}
    outputs = [(calls.get(str(i.get("call_id"))), i.get("output")) for i in items[start + 1:]
               if i.get("type") == "function_call_output"]
    if not outputs:
        return "spawn_agent", {"message": SUBAGENT_PROMPT}
    name, output = outputs[-1]
    if name == "spawn_agent":
        return "wait_agent", {"targets": [spawned_agent_id(output)],
                              "timeout_ms": CODEX_WAIT_AGENT_MS}
    return "", {}


def spawned_agent_id(output: Any) -> str:
    """The child's id in ``spawn_agent``'s output (JSON ``{"agent_id": ..., "nickname":
    ...}``; any UUID in it otherwise)."""
    text = _body_text(output)
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        for key in ("agent_id", "id", "thread_id"):
            if isinstance(data.get(key), str):
                return str(data[key])
    m = re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", text)
    return m.group(0) if m else text


def _shell_call(tools: list[str], command: str, escalate: bool) -> tuple[str, str]:
    if "shell_command" in tools:
        return "shell_command", json.dumps({"command": command})
    if "exec_command" in tools and "shell" not in tools:
        if escalate:
            return "exec_command", json.dumps({
                "cmd": command, "sandbox_permissions": "require_escalated",
                "justification": "The test asks for this command."})
        return "exec_command", json.dumps({"cmd": command})
    return "shell", json.dumps({"command": ["bash", "-lc", command]})


def responses_events(
    mode: str, n: int, interval: float, *, wait_s: float, command: str, tools: list[str],
    escalate: bool = False, call: tuple[str, str | None, dict[str, Any]] | None = None,
) -> Iterator[Item]:
    """``call``: (name, namespace, arguments) of the function call to ask for (mode
    ``tool``: the shell call when None)."""
    rid = f"resp_{next(_ids)}"
    yield _sse("response.created", {"type": "response.created",
                                    "response": {"id": rid, "status": "in_progress"}})
    if mode == "wait":
        yield wait_s
    if mode == "tool":
        item: dict[str, Any]
        if call is None:
            name, args = _shell_call(tools, command, escalate)
            item = {"type": "function_call", "id": f"fc_{rid}", "call_id": f"call_{rid}",
                    "name": name, "arguments": args, "status": "completed"}
        else:
            fn, namespace, fn_args = call
            item = {"type": "function_call", "id": f"fc_{rid}", "call_id": f"call_{rid}",
                    "name": fn, "arguments": json.dumps(fn_args), "status": "completed"}
            if namespace is not None:
                item["namespace"] = namespace
        yield _sse("response.output_item.added", {
            "type": "response.output_item.added", "output_index": 0,
            "item": {**item, "arguments": "", "status": "in_progress"}})
        yield _sse("response.output_item.done", {
            "type": "response.output_item.done", "output_index": 0, "item": item})
    else:
        mid = f"msg_{rid}"
        texts = _texts(n)
        yield _sse("response.output_item.added", {
            "type": "response.output_item.added", "output_index": 0,
            "item": {"type": "message", "id": mid, "role": "assistant",
                     "status": "in_progress", "content": []}})
        yield _sse("response.content_part.added", {
            "type": "response.content_part.added", "item_id": mid, "output_index": 0,
            "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})
        for i, t in enumerate(texts):
            if i and interval:
                yield interval
            yield Token(_sse("response.output_text.delta", {
                "type": "response.output_text.delta", "item_id": mid, "output_index": 0,
                "content_index": 0, "delta": t}))
        full = "".join(texts)
        yield _sse("response.output_text.done", {
            "type": "response.output_text.done", "item_id": mid, "output_index": 0,
            "content_index": 0, "text": full})
        part = {"type": "output_text", "text": full, "annotations": []}
        yield _sse("response.content_part.done", {
            "type": "response.content_part.done", "item_id": mid, "output_index": 0,
            "content_index": 0, "part": part})
        yield _sse("response.output_item.done", {
            "type": "response.output_item.done", "output_index": 0,
            "item": {"type": "message", "id": mid, "role": "assistant", "status": "completed",
                     "content": [part]}})
    yield _sse("response.completed", {"type": "response.completed", "response": {
        "id": rid, "status": "completed", "output": [],
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": n, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 10 + n}}})


# -- Anthropic Messages (Claude) ------------------------------------------------

def anthropic_last_user(body: dict[str, Any]) -> tuple[str, bool]:
    for msg in reversed(body.get("messages") or []):
        if isinstance(msg, dict) and msg.get("role") == "user":
            content = msg.get("content")
            has_result = isinstance(content, list) and any(
                isinstance(c, dict) and c.get("type") == "tool_result" for c in content
            )
            return _body_text(content), has_result
    return "", False


def anthropic_message(text: str) -> dict[str, Any]:
    return {"id": f"msg_{next(_ids)}", "type": "message", "role": "assistant",
            "model": "fake", "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1}}


#: ``TASK``: what Claude's subagent tool is asked to do (the subagent's own
#: requests then stream slowly: their prompt carries ``SLOW``).
SUBAGENT_PROMPT = "SLOW: stream many tokens as a subagent"


def anthropic_events(
    mode: str, n: int, interval: float, *, wait_s: float, command: str, model: str,
    tools: list[str] | None = None,
) -> Iterator[Item]:
    yield _sse("message_start", {"type": "message_start", "message": {
        "id": f"msg_{next(_ids)}", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}})
    if mode == "wait":
        yield wait_s
    if mode in ("tool", "task"):
        if mode == "task":
            name = "Task" if "Task" in (tools or []) else "Agent"
            args = {"description": "Stream slowly", "prompt": SUBAGENT_PROMPT,
                    "subagent_type": "general-purpose"}
        else:
            name, args = "Bash", {"command": command, "description": "Create a file"}
        yield _sse("content_block_start", {
            "type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": f"toolu_{next(_ids):06d}",
                              "name": name, "input": {}}})
        yield _sse("content_block_delta", {
            "type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": json.dumps(args)}})
        stop = "tool_use"
    else:
        yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}})
        for i, t in enumerate(_texts(n)):
            if i and interval:
                yield interval
            yield Token(_sse("content_block_delta", {
                "type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": t}}))
        stop = "end_turn"
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield _sse("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": n}})
    yield _sse("message_stop", {"type": "message_stop"})


# -- Gemini streamGenerateContent ---------------------------------------------

def gemini_last_user(body: dict[str, Any]) -> tuple[str, bool]:
    for c in reversed(body.get("contents") or []):
        if isinstance(c, dict) and c.get("role", "user") == "user":
            parts = c.get("parts") or []
            has_result = any(isinstance(p, dict) and "functionResponse" in p for p in parts)
            return _body_text(parts), has_result
    return "", False


def _gemini_chunk(parts: list[dict[str, Any]], model: str, finish: bool) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        cand["finishReason"] = "STOP"
    return {"candidates": [cand], "modelVersion": model,
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1,
                              "totalTokenCount": 11}}


def gemini_json_answer() -> dict[str, Any]:
    """One answer that satisfies Gemini CLI's JSON side calls (next speaker, routing)."""
    text = json.dumps({"reasoning": "fake provider", "next_speaker": "user",
                       "model_choice": "flash"})
    return _gemini_chunk([{"text": text}], "fake", True)


def gemini_events(
    mode: str, n: int, interval: float, *, wait_s: float, command: str, model: str
) -> Iterator[Item]:
    if mode == "wait":
        yield b": waiting\n\n"
        yield wait_s
    if mode == "tool":
        call = {"functionCall": {"name": "run_shell_command", "args": {"command": command}}}
        yield _sse(None, _gemini_chunk([call], model, True))
        return
    texts = _texts(n)
    for i, t in enumerate(texts):
        if i and interval:
            yield interval
        yield Token(_sse(None, _gemini_chunk([{"text": t}], model, i == len(texts) - 1)))


# -- Auggie chat-stream (not a documented API: only what the CLI needs) ---------

AUGGIE_GET_MODELS: dict[str, Any] = {
    "default_model": "fake-model",
    "models": [{"name": "fake-model", "suggested_prefix_char_count": 1000,
                "suggested_suffix_char_count": 1000}],
    "feature_flags": {},
}


def auggie_last_user(body: Any) -> str:
    """The prompt: ``message``, or (0.36) the text nodes of the request."""
    if not isinstance(body, dict):
        return ""
    texts = [str(body.get("message") or "")]
    for node in body.get("nodes") or []:
        text_node = node.get("text_node") if isinstance(node, dict) else None
        if isinstance(text_node, dict):
            texts.append(str(text_node.get("content", "")))
    return " ".join(texts)


def auggie_events(mode: str, n: int, interval: float, *, wait_s: float) -> Iterator[Item]:
    if mode == "wait":
        yield wait_s
    for i, t in enumerate(_texts(n)):
        if i and interval:
            yield interval
        yield Token(json.dumps({"text": t}).encode() + b"\n")
    yield json.dumps({"text": "", "stop_reason": 1}).encode() + b"\n"


# -- OpenAI Chat Completions (qwen-code, opencode) -----------------------------

def chat_last_user(body: dict[str, Any]) -> tuple[str, bool]:
    """The latest user message's text and whether a ``tool`` message follows it."""
    has_result = False
    for msg in reversed(body.get("messages") or []):
        if not isinstance(msg, dict):
            continue
        if msg.get("role") == "tool":
            has_result = True
        if msg.get("role") == "user":
            return _body_text(msg.get("content")), has_result
    return "", has_result


def _chat_tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Tool name → its JSON-schema parameters."""
    out: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out[fn["name"]] = params if isinstance(params, dict) else {}
    return out


def chat_shell_call(body: dict[str, Any], command: str) -> tuple[str, str]:
    """The agent's own shell tool (qwen-code ``run_shell_command``, opencode ``bash``)
    and JSON arguments that fill its required fields."""
    tools = _chat_tools(body)
    name = next((n for n in ("run_shell_command", "bash", "shell") if n in tools),
                next(iter(tools), "bash"))
    props = tools.get(name, {}).get("properties") or {}
    args: dict[str, Any] = {"command": command}
    if "description" in props:
        args["description"] = "Run a command"
    if "is_background" in props:
        args["is_background"] = False
    return name, json.dumps(args)


def chat_message(text: str, model: str) -> dict[str, Any]:
    """A non-streamed ``chat.completion`` (side requests)."""
    return {"id": f"chatcmpl-{next(_ids)}", "object": "chat.completion", "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}


def chat_events(
    mode: str, n: int, interval: float, *, wait_s: float, command: str, body: dict[str, Any],
) -> Iterator[Item]:
    """``chat.completion.chunk`` SSE events, ``data: [DONE]`` last; a usage chunk when
    the request asks for one (``stream_options.include_usage``)."""
    cid = f"chatcmpl-{next(_ids)}"
    model = str(body.get("model", "fake"))

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(None, {"id": cid, "object": "chat.completion.chunk", "created": 0,
                           "model": model, "choices": [{"index": 0, "delta": delta,
                                                        "finish_reason": finish}]})

    yield chunk({"role": "assistant", "content": ""})
    if mode == "wait":
        yield wait_s
    if mode == "tool":
        name, args = chat_shell_call(body, command)
        half = len(args) // 2
        # Like the real API: the first delta names the call, the arguments follow in pieces.
        yield chunk({"tool_calls": [{"index": 0, "id": f"call_{cid}", "type": "function",
                                     "function": {"name": name, "arguments": ""}}]})
        for piece in (args[:half], args[half:]):
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        yield chunk({}, "tool_calls")
    else:
        for i, t in enumerate(_texts(n)):
            if i and interval:
                yield interval
            yield Token(chunk({"content": t}))
        yield chunk({}, "stop")
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        yield _sse(None, {"id": cid, "object": "chat.completion.chunk", "created": 0,
                          "model": model, "choices": [],
                          "usage": {"prompt_tokens": 10, "completion_tokens": n,
                                    "total_tokens": 10 + n}})
    yield b"data: [DONE]\n\n"
