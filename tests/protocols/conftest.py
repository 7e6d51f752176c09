"""Fixtures for the protocols tests.

Hypothesis profiles: ``ci`` (the default: a few hundred examples per property,
so the suite stays fast on a 2-core machine) and ``long`` (tens of thousands,
for a soak run): ``pytest tests/protocols --hypothesis-profile=long``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, settings

from protocols.adapters import AcpAdapter, AdapterTimeouts, CodexAdapter, ProtocolName
from protocols.mock_agent import ACP_VERSION_ENV, STATE_DIR_ENV
from protocols.process import start_agent_process, terminate_group

from .helpers import MOCK_AGENT, REPO_ROOT, RecordingSendStream, RunningAgent

# deadline=None: on a shared 2-core machine a single slow example is not a bug.
settings.register_profile("ci", max_examples=200, deadline=None)
settings.register_profile(
    "long",
    max_examples=30_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# This conftest is loaded before pytest_configure when tests/protocols is on the
# command line, so --hypothesis-profile=long is applied after us; only pick
# "ci" when nobody chose a profile.
if settings.get_current_profile_name() == "default":
    settings.load_profile("ci")

#: Generous bounds for the mock agent's start-up on a loaded machine; a test
#: that needs them is broken, one that stays under them is not slowed down.
SETUP_S = 15.0
TEST_TIMEOUTS = AdapterTimeouts(
    initialize_s=10.0, session_s=5.0, request_s=5.0, turn_s=10.0, write_s=5.0
)


async def _drain_stderr(proc: trio.Process, sink: bytearray) -> None:
    # An undrained stderr pipe would block an agent that logs a lot.
    assert proc.stderr is not None
    try:
        while data := await proc.stderr.receive_some(65536):
            sink += data
    except (trio.ClosedResourceError, trio.BrokenResourceError):
        pass  # terminate_group closed it under us: teardown, not an error


@pytest.fixture(params=["acp", "codex"])
def protocol(request: pytest.FixtureRequest) -> ProtocolName:
    value: ProtocolName = request.param
    return value


@pytest.fixture(params=["acp", "acp2", "codex"])
def dialect(request: pytest.FixtureRequest) -> str:
    """What the ``agent`` fixture's mock speaks: ACP 1, ACP 2 (the mock offers
    2 and the client's ``auto`` takes it), or Codex."""
    value: str = request.param
    return value


@pytest.fixture
def agent_env(tmp_path: Path) -> dict[str, str]:
    """The mock agent's environment: its sessions in the test's own state directory."""
    return {**os.environ, STATE_DIR_ENV: str(tmp_path / "mock-agent-state")}


@pytest.fixture
async def agent(dialect: str, agent_env: dict[str, str]) -> AsyncIterator[RunningAgent]:
    """The mock agent as a real subprocess, initialized, with a session open.

    Teardown always goes through ``terminate_group`` and then checks that the
    whole process group is gone.
    """
    protocol: ProtocolName = "codex" if dialect == "codex" else "acp"
    env = {**agent_env, ACP_VERSION_ENV: "2" if dialect == "acp2" else "1"}
    proc = await start_agent_process([*MOCK_AGENT, "--protocol", protocol], cwd=str(REPO_ROOT),
                                     env=env)
    pgid = proc.pid
    try:
        assert proc.stdin is not None and proc.stdout is not None
        written = RecordingSendStream(proc.stdin)
        cls = AcpAdapter if protocol == "acp" else CodexAdapter
        adapter = cls(written, proc.stdout, timeouts=TEST_TIMEOUTS)
        running = RunningAgent(protocol=protocol, proc=proc, adapter=adapter, written=written)
        async with trio.open_nursery() as nursery:
            await nursery.start(adapter.connection.run)
            nursery.start_soon(_drain_stderr, proc, running.stderr)
            with trio.fail_after(SETUP_S):
                await adapter.initialize()
                assert adapter.wire_protocol == {"acp": "acp/1", "acp2": "acp/2"}.get(
                    dialect, "codex")
                await adapter.new_session(os.getcwd())
            try:
                yield running
            finally:
                # The reader and the stderr drain belong to this fixture; the
                # process is torn down below, once, whatever happened.
                nursery.cancel_scope.cancel()
    finally:
        await terminate_group(proc, grace_s=1.0)
    assert proc.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
