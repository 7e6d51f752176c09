"""The option mapping (protocols/session_options.py) as tables, from the real agents'
own answers (tests/fixtures/agent-transcripts) and the spec's other shapes, and the
readers of commands, usage and titles."""

from __future__ import annotations

import json
from typing import Any

import pytest

from protocols import session_options as so

from .helpers import TRANSCRIPTS


def agent_said(name: str, *, result_of: str | None = None,
               update: str | None = None) -> dict[str, Any]:
    """The first answer to ``result_of`` (a method we sent) or ``session/update`` of
    kind ``update`` in transcript ``name``."""
    methods: dict[object, str] = {}
    for line in (TRANSCRIPTS / name).read_text().splitlines():
        rec = json.loads(line)
        msg = rec["msg"]
        if rec["dir"] == "->" and "method" in msg and "id" in msg:
            methods[msg["id"]] = msg["method"]
        elif rec["dir"] == "<-" and result_of and methods.get(msg.get("id")) == result_of:
            result: dict[str, Any] = msg["result"]
            return result
        elif (rec["dir"] == "<-" and update and msg.get("method") == "session/update"
              and msg["params"]["update"]["sessionUpdate"] == update):
            found: dict[str, Any] = msg["params"]["update"]
            return found
        elif rec["dir"] == "<-" and update and msg.get("method") == update:
            params: dict[str, Any] = msg["params"]
            return params
    raise AssertionError(f"{name} has no {result_of or update}")


def summary(options: tuple[so.Option, ...]) -> list[tuple[str, str, str | None, list[str]]]:
    """Each option's id, category, current value and choices' values."""
    return [(o["id"], o["category"], o["current"], [c["value"] for c in o["choices"]])
            for o in options]


CLAUDE_MODES = ["default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"]


@pytest.mark.parametrize(("transcript", "legacy", "expected"), [
    pytest.param("claude_agent_acp_0.101.0.jsonl", False, [
        ("mode", "mode", "default", CLAUDE_MODES),
        ("model", "model", "claude-sonnet-4-5",
         ["default", "opus[1m]", "sonnet", "sonnet[1m]", "haiku", "claude-sonnet-4-5"]),
    ], id="claude-agent-acp-0.101-configOptions-over-modes"),
    pytest.param("gemini_cli_0.61.0.jsonl", True, [
        ("mode", "mode", "default", ["default", "autoEdit", "yolo", "plan"]),
        # Its current model is not among those it lists: added, so it shows.
        ("model", "model", "gemini-2.5-flash",
         ["auto", "gemini-3.1-pro-preview-customtools", "gemini-3-flash-preview",
          "gemini-2.5-pro", "gemini-3.8-flash", "gemini-3.5-flash-lite", "gemini-2.5-flash"]),
    ], id="gemini-0.61-modes-and-models"),
    pytest.param("auggie_0.36.0.jsonl", True, [
        # Its models list is empty (currentModelId ""): no model option.
        ("mode", "mode", "default", ["default", "ask"]),
    ], id="auggie-0.36-modes"),
    pytest.param("claude_code_acp_0.16.2.jsonl", True, [
        ("mode", "mode", "default", CLAUDE_MODES),
        ("model", "model", "default", ["default", "opus", "opus[1m]", "haiku",
                                       "claude-sonnet-4-5"]),
    ], id="claude-code-acp-0.16-models-and-modes"),
])
def test_session_new_answers_of_real_agents(transcript: str, legacy: bool,
                                            expected: list[Any]) -> None:
    found = so.from_session_result(agent_said(transcript, result_of="session/new"))
    assert found is not None
    options, is_legacy = found
    assert (summary(options), is_legacy) == (expected, legacy)
    assert all(o["type"] == "select" for o in options)


def test_names_and_descriptions_are_the_agents() -> None:
    found = so.from_session_result(
        agent_said("claude_agent_acp_0.101.0.jsonl", result_of="session/new"))
    assert found is not None
    mode = found[0][0]
    assert (mode["name"], mode["choices"][2]) == ("Mode", {
        "value": "plan", "name": "Plan Mode",
        "description": "Planning mode, no actual tool execution"})
    gemini = so.from_session_result(agent_said("gemini_cli_0.61.0.jsonl",
                                               result_of="session/new"))
    assert gemini is not None
    # A model without a description has description null; the one added is named by its id.
    assert gemini[0][1]["choices"][1]["description"] is None
    assert gemini[0][1]["choices"][-1] == {"value": "gemini-2.5-flash",
                                           "name": "gemini-2.5-flash", "description": None}


SELECT = {"type": "select", "currentValue": "b",
          "options": [{"value": "a", "name": "A"}, {"value": "b", "name": "B"}]}


