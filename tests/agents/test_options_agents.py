"""Options and slash commands of the real agents (DESIGN.md §19, issue 43 item 9), end to end:
WebSocket API → ``turnvisor serve`` → the real agent CLI → the fake provider.  Each choice is
made with ``session.option.set`` from what the session DTO offers, and checked on what the
fake provider received in the agent's next model request (``FakeProvider.requests``):

- claude (claude-agent-acp): mode and model are offered; mode ``plan`` is applied at once and
  the next turn's request carries Claude Code's plan-mode instructions (absent from the
  request before); a command from the DTO's ``commands`` sent as the prompt's text is run by
  the agent (its expansion, not the text we sent, is what the model is asked);
- gemini: a model among its choices is applied at once and is the model of the next request
  (Gemini's API names it in the URL: ``models/<id>:streamGenerateContent``);
- codex: model and reasoning effort are kept for the next turn (``next_turn``) and are the
  next Responses request's ``model`` and ``reasoning.effort``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.fake_provider import FakeProvider

from .cli import AGENTS_DIR, find_cli
from .test_end_to_end import E2E, STEP_S, TEST_S, allow, e2e_session

pytestmark = [pytest.mark.agents, pytest.mark.slow]


def _installed(name: str) -> pytest.MarkDecorator:
    # Decided at collection (a skip raised inside a trio test loses its reason).
    return pytest.mark.skipif(
        find_cli(name) is None,
        reason=f"{name} CLI is not installed in {AGENTS_DIR} (run scripts/install_agents.sh)")


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as p:
        yield p


#: The request a model call of the agent's turn makes (not a side request: titles, token
#: counts, routing), recognised by its path; its body offers the agent's tools.
Main = Callable[[str, Any], bool]


def _anthropic_main(path: str, body: Any) -> bool:
    return (path.split("?")[0].endswith("/messages") and isinstance(body, dict)
            and bool(body.get("tools")))


def _gemini_main(path: str, body: Any) -> bool:
    return (":streamGenerateContent" in path and isinstance(body, dict)
            and bool(body.get("tools")))


def _responses_main(path: str, body: Any) -> bool:
    return path.split("?")[0].endswith("/responses") and isinstance(body, dict)


async def _turn(e: E2E, text: str, main: Main) -> list[tuple[str, dict[str, Any]]]:
    """Run a turn of ``text`` to its end (``end_turn``); the model requests of the agent's
    turn the provider received meanwhile, (path, body), at least one."""
    first = len(e.provider.requests)
    mark, turn_id = await e.prompt(text)
    assert await e.turn_end(mark, turn_id) == "end_turn"
    requests = [(path, body) for _, path, body in e.provider.requests[first:]
                if main(path, body)]
    assert requests, (f"{e.name}: no model request for {text!r}; paths "
                      f"{[p for _, p, _ in e.provider.requests[first:]]}")
    return requests


def _option(options: list[dict[str, Any]], category: str) -> dict[str, Any]:
    found = [o for o in options if o["category"] == category]
    assert found, f"no {category} option offered: {options}"
    return found[0]


def _values(option: dict[str, Any]) -> list[str]:
    return [str(c["value"]) for c in option["choices"]]


async def _set(e: E2E, option: dict[str, Any], value: str, applied: str) -> None:
    """``session.option.set``; the answer says when it applies, and the session's options
    then show the value (announced with ``session.options.changed``)."""
    mark = e.mark()
    answer = await e.ws.call("session.option.set", {"session_id": e.sid,
                                                     "option_id": option["id"],
                                                     "value": value}, timeout=STEP_S)
    assert (answer["option_id"], answer["value"], answer["applied"]) == (
        option["id"], value, applied), answer

    def shown(f: dict[str, Any]) -> bool:
        return f["action"] == "session.options.changed" and any(
            o["id"] == option["id"] and o["current"] == value for o in f["payload"]["options"])
    await e.wait(mark, shown, f"session.options.changed with {option['id']} = {value}")
    current = {o["id"]: o["current"] for o in (await e.session())["options"]}
    assert current[option["id"]] == value, current


def _texts(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [str(block.get("text", "")) for block in content if block.get("type") == "text"]


def _after_prompt(body: dict[str, Any], prompt: str) -> list[str]:
    """The texts of the request's messages from the (last) user message carrying ``prompt``
    on: what the agent added to this turn around the person's words."""
    messages = body["messages"]
    at = max((i for i, m in enumerate(messages) if m["role"] == "user"
              and any(prompt in t for t in _texts(m))), default=None)
    assert at is not None, f"{prompt!r} is not in the request: {json.dumps(messages)[-2000:]}"
    return [t for m in messages[at:] for t in _texts(m)]


