"""Session continuity (DESIGN.md §10) against the mock agent as a real
subprocess, both dialects: after a backend restart, an agent crash, an
escalation replacement and an idle stop, the next prompt runs in a fresh agent
process that restored the conversation (``/recall`` lists the earlier
prompts); an agent that cannot restore starts fresh with the warning."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import trio

from supervisor.models import SessionState
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor
from supervisor.session.lifecycle import CancelOutcome
from supervisor.turn.restore import RESTORE_FAILED_STATUS
from tests.support.leaks import pgid_alive
from tests.support.sessions import new_session

from .conftest import SupervisorFactory

AGENTS = ["mock", "mock-acp2", "mock-codex"]


def _no_restore(protocol: str) -> dict[str, Any]:
    """A mock agent that cannot restore (ACP: advertises neither; Codex: refuses)."""
    return {"norestore": {"protocol": protocol, "command": [
        sys.executable, "-m", "protocols.mock_agent", "--protocol", protocol,
        "--restore", "none"]}}


async def _turn(sup: Supervisor, caller: Caller, sid: str, prompt: str) -> str:
    """Send ``prompt``, wait for its turn to end; the agent's answer."""
    msg = await sup.orchestrator.send_message(caller, sid, prompt)
    assert msg.turn_id is not None  # send_message starts a turn (or raises Conflict)
    with trio.fail_after(20):
        while True:
            turn = await sup.store.get_turn(msg.turn_id)
            if turn is not None and turn.state != "running":
                break
            await trio.sleep(0.02)
    return "".join(m.content for m in await sup.orchestrator.list_messages(caller, sid)
                   if m.turn_id == msg.turn_id and m.role == "agent" and m.kind == "text")


async def _dto(sup: Supervisor, caller: Caller, sid: str) -> dict[str, Any]:
    return dict(sup.notify.session_dto(await sup.orchestrator.session(caller, sid)))


async def _gone(sup: Supervisor, sid: str, pgid: int | None) -> None:
    with trio.fail_after(10):
        while sup.lifecycle.agent_live(sid) or (pgid is not None and pgid_alive(pgid)):
            await trio.sleep(0.02)


async def _warnings(sup: Supervisor, caller: Caller, sid: str) -> list[Any]:
    return [m for m in await sup.orchestrator.list_messages(caller, sid)
            if m.content == RESTORE_FAILED_STATUS]


@pytest.mark.parametrize("agent", AGENTS)
async def test_restore_after_a_backend_restart(
    make_supervisor: SupervisorFactory, agent: str
) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, agent)
        assert await _turn(sup, caller, sid, "first words") == "first words"
        await _turn(sup, caller, sid, "second words")
        ref = await sup.store.get_agent_session(sid)
        assert ref is not None and ref.profile == agent and ref.agent_session_id != sid
    async with make_supervisor() as sup:
        caller = await sup.caller()
        dto = await _dto(sup, caller, sid)
        assert dto["agent_live"] is False and dto["state"] == "WAITING_FOR_INPUT"
        answer = await _turn(sup, caller, sid, "/recall")
        assert answer == "recall: first words | second words"
        assert (await _dto(sup, caller, sid))["agent_live"] is True
        assert await _warnings(sup, caller, sid) == []
        # The same agent conversation, still stored for the next restart.
        assert await sup.store.get_agent_session(sid) == ref


#: The session DTO's ``protocol`` once the agent negotiated (DESIGN.md §13).
NEGOTIATED = {"mock": "acp/1", "mock-acp2": "acp/2", "mock-codex": "codex"}


@pytest.mark.parametrize("agent", AGENTS)
async def test_the_session_dto_names_the_negotiated_protocol(make_supervisor: SupervisorFactory,
                                                             agent: str) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, agent)
        await _turn(sup, caller, sid, "hello")
        assert (await _dto(sup, caller, sid))["protocol"] == NEGOTIATED[agent]
    async with make_supervisor() as sup:
        caller = await sup.caller()
        # A new backend has not run this session's agent yet: what the
        # profile says (``acp_version = "auto"`` has not negotiated).
        before = None if agent != "mock-codex" else "codex"
        assert (await _dto(sup, caller, sid))["protocol"] == before
        assert await _turn(sup, caller, sid, "/recall") == "recall: hello"
        assert (await _dto(sup, caller, sid))["protocol"] == NEGOTIATED[agent]


