"""Sessions on ``executor = "container"``: the lifecycle drives an agentctl in a
real Podman container (through the Docker Engine API on a temporary socket)
exactly as it drives a local agent."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.executors.agentctl_adapter import AgentctlAdapter
from supervisor.executors.container import LABEL_BACKEND, LABEL_SESSION, backend_instance
from supervisor.models import CANCELLED_STATUS, SessionState
from supervisor.orchestrator import Caller
from supervisor.session.lifecycle import CancelOutcome
from tests.container.container_support import (
    Engine,
    agent_texts,
    session_containers,
    supervisor,
    wait_chunks,
)
from tests.support.sessions import new_agentctl_session
from tests.support.wait import wait_state

AGENTS = pytest.mark.parametrize("agent", ["mock", "mock-codex"])


def inspect(podman: str, cid: str) -> dict[str, Any]:
    out = subprocess.run([podman, "inspect", cid], capture_output=True, text=True, check=True,
                         timeout=60).stdout
    data: dict[str, Any] = json.loads(out)[0]
    return data


# What a process in the container (the agent, root there) can read of the token:
# every /proc/PID/environ it may open that holds it.
# (``podman exec`` hands the container's environment, token included, to what it
# runs: the probe runs under ``env -u`` and skips itself.)
_READ_TOKENS = """
import glob, json, os
found, readable = [], []
for path in glob.glob('/proc/[0-9]*/environ'):
    if path == f'/proc/{os.getpid()}/environ':
        continue
    try:
        data = open(path, 'rb').read()
        cmdline = open(path.replace('environ', 'cmdline'), 'rb').read()
    except OSError:
        continue
    readable.append(cmdline.replace(b'\\0', b' ').decode())
    if b'TURNVISOR_AGENTCTL_TOKEN=' in data:
        found.append(path)