#: What Claude Code adds to a request in plan mode.  Read from the requests of
#: claude-agent-acp (Claude Code 2.1) to the fake provider: in plan mode the turn's user
#: message is followed by a system message that begins "Plan mode is active. The user
#: indicated that they do not want you to execute yet -- you MUST NOT make any edits ..."
#: (with the plan file to write and the plan workflow), and the request's
#: ``safeguards[0].classifier_context.permission_mode`` is "plan"; in the default mode
#: neither is there.  Its system prompt and tool list are otherwise the same (ExitPlanMode
#: is a deferred tool, named in both).
PLAN_MODE_REMINDER = "Plan mode is active."


@_installed("claude")
async def test_claude_plan_mode_and_a_slash_command_reach_the_model(
    provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(TEST_S):
        async with e2e_session("claude", provider, tmp_path, monkeypatch, policy=allow) as e:
            options = (await e.session())["options"]
            mode = _option(options, "mode")
            model = _option(options, "model")
            assert "plan" in _values(mode) and mode["current"] != "plan", mode
            assert len(model["choices"]) > 1 and model["current"] in _values(model), model

            [(_, before)] = await _turn(e, "QUICK: before plan mode", _anthropic_main)
            assert not any(PLAN_MODE_REMINDER in t
                           for t in _after_prompt(before, "QUICK: before plan mode"))

            await _set(e, mode, "plan", "now")
            [(_, planned)] = await _turn(e, "QUICK: in plan mode", _anthropic_main)
            added = _after_prompt(planned, "QUICK: in plan mode")
            assert any(t.startswith(PLAN_MODE_REMINDER) for t in added), added
            context = planned["safeguards"][0]["classifier_context"]
            assert context["permission_mode"] == "plan", context

            # A command the agent offers (a skill of Claude Code's, with an argument), sent
            # as the prompt's text: Claude Code runs it; the model is asked the command's
            # own prompt with the argument in it, not the text typed.
            commands = {c["name"]: c for c in (await e.session())["commands"]}
            assert "simplify" in commands, sorted(commands)
            typed = "/simplify QUICK target"
            [(_, ran)] = await _turn(e, typed, _anthropic_main)
            texts = _texts(ran["messages"][-1])
            assert not any(t.strip() == typed for t in texts), texts
            assert any("<command-name>/simplify</command-name>" in t
                       and "<command-args>QUICK target</command-args>" in t for t in texts), texts
            expanded = [t for t in texts if "QUICK target" in t and "<command-" not in t]
            assert expanded and len(expanded[0]) > 500, texts


@_installed("gemini")
async def test_gemini_model_reaches_the_provider(
    provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(TEST_S):
        async with e2e_session("gemini", provider, tmp_path, monkeypatch, policy=allow) as e:
            model = _option((await e.session())["options"], "model")
            [(path, _)] = await _turn(e, "QUICK: before", _gemini_main)
            assert f"/models/{model['current']}:" in path, (model["current"], path)
            # A model of its own (not "auto", which lets Gemini CLI route), not the current.
            chosen = next(v for v in _values(model)
                          if v != model["current"] and v.startswith("gemini-"))
            await _set(e, model, chosen, "now")
            requests = await _turn(e, "QUICK: after", _gemini_main)
            assert [p for p, _ in requests if f"/models/{chosen}:" not in p] == [], requests


@_installed("codex")
async def test_codex_model_and_effort_reach_the_next_responses_request(
    provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(TEST_S):
        async with e2e_session("codex", provider, tmp_path, monkeypatch, policy=allow) as e:
            options = (await e.session())["options"]
            model = _option(options, "model")
            [(_, before)] = await _turn(e, "QUICK: before", _responses_main)
            assert before["model"] == model["current"], before["model"]
            chosen = next(v for v in _values(model) if v != model["current"])
            await _set(e, model, chosen, "next_turn")
            # One of the efforts the chosen model supports, not the one in effect.  Not
            # "ultra" ("maximum reasoning with automatic task delegation"): Codex 0.171 takes
            # it in turn/start (its turn metadata in the request says "ultra") but asks the
            # Responses API for "xhigh", which is Codex's mapping, not a lost choice.
            effort = _option((await e.session())["options"], "reasoning_effort")
            level = next(v for v in ("high", "low", "medium", "xhigh", "max")
                         if v in _values(effort) and v != effort["current"]
                         and v != (before.get("reasoning") or {}).get("effort"))
            await _set(e, effort, level, "next_turn")
            [(_, after)] = await _turn(e, "QUICK: after", _responses_main)
            assert (after["model"], after["reasoning"].get("effort")) == (chosen, level), (
                after["model"], after["reasoning"])