@pytest.mark.parametrize("agent", AGENTS)
async def test_restore_after_an_agent_crash(make_supervisor: SupervisorFactory, agent: str) -> None:
    async with make_supervisor() as sup:
        caller, sid = await new_session(sup, agent)
        await _turn(sup, caller, sid, "before the crash")
        pgid = sup.lifecycle.executions[sid].agent.pgid
        await _turn(sup, caller, sid, "/crash")
        await _gone(sup, sid, pgid)
        assert (await _dto(sup, caller, sid))["agent_live"] is False
        answer = await _turn(sup, caller, sid, "/recall")
        assert answer.startswith("recall: before the crash"), answer
        assert sup.lifecycle.executions[sid].agent.pgid != pgid
        assert await _warnings(sup, caller, sid) == []


@pytest.mark.parametrize("agent", AGENTS)
async def test_restore_after_an_escalation_replaced_the_agent(
    make_supervisor: SupervisorFactory, agent: str
) -> None:
    async with make_supervisor(cancel_join_s=0.3, cancel_escalate_s=0.8) as sup:
        caller, sid = await new_session(sup, agent)
        await _turn(sup, caller, sid, "remember me")
        pgid = sup.lifecycle.executions[sid].agent.pgid
        await sup.orchestrator.send_message(caller, sid, "/hang")
        await trio.sleep(0.2)
        with trio.fail_after(10):
            assert await sup.orchestrator.cancel(caller, sid) is CancelOutcome.ESCALATED
        answer = await _turn(sup, caller, sid, "/recall")
        assert answer.startswith("recall: remember me"), answer
        assert sup.lifecycle.executions[sid].agent.pgid != pgid
        assert pgid is None or not pgid_alive(pgid)


@pytest.mark.parametrize("agent", AGENTS)
async def test_an_idle_agent_is_stopped_and_the_next_prompt_restores(
    make_supervisor: SupervisorFactory, agent: str
) -> None:
    async with make_supervisor(idle_agent_s=1.0) as sup:
        caller, sid = await new_session(sup, agent)
        await _turn(sup, caller, sid, "/delay 1500")  # a turn longer than idle_agent_s
        pgid = sup.lifecycle.executions[sid].agent.pgid
        assert sup.lifecycle.agent_live(sid)  # the running turn kept it alive
        await _turn(sup, caller, sid, "still here")
        await _gone(sup, sid, pgid)
        dto = await _dto(sup, caller, sid)
        assert dto["agent_live"] is False and dto["state"] == "WAITING_FOR_INPUT"
        answer = await _turn(sup, caller, sid, "/recall")
        assert answer == "recall: /delay 1500 | still here"
        assert (await sup.orchestrator.session(caller, sid)).state is \
            SessionState.WAITING_FOR_INPUT


@pytest.mark.parametrize("protocol", ["acp", "codex"])
async def test_an_agent_that_cannot_restore_starts_fresh_with_the_warning(
    make_supervisor: SupervisorFactory, protocol: str
) -> None:
    async with make_supervisor(agents=_no_restore(protocol)) as sup:
        caller, sid = await new_session(sup, "norestore")
        await _turn(sup, caller, sid, "forgotten")
    async with make_supervisor(agents=_no_restore(protocol)) as sup:
        caller = await sup.caller()
        assert await _turn(sup, caller, sid, "/recall") == "recall: (nothing)"
        [warning] = await _warnings(sup, caller, sid)
        assert warning.role == "system" and warning.kind == "status"
        assert warning.metadata == {"resumed": False, "variant": "warning"}
        # The fresh conversation is the one stored now: the next restart restores it.
        assert await _turn(sup, caller, sid, "/recall") == "recall: /recall"
        assert len(await _warnings(sup, caller, sid)) == 1


async def test_session_load_replay_is_not_stored_again(make_supervisor: SupervisorFactory) -> None:
    load_only = {"mockload": {"protocol": "acp", "command": [
        sys.executable, "-m", "protocols.mock_agent", "--protocol", "acp", "--restore", "load"]}}
    async with make_supervisor(agents=load_only) as sup:
        caller, sid = await new_session(sup, "mockload")
        await _turn(sup, caller, sid, "alpha")
        await _turn(sup, caller, sid, "beta")
        before = await sup.orchestrator.list_messages(caller, sid)
    async with make_supervisor(agents=load_only) as sup:
        caller = await sup.caller()
        assert await _turn(sup, caller, sid, "/recall") == "recall: alpha | beta"
        after = await sup.orchestrator.list_messages(caller, sid)
        # Only the new turn's prompt and answer: the replayed history is not stored.
        assert [m.id for m in after[:len(before)]] == [m.id for m in before]
        assert [(m.role, m.content) for m in after[len(before):]] == [
            ("user", "/recall"), ("agent", "recall: alpha | beta")]