print(json.dumps({'found': found, 'readable': readable}))
"""


@AGENTS
async def test_prompt_stream_cancel_and_next_prompt_in_one_container(
        tmp_path: Path, engine: Engine, agent: str) -> None:
    with trio.fail_after(90):
        async with supervisor(tmp_path, engine.image) as sup:
            caller, sid = await new_agentctl_session(sup, agent)
            [container] = session_containers(engine.podman, sid)
            info = inspect(engine.podman, container["Id"])
            assert info["Config"]["Labels"][LABEL_BACKEND] == backend_instance(sup.config)
            assert info["Config"]["Labels"][LABEL_SESSION] == sid
            host = info["HostConfig"]
            assert (host["NanoCpus"], host["Memory"], host["PidsLimit"]) == \
                (1_000_000_000, 512 * 1024**2, 256)
            # The token is in agentctl's environment, never in its arguments...
            assert any(e.startswith("TURNVISOR_AGENTCTL_TOKEN=") for e in info["Config"]["Env"])
            assert not any("TOKEN" in a for a in info["Args"])
            # ... and no process of the container that is not agentctl's can read it.
            probe = json.loads((await trio.run_process(
                [engine.podman, "exec", container["Id"], "env", "-u",
                 "TURNVISOR_AGENTCTL_TOKEN", "python", "-c", _READ_TOKENS],
                capture_stdout=True)).stdout)
            assert probe["found"] == [], probe
            # It could read the agent's environment: the token is just not there.
            assert any("protocols.mock_agent" in c for c in probe["readable"]), probe

            sub = sup.bus.subscriber()
            sub.subscribe(sid)
            await sup.orchestrator.send_message(caller, sid, "/delay 10000")
            await wait_chunks(sup, caller, sid)
            start = trio.current_time()
            outcome = await sup.orchestrator.cancel(caller, sid)
            assert outcome is CancelOutcome.ACKNOWLEDGED
            assert trio.current_time() - start < 3.0
            assert (await sup.orchestrator.session(caller, sid)).state is \
                SessionState.WAITING_FOR_INPUT
            statuses = [m for m in await sup.orchestrator.list_messages(caller, sid)
                        if m.kind == "status"]
            assert [(m.content, m.metadata) for m in statuses] == [
                (CANCELLED_STATUS, {"cancelled": True, "variant": "warning"})]
            frames = []
            while True:
                try:
                    frames.append(sub.receive_nowait())
                except trio.WouldBlock:
                    break
            assert [('"cancellation_pending":true' in f) for f in frames
                    if "session.cancellation_changed" in f] == [True, False]

            await sup.orchestrator.send_message(caller, sid, "hello again")
            await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=20)
            assert (await agent_texts(sup, caller, sid))[-1] == "hello again"
            assert [c["Id"] for c in session_containers(engine.podman, sid)] == \
                [container["Id"]]
        # Teardown stopped and removed it.
        assert session_containers(engine.podman, sid) == []


async def test_agent_crash_inside_the_container(tmp_path: Path, engine: Engine) -> None:
    with trio.fail_after(90):
        async with supervisor(tmp_path, engine.image) as sup:
            caller, sid = await new_agentctl_session(sup, "mock")
            [first] = session_containers(engine.podman, sid)
            await sup.orchestrator.send_message(caller, sid, "/crash")
            # The crash ends the execution; its container is torn down.
            with trio.fail_after(30):
                while session_containers(engine.podman, sid):
                    await trio.sleep(0.1)
            await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=20)
            assert not sup.notify.projection.get(sid).pending
            # The next prompt starts a new container and is answered.
            await sup.orchestrator.send_message(caller, sid, "after crash")
            await wait_state(sup, caller, sid, SessionState.WAITING_FOR_INPUT, timeout=20)
            with trio.fail_after(30):
                while (await agent_texts(sup, caller, sid))[-1:] != ["after crash"]:
                    await trio.sleep(0.05)
            [second] = session_containers(engine.podman, sid)
            assert second["Id"] != first["Id"]
            assert isinstance(sup.lifecycle.executions[sid].adapter, AgentctlAdapter)
        assert session_containers(engine.podman, sid) == []


async def test_ten_container_sessions_cancelled_at_once(tmp_path: Path, engine: Engine) -> None:
    n = 10
    with trio.fail_after(300):
        # A start (container + agentctl + initialize + session) takes seconds of CPU;
        # on two cores shared with other work, four at once can pass the default 30 s.
        async with supervisor(tmp_path, engine.image, agent_start_s=120) as sup:
            sessions: list[tuple[Caller, str]] = []

            async def start(i: int) -> None:
                caller, sid = await new_agentctl_session(sup, "mock" if i % 2 else "mock-codex")
                # Long enough to outlast the other sessions' start on a loaded machine.
                await sup.orchestrator.send_message(caller, sid, "/delay 600000")
                await wait_chunks(sup, caller, sid, timeout=120)
                sessions.append((caller, sid))

            # Four at a time: ten agentctls importing at once on two loaded cores
            # would only measure the machine.
            limit = trio.Semaphore(4)
            async with trio.open_nursery() as nursery:
                for i in range(n):
                    async def one(i: int = i) -> None:
                        async with limit:
                            await start(i)
                    nursery.start_soon(one)
            assert len(sessions) == n
            results: list[CancelOutcome] = []
            begin = trio.current_time()
            async with trio.open_nursery() as nursery:
                for caller, sid in sessions:
                    async def cancel(caller: Caller = caller, sid: str = sid) -> None:
                        results.append(await sup.orchestrator.cancel(caller, sid))
                    nursery.start_soon(cancel)
            elapsed = trio.current_time() - begin
            assert results == [CancelOutcome.ACKNOWLEDGED] * n
            assert elapsed < 10.0  # generous: two loaded cores, ten agentctls
            for caller, sid in sessions:
                assert not sup.notify.projection.get(sid).pending
                assert (await sup.orchestrator.session(caller, sid)).state is \
                    SessionState.WAITING_FOR_INPUT
            assert sum(len(session_containers(engine.podman, sid)) for _, sid in sessions) == n
        assert all(session_containers(engine.podman, sid) == [] for _, sid in sessions)