@pytest.mark.parametrize(("raw", "expected"), [
    pytest.param([{"id": "x", "name": "X", "category": "mode", **SELECT}],
                 [("x", "mode", "b", ["a", "b"])], id="v1-id"),
    pytest.param([{"configId": "x", "name": "X", "category": "model", **SELECT}],
                 [("x", "model", "b", ["a", "b"])], id="v2-configId"),
    pytest.param([{"id": "t", "name": "T", "category": "thought_level", **SELECT}],
                 [("t", "reasoning_effort", "b", ["a", "b"])], id="thought-level-is-effort"),
    pytest.param([{"id": "c", "name": "C", "category": "model_config", **SELECT},
                  {"id": "d", "name": "D", "category": "_custom", **SELECT},
                  {"id": "e", "name": "E", **SELECT}],
                 [("c", "other", "b", ["a", "b"]), ("d", "other", "b", ["a", "b"]),
                  ("e", "other", "b", ["a", "b"])], id="other-categories"),
    pytest.param([{"id": "g", "name": "G", "type": "select", "currentValue": "y", "options": [
        {"group": "one", "name": "One", "options": [{"value": "x", "name": "X"}]},
        {"group": "two", "name": "Two", "options": [{"value": "y", "name": "Y"}]}]}],
                 [("g", "other", "y", ["x", "y"])], id="grouped-values-flattened"),
    pytest.param([{"id": "brave", "name": "Brave", "type": "boolean", "currentValue": True},
                  {"id": "f", "name": "F", "type": "_slider", "currentValue": "1"}],
                 [], id="boolean-and-unknown-types-left-out"),
    pytest.param([{"name": "no id", **SELECT}, "junk", {"id": "empty", "name": "E",
                                                         "type": "select", "options": []}],
                 [], id="malformed-left-out"),
])
def test_config_option_shapes(raw: list[Any], expected: list[Any]) -> None:
    assert summary(so.from_config_options(raw)) == expected


@pytest.mark.parametrize(("result", "expected"), [
    pytest.param({"sessionId": "s"}, None, id="nothing-offered"),
    pytest.param({"configOptions": []}, ((), False), id="configOptions-empty"),
    pytest.param({"modes": None, "models": {"availableModels": [], "currentModelId": ""}},
                 ((), True), id="legacy-empty"),
    pytest.param([], None, id="not-an-object"),
])
def test_session_answers_offering_nothing(result: Any, expected: Any) -> None:
    assert so.from_session_result(result) == expected


def test_check_choice_and_with_current() -> None:
    options = so.from_config_options([{"id": "x", "name": "X", **SELECT}])
    assert so.check_choice(options, "x", "a")["id"] == "x"
    with pytest.raises(ValueError, match=r"no option 'y' \(offered: x\)"):
        so.check_choice(options, "y", "a")
    with pytest.raises(ValueError, match=r"'c' is not a choice of option 'x' \(choices: a, b\)"):
        so.check_choice(options, "x", "c")
    assert summary(so.with_current(options, "x", "a")) == [("x", "other", "a", ["a", "b"])]


# -- Codex -----------------------------------------------------------------------------

#: model/list's answer as codex 0.171's schema has it (two models, one hidden).
MODEL_LIST = {"data": [
    {"id": "gpt-a", "model": "gpt-a", "displayName": "GPT A", "description": "first",
     "hidden": False, "isDefault": True, "defaultReasoningEffort": "medium",
     "supportedReasoningEfforts": [{"reasoningEffort": "minimal", "description": "fast"},
                                   {"reasoningEffort": "medium", "description": "balanced"},
                                   {"reasoningEffort": "xhigh", "description": "deep"}]},
    {"id": "gpt-b", "model": "gpt-b", "displayName": "GPT B", "description": "second",
     "hidden": False, "isDefault": False, "defaultReasoningEffort": "low",
     "supportedReasoningEfforts": [{"reasoningEffort": "low", "description": "l"}]},
    {"id": "secret", "model": "secret", "displayName": "S", "description": "",
     "hidden": True, "isDefault": False, "defaultReasoningEffort": "low",
     "supportedReasoningEfforts": []},
], "nextCursor": None}
POLICIES = ["untrusted", "on-failure", "on-request", "never"]


