"""Executors: how an agent is brought up for an execution.

- ``base``: ``LaunchedAgent`` and the ``Launcher`` type every executor fits;
- ``local``: the agent as a child process of the backend (its own group);
- ``agentctl``: the agent behind a ``turnvisor agentctl`` (at a URL, or a
  local one spawned per execution), driven over HTTP and a WebSocket;
- ``container``: an agentctl in a container of its own per execution, on
  Podman or Docker (``engine_api``: the Docker Engine API over httpx);
- ``kube``: an agentctl in a Pod of its own per execution, reached through
  the Kubernetes API server's Pod proxy (``kube_api``, ``kube_pod``);
- ``ssh``: an agentctl per execution on an SSH host, reached through a
  forwarded unix socket over one shared connection (``ssh_host``);
- ``environment``: the environment agents get (never Turnvisor's secrets).

``default_launcher`` picks each profile's executor, and gives the adapter the
launch's MCP servers (``profile.mcp_servers``; agentctl passes them on to its agent).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from ..config import Config
from ..profiles import AgentProfile
from .agentctl import launch_agentctl
from .base import LaunchedAgent, Launcher, TurnHandover
from .container import launch_container
from .kube import launch_kube
from .local import launch_local
from .ssh import SshHosts, launch_ssh

__all__ = ["LaunchedAgent", "Launcher", "TurnHandover", "default_launcher", "launch_agentctl",
           "launch_container", "launch_kube", "launch_local", "outlives_backend"]


def outlives_backend(profile: AgentProfile) -> bool:
    """Whether the profile's agent keeps running when the backend stops: an
    agentctl at a configured URL (nothing of it is ours to tear down), the
    detached agentctl of an ssh host, or a Pod (left running with its turn)."""
    return (profile.executor == "agentctl" and bool(profile.agentctl_url)) \
        or profile.executor in ("ssh", "kubernetes")


def default_launcher(config: Config) -> Launcher:
    """Each profile's own executor: ``local`` (a child process) or ``agentctl``
    (an agentctl at ``agentctl_url``, or a local agentctl spawned for it)."""

    ssh_hosts = SshHosts(config)

    def launch(profile: AgentProfile, cwd: str,
               session_id: str) -> AbstractAsyncContextManager[LaunchedAgent]:
        return _with_mcp(profile, executor(profile, cwd, session_id))

    def executor(profile: AgentProfile, cwd: str,
                 session_id: str) -> AbstractAsyncContextManager[LaunchedAgent]:
        if profile.executor == "agentctl":
            # Our session id is the owner agentctl re-attaches after a backend restart.
            return launch_agentctl(config, profile, cwd, owner=session_id)
        if profile.executor == "container":
            return launch_container(config, profile, cwd, owner=session_id)
        if profile.executor == "ssh":
            return launch_ssh(ssh_hosts, profile, cwd, owner=session_id)
        if profile.executor == "kubernetes":
            return launch_kube(config, profile, cwd, owner=session_id)
        return launch_local(config, profile, cwd)

    return launch


@asynccontextmanager
async def _with_mcp(profile: AgentProfile, launched: AbstractAsyncContextManager[LaunchedAgent],
                    ) -> AsyncIterator[LaunchedAgent]:
    async with launched as agent:
        # Set before the session opens: every session it opens or restores gets them.
        agent.adapter.mcp_servers = profile.mcp_servers
        yield agent
