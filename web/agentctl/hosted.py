"""What agentctl hosts: the agent process (spawned in its sandbox behind the
launcher, torn down with its group), its state, and the turn it runs.

``host.py`` drives these; this module owns how the process comes and goes, so
the sandbox, the lifelines and the group's teardown are in one place.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Final

import trio

from protocols.acp import load_schema
from protocols.adapters import AgentAdapter, ProtocolName
from protocols.events import TurnEnded
from protocols.fence_paths import open_by_identity
from protocols.netns import resolve_network
from protocols.process import terminate_group
from protocols.sandbox import HomeBind, resolve_mode, wrap
from supervisor.executors.environment import agent_environment, private_home

from . import launcher
from .hostconfig import AgentctlConfig

__all__ = ["AgentState", "HostedAgent", "HostedTurn", "spawn_agent", "valid_turn_id", "warm_up"]

_MAX_TURN_ID: Final = 128


class AgentState(StrEnum):
    #: Spawned, ``initialize`` not answered yet.
    STARTING = "starting"
    #: Initialized; a session can be started.
    READY = "ready"
    #: ``initialize`` failed or the process could not start.
    FAILED = "failed"
    #: The process has exited (and its group is gone).
    EXITED = "exited"


@dataclass(eq=False)
class HostedTurn:
    id: str
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    done: trio.Event = field(default_factory=trio.Event)
    ended: TurnEnded | None = None
    cancel_requested: bool = False
    #: Set when the turn's task has returned (the adapter takes a prompt again).
    finished: trio.Event = field(default_factory=trio.Event)


@dataclass(eq=False)
class HostedAgent:
    process: trio.Process
    adapter: AgentAdapter
    nursery: trio.Nursery
    state: AgentState = AgentState.STARTING
    error: str | None = None
    #: Set once ``state`` leaves STARTING.
    settled: trio.Event = field(default_factory=trio.Event)
    exited: trio.Event = field(default_factory=trio.Event)
    session_id: str | None = None
    owner: str | None = None
    turn: HostedTurn | None = None

    @property
    def alive(self) -> bool:
        return self.state in (AgentState.STARTING, AgentState.READY)


@asynccontextmanager
async def spawn_agent(cfg: AgentctlConfig) -> AsyncIterator[trio.Process]:
    """The agent process, in the same sandbox as the backend's local agents,
    behind the launcher (the group leader that ties it to agentctl: if
    agentctl dies, the lifeline's end kills the group); on exit its group is
    torn down (stdin EOF, SIGTERM, grace, SIGKILL) and the lifelines closed."""
    env = agent_environment(cfg.env)
    mode = await trio.to_thread.run_sync(resolve_mode, cfg.sandbox)
    binds: list[HomeBind] = []
    if mode == "bwrap" and cfg.home is not None:
        # Its own HOME, never the person's (which holds the data dir).
        os.close(open_by_identity(cfg.home, create=True).fd)
        env, binds = private_home(env, cfg.env, cfg.home, cfg.home_binds)
    lifeline_r, lifeline_w = os.pipe()
    try:
        with wrap(cfg.command, mode, cwd=cfg.cwd, env=env, hide=cfg.hide,
                  extra_writable=cfg.sandbox_writable, home_binds=binds,
                  network=resolve_network(cfg.network),
                  host_ports=cfg.host_ports) as command:
            # The sandbox's descriptors go on through the launcher to bwrap.
            keep = [a for fd in command.pass_fds for a in ("--keep-fd", str(fd))]
            proc = await trio.lowlevel.open_process(
                [sys.executable, str(Path(launcher.__file__)), "--lifeline",
                 str(lifeline_r), *keep, "--", *command.argv],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=env, cwd=cfg.cwd, start_new_session=True,
                pass_fds=(lifeline_r, *command.pass_fds),
            )
            # The sandbox's own lifeline goes with agentctl's (below).
            sandbox_lifeline = command.take_lifeline()
    except BaseException:
        os.close(lifeline_w)
        raise
    finally:
        os.close(lifeline_r)
    try:
        yield proc
    finally:
        await terminate_group(proc, grace_s=cfg.timeouts.term_grace_s)
        os.close(lifeline_w)
        if sandbox_lifeline is not None:
            os.close(sandbox_lifeline)


def warm_up(protocol: ProtocolName) -> None:
    """Pay the protocol core's one-time costs early, on a worker thread.

    The ACP core's pydantic schema models take about a second of CPU to
    build: paid on the Trio thread in the middle of a turn (its first tool
    call, or its end), it would stall the event loop, and a cancel arriving
    then, for that long."""
    if protocol != "acp":
        return
    load_schema()


def valid_turn_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= _MAX_TURN_ID and value.isprintable()
