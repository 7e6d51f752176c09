"""The cores' frames for a session's options, commands, usage and title (DESIGN.md §19),
without a process: what ``set_option`` writes in each dialect, what the agent's
answers and updates become, and what is refused before anything is written."""

from __future__ import annotations

import json
from typing import Any

import pytest

from protocols.acp import AcpClient
from protocols.codex import CodexClient
from protocols.events import (
    AgentNotice,
    CommandsChanged,
    OptionsChanged,
    OtherUpdate,
    TitleChanged,
    UsageUpdated,
)
from protocols.jsonrpc import (
    Dialect,
    ErrorResponse,
    IncomingRequest,
    LocalProtocolError,
    Response,
)

from .helpers import ConnectionPair, parse_lines

SID = "sess-1"
MODES = {"currentModeId": "ask", "availableModes": [
    {"id": "ask", "name": "Ask", "description": None}, {"id": "code", "name": "Code"}]}
MODELS = {"currentModelId": "m1", "availableModels": [
    {"modelId": "m1", "name": "Model 1"}, {"modelId": "m2", "name": "Model 2"}]}


def config(version: int, mode: str = "ask", model: str = "m1") -> list[dict[str, Any]]:
    key = "configId" if version == 2 else "id"
    return [
        {key: "mode", "name": "Mode", "category": "mode", "type": "select",
         "currentValue": mode, "options": [{"value": "ask", "name": "Ask"},
                                           {"value": "code", "name": "Code"}]},
        {key: "model", "name": "Model", "category": "model", "type": "select",
         "currentValue": model, "options": [{"value": "m1", "name": "Model 1"},
                                            {"value": "m2", "name": "Model 2"}]},
    ]


def currents(ev: object) -> dict[str, str | None]:
    assert isinstance(ev, OptionsChanged), ev
    return {o["id"]: o["current"] for o in ev.options}


def acp_opened(version: int, offered: dict[str, Any]) -> tuple[ConnectionPair[AcpClient],
                                                               list[object]]:
    """An ACP core of ``version`` whose ``session/new`` was answered with ``offered``,
    and the events of that answer."""
    p = ConnectionPair(AcpClient(acp_version=2 if version == 2 else 1), Dialect.JSONRPC2)
    [init] = p.to_agent(p.client.initialize()[1])
    assert isinstance(init, IncomingRequest)
    answer: dict[str, Any] = ({"protocolVersion": 2, "info": {"name": "a", "version": "1"},
                               "capabilities": {}} if version == 2 else
                              {"protocolVersion": 1, "agentCapabilities": {}})
    p.to_client(p.agent.send_response(init.id, answer))
    [new] = p.to_agent(p.client.new_session("/work")[1])
    assert isinstance(new, IncomingRequest)
    return p, p.to_client(p.agent.send_response(new.id, {"sessionId": SID, **offered}))


def acp_session(version: int, offered: dict[str, Any]) -> ConnectionPair[AcpClient]:
    return acp_opened(version, offered)[0]


def set_and_answer(p: ConnectionPair[AcpClient], option_id: str, value: str,
                   result: Any) -> tuple[dict[str, Any], list[object]]:
    rid, data = p.client.set_option(option_id, value)
    [line] = parse_lines(data)
    [req] = p.to_agent(data)
    assert isinstance(req, IncomingRequest) and req.id == rid
    return line, p.to_client(p.agent.send_response(rid, result))


@pytest.mark.parametrize("version", [1, 2])
def test_config_options_offered_then_set(version: int) -> None:
    p, (offered, answer) = acp_opened(version, {"configOptions": config(version)})
    assert currents(offered) == {"mode": "ask", "model": "m1"}
    assert isinstance(answer, Response)
    line, events = set_and_answer(p, "mode", "code",
                                  {"configOptions": config(version, mode="code")})
    params = {"sessionId": SID, "configId": "mode", "value": "code"}
    if version == 2:
        params["type"] = "id"
    assert (line["method"], line["params"]) == ("session/set_config_option", params)
    changed, done = events
    # The options as the agent answered them, before the answer itself.
    assert currents(changed) == {"mode": "code", "model": "m1"}
    assert isinstance(done, Response) and done.method == "session/set_config_option"


@pytest.mark.parametrize(("option_id", "value", "method", "key"), [
    ("mode", "code", "session/set_mode", "modeId"),
    ("model", "m2", "session/set_model", "modelId"),
])
def test_legacy_shapes_set_with_set_mode_and_set_model(option_id: str, value: str,
                                                       method: str, key: str) -> None:
    p, opened = acp_opened(1, {"modes": MODES, "models": MODELS})
    assert currents(opened[0]) == {"mode": "ask", "model": "m1"}
    line, events = set_and_answer(p, option_id, value, {})
    assert (line["method"], line["params"]) == (method, {"sessionId": SID, key: value})
    changed, done = events
    # Answered {}: the value set is the current one now.
    assert currents(changed) == {"mode": "ask", "model": "m1", option_id: value}
    assert isinstance(done, Response)


