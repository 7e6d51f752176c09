"""Executors: how an agent is brought up for an execution.

An executor is an async context manager that yields a ``LaunchedAgent`` (an
adapter plus what the lifecycle needs to know about the process) and tears
the agent down on exit.  ``launch_local`` runs the agent as a child of the
backend, in its own process group.  Other executors (agentctl) yield an
adapter that speaks to an agent elsewhere; the lifecycle drives them all the
same way.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

import trio

from protocols.adapters import AdapterTimeouts, AgentAdapter, make_adapter
from protocols.process import start_agent_process, terminate_group

from .config import Config
from .profiles import AgentProfile

__all__ = ["LaunchedAgent", "Launcher", "default_launcher", "launch_local"]


@dataclass(eq=False)
class LaunchedAgent:
    adapter: AgentAdapter
    #: The agent's process group, when it is our child (recorded for the startup sweep).
    pgid: int | None = None
    process: trio.Process | None = None
    stderr: trio.abc.ReceiveStream | None = None

    @property
    def returncode(self) -> int | None:
        return self.process.returncode if self.process is not None else None


#: (profile, cwd, session id) → the agent, up for as long as the context lasts.
Launcher = Callable[[AgentProfile, str, str], AbstractAsyncContextManager[LaunchedAgent]]

#: Variables of the backend's environment that agents do not inherit.
PRIVATE_ENV = frozenset({"TURNVISOR_TOKEN"})


def adapter_timeouts(config: Config) -> AdapterTimeouts:
    t = config.timeouts
    return AdapterTimeouts(initialize_s=t.agent_start_s, session_s=t.agent_start_s,
                           request_s=t.agent_request_s, turn_s=t.turn_s,
                           write_s=t.agent_request_s)


@asynccontextmanager
async def launch_local(config: Config, profile: AgentProfile,
                       cwd: str) -> AsyncIterator[LaunchedAgent]:
    # The backend's token is not the agent's business: an agent runs shell
    # commands for a model provider, and ``env`` would hand it over.
    env = {k: v for k, v in os.environ.items() if k not in PRIVATE_ENV} | dict(profile.env)
    proc = await start_agent_process(profile.command, env=env, cwd=cwd)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        adapter = make_adapter(
            profile.protocol, proc.stdin, proc.stdout, timeouts=adapter_timeouts(config),
            max_line_bytes=config.limits.max_agent_line_bytes,
            thread_params=dict(profile.thread_params),
        )
        yield LaunchedAgent(adapter=adapter, pgid=proc.pid, process=proc, stderr=proc.stderr)
    finally:
        await terminate_group(proc, grace_s=config.timeouts.term_grace_s)


def default_launcher(config: Config) -> Launcher:
    """Each profile's own executor: ``local`` (a child process), ``agentctl``
    (an agentctl at ``agentctl_url``, or a local agentctl spawned for it) or
    ``container`` (an agentctl in a container of its own)."""

    def launch(profile: AgentProfile, cwd: str,
               session_id: str) -> AbstractAsyncContextManager[LaunchedAgent]:
        if profile.executor == "agentctl":
            # Imported here: the agentctl client is only needed by profiles that use it.
            from .agentctl_client import launch_agentctl

            # The session id is the owner agentctl re-attaches after a backend restart.
            return launch_agentctl(config, profile, cwd, owner=session_id)
        if profile.executor == "container":
            from .container_executor import launch_container

            return launch_container(config, profile, cwd, owner=session_id)
        return launch_local(config, profile, cwd)

    return launch
