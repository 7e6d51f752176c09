"""DESIGN.md §19 over the WebSocket API, in every dialect: an agent that needs a login
(the mock's ``mock-login`` profiles) leaves its session waiting with ``auth`` in the DTO,
not failed; a message meanwhile is refused with a sentence naming ``agent.login``;
``agent.login`` refuses clearly what cannot work, logs in with a key (which reaches the
agent and is never in Turnvisor's database or log) or after the terminal command the
DTO names, and the session then runs turns."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from protocols.mock.login import MARKER
from supervisor.workspace.sandboxing import agent_home
from tests.support.server import OTHER_TOKEN, Server, running_server
from tests.support.ws import RequestFailed, WsClient, ws_client
from web.contract.schema import schema_document

from .support import launch, new_task

DIALECTS = ["mock-login", "mock-login-acp2", "mock-login-codex"]
REPO_ROOT = Path(__file__).resolve().parents[2]
#: A key the mock takes (``mk-``), long and odd enough to be found only where it went.
SECRET = "mk-Turnvisor-login-test-7f3a9c1e5b"


async def _dto(ws: WsClient, task_id: str, sid: str) -> dict[str, Any]:
    sessions = (await ws.call("session.list", {"task_id": task_id}))["sessions"]
    return dict(next(s for s in sessions if s["id"] == sid))


async def _refused(ws: WsClient, action: str, payload: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(RequestFailed) as err:
        await ws.call(action, payload)
    said: dict[str, Any] = err.value.frame["payload"]
    return said


async def _turn_text(ws: WsClient, sid: str, prompt: str) -> str:
    answer = await ws.call("message.add", {"session_id": sid, "content": prompt})
    await ws.wait_for(lambda f: f["action"] == "session.turn.completed"
                      and f["payload"]["turn_id"] == answer["turn_id"])
    msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
    return "".join(m["content"] for m in msgs
                   if m["turn_id"] == answer["turn_id"] and m["role"] == "agent")


def _stored(srv: Server) -> bytes:
    """Every byte of the database (its WAL too)."""
    db = srv.sup.config.data_dir / "turnvisor.db"
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*") if p.is_file())


async def _home(srv: Server, agent: str) -> Path:
    caller = await srv.sup.caller()
    return agent_home(srv.sup.config, caller.workspace_id, agent)


@pytest.mark.parametrize("agent", DIALECTS)
async def test_login_with_a_key(tmp_path: Path, agent: str,
                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(90):
        async with running_server(tmp_path / "data", workspaces={"b": OTHER_TOKEN}) as srv, \
                ws_client(srv) as ws, ws_client(srv, token=OTHER_TOKEN) as other:
            assert "agent_login" in (await ws.call("server.info"))["features"]
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, agent)
            await ws.call("session.subscribe", {"session_id": sid})
            dto = await _dto(ws, task_id, sid)
            # Waiting for a login, not failed; its methods said.
            assert dto["state"] == "WAITING_FOR_INPUT"
            assert dto["auth"]["required"] is True
            assert dto["auth"]["error"] is None  # asked for, not failed
            methods = {m["id"]: m for m in dto["auth"]["methods"]}
            key_id = "apiKey" if agent == "mock-login-codex" else "mock-key"
            assert methods[key_id]["kind"] == "key"
            if agent == "mock-login-codex":  # ChatGPT's sign-in: Codex's own `codex login`
                home = await _home(srv, agent)
                assert methods["chatgpt"]["command"] == shlex.join(
                    ["env", f"HOME={home}", sys.executable, "login"])
            # A message meanwhile: refused at once, saying what to do.
            said = await _refused(ws, "message.add", {"session_id": sid, "content": "hi"})
            assert said["code"] == "CONFLICT" and "agent.login" in said["message"]

            # What cannot work is refused before anything starts.
            said = await _refused(ws, "agent.login", {"session_id": sid, "method_id": "nope"})
            assert said["code"] == "VALIDATION_ERROR" and key_id in said["message"]
            said = await _refused(ws, "agent.login", {"session_id": sid, "method_id": key_id})
            assert said["code"] == "VALIDATION_ERROR" and "needs a key" in said["message"]
            said = await _refused(other, "agent.login", {"session_id": sid,
                                                         "method_id": key_id, "key": SECRET})
            assert said["code"] == "NOT_FOUND"
            # A key the agent refuses: still logged out, the agent's reason said.
            said = await _refused(ws, "agent.login", {"session_id": sid, "method_id": key_id,
                                                      "key": "wrong-key"})
            assert said["code"] == "CONFLICT" and "not valid" in said["message"]
            # The agent quoted the key it refused: not passed on.
            assert "wrong-key" not in said["message"] and "[the key]" in said["message"]
            dto = await _dto(ws, task_id, sid)
            assert dto["auth"]["required"] and "not valid" in dto["auth"]["error"]

            heard = len(ws.notifications)
            answer = await ws.call("agent.login", {"session_id": sid, "method_id": key_id,
                                                   "key": SECRET})
            assert answer["session"]["auth"] is None
            assert answer["session"]["agent_live"] is True
            # The workspace heard it: the session's DTO without auth.
            await ws.wait_for(lambda f: f["action"] == "session.changed"
                              and f["payload"]["session"]["id"] == sid
                              and f["payload"]["session"]["auth"] is None, after=heard)
            assert (await _dto(ws, task_id, sid))["auth"] is None
            # The running agent's profile holds the key no longer (only its start needed it).
            ex = srv.sup.lifecycle.agents.running(sid)
            assert ex is not None and SECRET not in repr(ex.profile)
            said = await _refused(ws, "agent.login", {"session_id": sid, "method_id": key_id,
                                                      "key": SECRET})
            assert said["code"] == "CONFLICT" and "has not asked" in said["message"]
            assert "hello" in await _turn_text(ws, sid, "hello")
            # The agent got the key (its home keeps its hash)...
            marker = json.loads(((await _home(srv, agent)) / MARKER).read_text())
            assert marker["key_sha256"] == hashlib.sha256(SECRET.encode()).hexdigest()
            # ...and Turnvisor kept it nowhere: not its database, not its log.
            stored = _stored(srv)
            assert SECRET.encode() not in stored
            assert b"wrong-key" not in stored
            # ...nor any event it published (what every subscriber heard).
            heard_all = json.dumps(ws.notifications)
            assert SECRET not in heard_all and "wrong-key" not in heard_all
    assert caplog.records, "the log was captured"
    assert SECRET not in caplog.text and "wrong-key" not in caplog.text


@pytest.mark.parametrize("agent", ["mock-login", "mock-login-acp2"])
async def test_login_from_a_terminal(tmp_path: Path, agent: str) -> None:
    with trio.fail_after(90):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, agent)
            await ws.call("session.subscribe", {"session_id": sid})
            dto = await _dto(ws, task_id, sid)
            terminal = next(m for m in dto["auth"]["methods"] if m["kind"] == "terminal")
            home = await _home(srv, agent)
            assert terminal["command"].startswith(f"env HOME={home} ")
            assert terminal["command"].endswith(" --sign-in")
            # Chosen before the command ran: the agent says it is not signed in.
            said = await _refused(ws, "agent.login", {"session_id": sid,
                                                      "method_id": terminal["id"]})
            assert said["code"] == "CONFLICT" and "--sign-in first" in said["message"]
            said = await _refused(ws, "agent.login", {"session_id": sid, "key": "k",
                                                      "method_id": terminal["id"]})
            assert said["code"] == "VALIDATION_ERROR" and "takes no key" in said["message"]
            # The person runs exactly what the card says, then chooses it again.
            argv = shlex.split(terminal["command"])
            done = await trio.run_process(argv, cwd=str(REPO_ROOT), capture_stdout=True,
                                          env={**os.environ})
            assert b"signed in" in done.stdout
            answer = await ws.call("agent.login", {"session_id": sid,
                                                   "method_id": terminal["id"]})
            assert answer["session"]["auth"] is None
            assert "again" in await _turn_text(ws, sid, "again")


def test_the_contract_declares_agent_login() -> None:
    doc = schema_document()
    assert set(doc["x-actions"]["agent.login"]) == {"request", "response"}
    text = json.dumps(doc)
    for name in ("AgentLogin", "LoginAnswer", "AuthDTO", "AuthMethodDTO"):
        assert name in text


@pytest.mark.parametrize("agent", DIALECTS)
async def test_a_launch_prompt_waits_for_the_login(tmp_path: Path, agent: str) -> None:
    key_id = "apiKey" if agent == "mock-login-codex" else "mock-key"
    with trio.fail_after(90):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            task_id = await new_task(ws)
            dto = await ws.call("session.launch", {"task_id": task_id, "agent": agent,
                                                   "prompt": "first words"})
            sid = dto["id"]
            assert dto["auth"]["required"] is True
            await ws.call("session.subscribe", {"session_id": sid})
            await ws.call("agent.login", {"session_id": sid, "method_id": key_id, "key": SECRET})
            await ws.wait_for(lambda f: f["action"] == "session.turn.completed"
                              and f["payload"]["session_id"] == sid)
            msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
            assert [m["content"] for m in msgs if m["role"] == "user"] == ["first words"]
            assert "first words" in "".join(m["content"] for m in msgs if m["role"] == "agent")


@pytest.mark.parametrize("agent", DIALECTS)
async def test_logged_out_at_a_restore(tmp_path: Path, agent: str) -> None:
    key_id = "apiKey" if agent == "mock-login-codex" else "mock-key"
    with trio.fail_after(90):
        async with running_server(tmp_path / "data") as srv, ws_client(srv) as ws:
            task_id = await new_task(ws)
            sid = await launch(ws, task_id, agent)
            await ws.call("session.subscribe", {"session_id": sid})
            await ws.call("agent.login", {"session_id": sid, "method_id": key_id, "key": SECRET})
            assert "one" in await _turn_text(ws, sid, "one")
            # Logged out behind Turnvisor's back, and its agent stopped: the next turn's
            # restore is refused auth_required.
            ((await _home(srv, agent)) / MARKER).unlink()
            await srv.sup.lifecycle.stop_execution(sid)
            answer = await ws.call("message.add", {"session_id": sid, "content": "two"})
            done = await ws.wait_for(lambda f: f["action"] == "session.turn.completed"
                                     and f["payload"]["turn_id"] == answer["turn_id"])
            assert done["payload"]["stop_reason"] == "error"
            msgs = (await ws.call("message.list", {"session_id": sid}))["messages"]
            assert "needs a login" in json.dumps([m for m in msgs
                                                  if m["turn_id"] == answer["turn_id"]])
            dto = await _dto(ws, task_id, sid)
            assert dto["auth"]["required"] is True and dto["state"] == "WAITING_FOR_INPUT"
            said = await _refused(ws, "message.add", {"session_id": sid, "content": "three"})
            assert said["code"] == "CONFLICT" and "agent.login" in said["message"]
            await ws.call("agent.login", {"session_id": sid, "method_id": key_id, "key": SECRET})
            # Logged in again, the conversation goes on in the agent's restored session.
            assert "recall: one" in await _turn_text(ws, sid, "/recall")