def test_config_options_win_over_the_legacy_shapes() -> None:
    p = acp_session(1, {"modes": MODES, "models": MODELS, "configOptions": config(1)})
    line, _ = set_and_answer(p, "model", "m2", {"configOptions": config(1, model="m2")})
    assert line["method"] == "session/set_config_option"


@pytest.mark.parametrize(("option_id", "value", "said"), [
    ("speed", "fast", "no option 'speed'"),
    ("mode", "yolo", "'yolo' is not a choice of option 'mode'"),
])
def test_what_was_not_offered_is_refused_before_anything_is_written(
        option_id: str, value: str, said: str) -> None:
    p = acp_session(1, {"configOptions": config(1)})
    pending = dict(p.client.rpc.pending)
    with pytest.raises(ValueError, match=said):
        p.client.set_option(option_id, value)
    assert p.client.rpc.pending == pending and p.client.session.pending == {}


def test_an_agent_that_offers_nothing_has_nothing_to_set() -> None:
    p, [answer] = acp_opened(1, {})
    assert isinstance(answer, Response)
    with pytest.raises(ValueError, match=r"offered: none"):
        p.client.set_option("mode", "code")


def test_set_before_a_session_is_a_local_error() -> None:
    with pytest.raises(LocalProtocolError):
        AcpClient().set_option("mode", "code")


def test_a_refused_set_changes_nothing() -> None:
    p = acp_session(1, {"configOptions": config(1)})
    rid, data = p.client.set_option("mode", "code")
    p.to_agent(data)
    [err] = p.to_client(p.agent.send_error(rid, -32602, "not now"))
    assert isinstance(err, ErrorResponse)
    assert p.client.session.options[0]["current"] == "ask"


def update(kind: str, **fields: Any) -> bytes:
    line = {"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": SID, "update": {"sessionUpdate": kind, **fields}}}
    return json.dumps(line).encode() + b"\n"


def test_the_agents_own_changes() -> None:
    p = acp_session(1, {"configOptions": config(1)})
    [changed] = p.to_client(update("config_option_update",
                                   configOptions=config(1, mode="code", model="m2")))
    assert currents(changed) == {"mode": "code", "model": "m2"}
    # The same again (claude sends current_mode_update beside it): nothing new.
    assert p.to_client(update("current_mode_update", currentModeId="code")) == []
    [moved] = p.to_client(update("current_mode_update", currentModeId="ask"))
    assert currents(moved) == {"mode": "ask", "model": "m2"}


def test_legacy_mode_and_model_updates() -> None:
    p = acp_session(1, {"modes": MODES, "models": MODELS})
    [mode] = p.to_client(update("current_mode_update", currentModeId="code"))
    [model] = p.to_client(update("current_model_update", currentModelId="m2"))
    assert (currents(mode), currents(model)) == (
        {"mode": "code", "model": "m1"}, {"mode": "code", "model": "m2"})


def test_a_restore_offers_the_options_again() -> None:
    p = ConnectionPair(AcpClient(acp_version=1), Dialect.JSONRPC2)
    [init] = p.to_agent(p.client.initialize()[1])
    assert isinstance(init, IncomingRequest)
    p.to_client(p.agent.send_response(init.id, {
        "protocolVersion": 1, "agentCapabilities": {"sessionCapabilities": {"resume": {}}}}))
    rid, data = p.client.resume_session(SID, "/work")
    p.to_agent(data)
    offered, answer = p.to_client(p.agent.send_response(rid, {"configOptions": config(1)}))
    assert currents(offered) == {"mode": "ask", "model": "m1"}
    assert isinstance(answer, Response) and p.client.session_id == SID


@pytest.mark.parametrize(("raw", "expected"), [
    pytest.param(update("available_commands_update", availableCommands=[
        {"name": "plan", "description": "Plan it", "input": {"hint": "<what>"}}]),
        [CommandsChanged(commands=({"name": "plan", "description": "Plan it",
                                    "input_hint": "<what>"},))], id="commands"),
    pytest.param(update("usage_update", used=50, size=1000,
                        cost={"amount": 0.5, "currency": "USD"}),
                 [UsageUpdated(usage={"input_tokens": None, "output_tokens": None,
                                      "context_used": 50, "context_size": 1000,
                                      "cost": {"amount": 0.5, "currency": "USD"}})],
                 id="usage"),
    pytest.param(update("session_info_update", title="Fix the bug"),
                 [TitleChanged(title="Fix the bug")], id="title"),
    pytest.param(update("session_info_update", updatedAt="2026-01-01T00:00:00Z"),
                 [OtherUpdate(kind="session_info_update", payload=None)], id="no-title"),
    pytest.param(update("usage_update", used="lots"),
                 [OtherUpdate(kind="usage_update", payload=None), AgentNotice], id="bad-usage"),
])
def test_session_updates(raw: bytes, expected: list[Any]) -> None:
    p = acp_session(1, {})
    events = p.to_client(raw)
    assert [type(e) if isinstance(x, type) else e for e, x in zip(events, expected,
                                                                   strict=True)] == expected


