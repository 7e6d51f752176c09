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

import importlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..models import Session
from ..profiles import AgentProfile
from .base import LaunchedAgent, Launcher, TurnHandover
from .local import launch_local

if TYPE_CHECKING:
    from .agentctl import launch_agentctl
    from .container import launch_container
    from .kube import launch_kube
    from .ssh import SshHosts

__all__ = ["LaunchedAgent", "Launcher", "TurnHandover", "default_launcher", "launch_agentctl",
           "launch_container", "launch_kube", "launch_local", "outlives_backend",
           "sweep_remote"]


def outlives_backend(profile: AgentProfile) -> bool:
    """Whether the profile's agent keeps running when the backend stops: an
    agentctl at a configured URL (nothing of it is ours to tear down), the
    detached agentctl of an ssh host, or a Pod (left running with its turn)."""
    return (profile.executor == "agentctl" and bool(profile.agentctl_url)) \
        or profile.executor in ("ssh", "kubernetes")


def default_launcher(config: Config) -> Launcher:
    """Each profile's own executor: ``local`` (a child process) or ``agentctl``
    (an agentctl at ``agentctl_url``, or a local agentctl spawned for it)."""

    ssh_hosts: SshHosts | None = None
    # The remote executors the profiles name, imported here (at the backend's
    # start), not at a session's first launch: an import is one synchronous
    # step of ~0.2-0.3 s (httpx, lightkube), in which no other session's cancel
    # would be written.  A backend on the local executor alone still imports none.
    for name in sorted({profile.executor for profile in config.profiles.values()}):
        if name in _MODULES:
            importlib.import_module(_MODULES[name], __name__)

    def launch(profile: AgentProfile, cwd: str,
               session_id: str) -> AbstractAsyncContextManager[LaunchedAgent]:
        return _with_mcp(profile, executor(profile, cwd, session_id))

    def executor(profile: AgentProfile, cwd: str,
                 session_id: str) -> AbstractAsyncContextManager[LaunchedAgent]:
        # The remote executors are imported when a profile names one: their
        # clients (httpx, lightkube) are most of a backend's start-up time, and
        # a backend on the local executor alone never needs them.
        nonlocal ssh_hosts
        if profile.executor == "agentctl":
            from .agentctl import launch_agentctl
            # Our session id is the owner agentctl re-attaches after a backend restart.
            return launch_agentctl(config, profile, cwd, owner=session_id)
        if profile.executor == "container":
            from .container import launch_container
            return launch_container(config, profile, cwd, owner=session_id)
        if profile.executor == "ssh":
            from .ssh import SshHosts, launch_ssh
            if ssh_hosts is None:
                ssh_hosts = SshHosts(config)
            return launch_ssh(ssh_hosts, profile, cwd, owner=session_id)
        if profile.executor == "kubernetes":
            from .kube import launch_kube
            return launch_kube(config, profile, cwd, owner=session_id)
        return launch_local(config, profile, cwd)

    return launch


async def sweep_remote(config: Config,
                       sessions: Callable[[], Awaitable[Iterable[Session]]]) -> None:
    """At start, what an earlier backend left on each remote executor its
    profiles name: containers, ssh hosts' runs but those of ``sessions`` (the
    store's), Pods but those of ``sessions``.  An executor no profile names is
    neither contacted nor imported (``executor`` says why)."""
    used = {profile.executor for profile in config.profiles.values()}
    if "container" in used:
        from .container import sweep_containers
        await sweep_containers(config)
    if "ssh" in used:
        from .ssh import sweep_ssh
        await sweep_ssh(config, sessions)
    if "kubernetes" in used:
        from .kube import sweep_kube
        await sweep_kube(config, sessions)


@asynccontextmanager
async def _with_mcp(profile: AgentProfile, launched: AbstractAsyncContextManager[LaunchedAgent],
                    ) -> AsyncIterator[LaunchedAgent]:
    async with launched as agent:
        # Set before the session opens: every session it opens or restores gets them.
        agent.adapter.mcp_servers = profile.mcp_servers
        yield agent


#: Each remote executor's module (``default_launcher`` imports those its profiles name).
_MODULES = {"agentctl": ".agentctl", "container": ".container", "ssh": ".ssh",
            "kubernetes": ".kube"}
_LAZY = {"launch_agentctl": ".agentctl", "launch_container": ".container",
         "launch_kube": ".kube"}


def __getattr__(name: str) -> Any:
    """The remote executors' launchers, imported on first use (see ``executor``)."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
