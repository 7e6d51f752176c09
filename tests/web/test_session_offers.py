"""DESIGN.md §19 over the WebSocket API, in every dialect: the options the agent offers (model,
mode, ...) are in the session's DTO and set with ``session.option.set`` (at once where the agent
takes them, else with the next turn), the choice is kept and given to the next agent the session
starts; the agent's slash commands, its context usage and its title reach the DTO and the
notifications."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.server import running_server
from tests.support.ws import WsClient, ws_client

from .support import launch, new_task

DIALECTS = ["mock", "mock-codex", "mock-acp2"]


async def _dto(ws: WsClient, task_id: str, sid: str) -> dict[str, Any]:
    sessions = (await ws.call("session.list", {"task_id": task_id}))["sessions"]
    return dict(next(s for s in sessions if s["id"] == sid))


async def _turn_text(ws: WsClient, sid: str, prompt: str) -> str:
    """Run ``prompt`` and return the agent's text of that turn."""
    answer = await ws.call("message.add", {"session_id": sid, "content": prompt})
    turn_id = answer["turn_id"]
    await ws.wait_for(lambda f: f["action"] == "session.turn.completed"
                      and f["payload"]["turn_id"] == turn_id)
    msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
    return "".join(m["content"] for m in msgs if m["turn_id"] == turn_id and m["role"] == "agent")


def _option(options: list[dict[str, Any]], category: str) -> dict[str, Any]:
    return next(o for o in options if o["category"] == category)


async def _started(ws: WsClient, agent: str) -> tuple[str, str, list[dict[str, Any]]]:
    """A session whose agent has started (one turn run): its task, id and options."""
    task_id = await new_task(ws)
    sid = await launch(ws, task_id, agent)
    await ws.call("session.subscribe", {"session_id": sid})
    await _turn_text(ws, sid, "hello")
    return task_id, sid, (await _dto(ws, task_id, sid))["options"]


@pytest.mark.parametrize("agent", DIALECTS)
async def test_options_are_offered_set_and_reach_the_agent(tmp_path: Path, agent: str) -> None:
    with trio.fail_after(40):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            task_id, sid, options = await _started(ws, agent)
            model = _option(options, "model")
            other = next(c["value"] for c in model["choices"] if c["value"] != model["current"])
            answer = await ws.call("session.option.set", {"session_id": sid,
                                                          "option_id": model["id"],
                                                          "value": other})
            assert answer["applied"] == ("next_turn" if agent == "mock-codex" else "now")
            changed = await ws.wait_for(
                lambda f: f["action"] == "session.options.changed"
                and _option(f["payload"]["options"], "model")["current"] == other)
            assert changed["payload"]["session_id"] == sid
            assert _option((await _dto(ws, task_id, sid))["options"], "model")["current"] == other
            # The agent runs the next turn with it.
            assert other in await _turn_text(ws, sid, "/options")


@pytest.mark.parametrize("agent", DIALECTS)
async def test_a_choice_is_kept_for_the_next_agent(tmp_path: Path, agent: str) -> None:
    with trio.fail_after(60):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            task_id, sid, options = await _started(ws, agent)
            mode = _option(options, "mode" if agent != "mock-codex" else "reasoning_effort")
            other = next(c["value"] for c in mode["choices"] if c["value"] != mode["current"])
            await ws.call("session.option.set", {"session_id": sid, "option_id": mode["id"],
                                                 "value": other})
        # A new backend on the same data: a new agent, which gets the choice again.
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            await ws.call("session.subscribe", {"session_id": sid})
            assert other in await _turn_text(ws, sid, "/options")
            assert _option((await _dto(ws, task_id, sid))["options"],
                           mode["category"])["current"] == other


async def test_an_option_or_value_not_offered_is_refused_before_anything_is_sent(
        tmp_path: Path) -> None:
    with trio.fail_after(40):
        async with running_server(tmp_path / "data", workspaces={"b": "b" * 40}) as srv, \
                ws_client(srv) as ws, ws_client(srv, token="b" * 40) as other:
            task_id, sid, options = await _started(ws, "mock")
            model = _option(options, "model")
            for option_id, value, says in ((model["id"], "no-such-model", "not a choice"),
                                           ("no-such-option", "x", "offers no option")):
                err = await ws.request("session.option.set", {"session_id": sid,
                                                              "option_id": option_id,
                                                              "value": value})
                assert err["type"] == "error", err
                assert err["payload"]["code"] == "VALIDATION_ERROR", err
                assert says in err["payload"]["message"], err
            err = await other.request("session.option.set", {"session_id": sid,
                                                              "option_id": model["id"],
                                                              "value": model["current"]})
            assert err["payload"]["code"] == "NOT_FOUND", err
            assert _option((await _dto(ws, task_id, sid))["options"],
                           "model")["current"] == model["current"]


@pytest.mark.parametrize("agent", ["mock", "mock-acp2"])
async def test_commands_usage_and_title(tmp_path: Path, agent: str) -> None:
    with trio.fail_after(40):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            task_id, sid, _options = await _started(ws, agent)
            commands = (await _dto(ws, task_id, sid))["commands"]
            names = {c["name"] for c in commands}
            assert {"delay", "steps", "usage"} <= {n.lstrip("/") for n in names}, commands
            await _turn_text(ws, sid, "/usage")
            usage = ws.of("session.usage.changed", sid)[-1]
            assert usage["turn_id"] and usage["usage"]["context_used"] is not None, usage
            assert (await _dto(ws, task_id, sid))["usage"] == usage["usage"]
            await _turn_text(ws, sid, "/title Fixing the login bug")
            assert (await _dto(ws, task_id, sid))["title"] == "Fixing the login bug"
            # The person's name wins: the agent's next title does not replace it.
            await ws.call("session.update", {"session_id": sid, "title": "Mine"})
            await _turn_text(ws, sid, "/title Something else")
            assert (await _dto(ws, task_id, sid))["title"] == "Mine"


async def test_codex_usage_reaches_the_session(tmp_path: Path) -> None:
    with trio.fail_after(40):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            task_id, sid, _options = await _started(ws, "mock-codex")
            await _turn_text(ws, sid, "/usage")
            usage = ws.of("session.usage.changed", sid)[-1]["usage"]
            assert usage["input_tokens"] is not None, usage
            assert (await _dto(ws, task_id, sid))["usage"] == usage


async def test_the_agent_s_own_change_is_what_the_session_shows(tmp_path: Path) -> None:
    with trio.fail_after(40):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            task_id, sid, options = await _started(ws, "mock")
            mode = _option(options, "mode")
            await ws.call("session.option.set", {"session_id": sid, "option_id": mode["id"],
                                                 "value": "plan"})
            # The agent moves it itself: the session says what the agent runs with.
            await _turn_text(ws, sid, f"/agentset {mode['id']} yolo")
            assert _option((await _dto(ws, task_id, sid))["options"], "mode")["current"] == "yolo"
            assert "yolo" in await _turn_text(ws, sid, "/options")