# -- Codex ------------------------------------------------------------------------------

THREAD = "thr-1"
MODEL_LIST = {"data": [
    {"id": "gpt-a", "model": "gpt-a", "displayName": "GPT A", "description": "a",
     "hidden": False, "isDefault": True, "defaultReasoningEffort": "medium",
     "supportedReasoningEfforts": [{"reasoningEffort": "low", "description": "l"},
                                   {"reasoningEffort": "medium", "description": "m"}]},
    {"id": "gpt-b", "model": "gpt-b", "displayName": "GPT B", "description": "b",
     "hidden": False, "isDefault": False, "defaultReasoningEffort": "high",
     "supportedReasoningEfforts": [{"reasoningEffort": "high", "description": "h"}]},
], "nextCursor": None}


def codex_thread() -> ConnectionPair[CodexClient]:
    p = ConnectionPair(CodexClient(), Dialect.CODEX)
    rid, data = p.client.thread_start("/work")
    p.to_agent(data)
    offered, answer = p.to_client(p.agent.send_response(rid, {
        "thread": {"id": THREAD}, "model": "gpt-a", "reasoningEffort": None,
        "approvalPolicy": "never"}))
    assert currents(offered) == {"model": "gpt-a", "reasoning_effort": None,
                                 "approval_policy": "never"}
    assert isinstance(answer, Response)
    rid, data = p.client.model_list()
    [req] = p.to_agent(data)
    assert isinstance(req, IncomingRequest) and req.method == "model/list"
    listed, answer = p.to_client(p.agent.send_response(rid, MODEL_LIST))
    # model/list's efforts: the default one is current until the thread says.
    assert currents(listed) == {"model": "gpt-a", "reasoning_effort": "medium",
                                "approval_policy": "never"}
    return p


def test_codex_sets_go_out_with_every_later_turn_start() -> None:
    p = codex_thread()
    [line] = parse_lines(p.client.turn_start("plain")[1])
    assert set(line["params"]) == {"threadId", "input"}  # nothing set: nothing sent
    p.client.abandon_turn()
    changed = p.client.set_option("model", "gpt-b")
    # The next turn's model, and its efforts.
    assert currents(changed)["model"] == "gpt-b"
    assert [c["value"] for c in changed.options[1]["choices"]] == ["high"]
    p.client.set_option("reasoning_effort", "high")
    p.client.set_option("approval_policy", "on-request")
    for _ in range(2):
        [line] = parse_lines(p.client.turn_start("go")[1])
        assert {k: line["params"].get(k) for k in ("model", "effort", "approvalPolicy")} == {
            "model": "gpt-b", "effort": "high", "approvalPolicy": "on-request"}
        p.client.abandon_turn()


@pytest.mark.parametrize(("option_id", "value"), [
    ("model", "gpt-z"), ("reasoning_effort", "xhigh"), ("approval_policy", "always"),
    ("mode", "plan"),
])
def test_codex_refuses_what_it_does_not_offer(option_id: str, value: str) -> None:
    p = codex_thread()
    with pytest.raises(ValueError, match=f"{value!r} is not a choice|no option {option_id!r}"):
        p.client.set_option(option_id, value)
    [line] = parse_lines(p.client.turn_start("go")[1])
    assert set(line["params"]) == {"threadId", "input"}


def test_codex_without_model_list_offers_the_threads_model() -> None:
    p = ConnectionPair(CodexClient(), Dialect.CODEX)
    rid, data = p.client.thread_start("/work")
    p.to_agent(data)
    p.to_client(p.agent.send_response(rid, {"thread": {"id": THREAD}, "model": "fake"}))
    rid, data = p.client.model_list()
    p.to_agent(data)
    [err] = p.to_client(p.agent.send_error(rid, -32601, "method not found"))
    assert isinstance(err, ErrorResponse)
    assert [c["value"] for c in p.client.options.options[0]["choices"]] == ["fake"]


def test_codex_token_usage() -> None:
    p = codex_thread()
    usage = {"total": {"totalTokens": 30, "inputTokens": 20, "outputTokens": 10},
             "last": {"totalTokens": 12, "inputTokens": 8, "outputTokens": 4},
             "modelContextWindow": 1000}
    line = json.dumps({"method": "thread/tokenUsage/updated", "params": {
        "threadId": THREAD, "turnId": "t", "tokenUsage": usage}}).encode() + b"\n"
    assert p.to_client(line) == [UsageUpdated(usage={
        "input_tokens": 20, "output_tokens": 10, "context_used": 12, "context_size": 1000,
        "cost": None})]