@pytest.mark.parametrize(("model", "effort", "policy", "listed", "expected"), [
    pytest.param("fake-model", None, "never", None, [
        ("model", "model", "fake-model", ["fake-model"]),
        ("reasoning_effort", "reasoning_effort", None, ["low", "medium", "high"]),
        ("approval_policy", "approval_policy", "never", POLICIES),
    ], id="codex-0.169-thread-start-without-model-list"),
    pytest.param("gpt-b", None, "on-request", MODEL_LIST, [
        ("model", "model", "gpt-b", ["gpt-a", "gpt-b"]),
        ("reasoning_effort", "reasoning_effort", "low", ["low"]),
        ("approval_policy", "approval_policy", "on-request", POLICIES),
    ], id="chosen-model-efforts-and-default-effort"),
    pytest.param(None, "xhigh", None, MODEL_LIST, [
        ("model", "model", "gpt-a", ["gpt-a", "gpt-b"]),
        ("reasoning_effort", "reasoning_effort", "xhigh", ["minimal", "medium", "xhigh"]),
        ("approval_policy", "approval_policy", None, POLICIES),
    ], id="no-model-said-the-default-one"),
    pytest.param("gpt-z", "high", "never", MODEL_LIST, [
        ("model", "model", "gpt-z", ["gpt-a", "gpt-b", "gpt-z"]),
        ("reasoning_effort", "reasoning_effort", "high", ["low", "medium", "high"]),
        ("approval_policy", "approval_policy", "never", POLICIES),
    ], id="unlisted-model"),
])
def test_codex_options(model: str | None, effort: str | None, policy: str | None,
                       listed: Any, expected: list[Any]) -> None:
    assert summary(so.codex_options(model, effort, policy, listed)) == expected


def test_codex_thread_start_answer_of_the_real_agent() -> None:
    result = agent_said("codex_app_server.jsonl", result_of="thread/start")
    options = so.codex_options(result["model"], result["reasoningEffort"],
                               result["approvalPolicy"])
    assert [(o["id"], o["current"]) for o in options] == [
        ("model", "fake-model"), ("reasoning_effort", None), ("approval_policy", "never")]


# -- commands, usage, titles -------------------------------------------------------------


def test_commands_of_real_agents() -> None:
    claude = so.acp_commands(agent_said("claude_agent_acp_0.101.0.jsonl",
                                        update="available_commands_update"))
    assert claude is not None
    by_name = {c["name"]: c for c in claude}
    assert by_name["debug"] == {
        "name": "debug", "description": "Enable debug logging for this session and help "
        "diagnose issues", "input_hint": "[issue description]"}
    assert by_name["verify"]["input_hint"] is None
    gemini = so.acp_commands(agent_said("gemini_cli_0.61.0.jsonl",
                                        update="available_commands_update"))
    assert gemini is not None
    # No ``input`` member at all: no hint.
    assert gemini[1] == {"name": "memory show",
                         "description": "Shows the current memory contents.", "input_hint": None}
    assert len(gemini) == 20


@pytest.mark.parametrize(("update", "expected"), [
    pytest.param({"availableCommands": [{"name": "a", "description": "d",
                                         "input": {"hint": "h"}}]},
                 ({"name": "a", "description": "d", "input_hint": "h"},), id="hint"),
    pytest.param({"availableCommands": [{"description": "no name"}, "junk",
                                        {"name": "b"}]},
                 ({"name": "b", "description": "", "input_hint": None},), id="malformed"),
    pytest.param({"availableCommands": None}, None, id="no-list"),
])
def test_command_shapes(update: dict[str, Any], expected: Any) -> None:
    assert so.acp_commands(update) == expected


def usage(input_tokens: int | None = None, output_tokens: int | None = None,
          used: int | None = None, size: int | None = None,
          cost: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "context_used": used, "context_size": size, "cost": cost}


def test_usage_of_real_agents() -> None:
    claude = agent_said("claude_agent_acp_0.101.0.jsonl", update="usage_update")
    assert so.acp_usage(claude) == usage(used=11, size=200000)
    codex = agent_said("codex_interrupt_then_followup.jsonl", update="thread/tokenUsage/updated")
    assert so.codex_usage(codex) == usage(10, 3, 13, 258400)


@pytest.mark.parametrize(("update", "expected"), [
    pytest.param({"used": 5, "size": 10, "cost": {"amount": 0.25, "currency": "EUR"}},
                 usage(used=5, size=10, cost={"amount": 0.25, "currency": "EUR"}), id="cost"),
    pytest.param({"used": 5, "size": 10, "cost": {"amount": "free", "currency": "EUR"}},
                 usage(used=5, size=10), id="bad-cost"),
    pytest.param({"used": -1, "size": True}, None, id="nonsense"),
    pytest.param({}, None, id="empty"),
])
def test_acp_usage_shapes(update: dict[str, Any], expected: Any) -> None:
    assert so.acp_usage(update) == expected


def test_codex_usage_shapes() -> None:
    assert so.codex_usage({"tokenUsage": {}}) is None
    assert so.codex_usage({}) is None
    assert so.codex_usage({"tokenUsage": {"modelContextWindow": 9}}) == usage(size=9)


@pytest.mark.parametrize(("update", "expected"), [
    ({"title": "Fix the parser"}, "Fix the parser"),
    ({"title": "  "}, None),
    ({"title": None}, None),
    ({"updatedAt": "2026-01-01T00:00:00Z"}, None),
])
def test_titles(update: dict[str, Any], expected: str | None) -> None:
    assert so.acp_title(update) == expected
