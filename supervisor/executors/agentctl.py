"""The agentctl executor: an agent behind a ``turnvisor agentctl``.

With ``agentctl_url`` the backend connects to an agentctl elsewhere (another
machine, a container); without it a local agentctl is spawned per execution
in its own process group.  Either way the lifecycle gets an
``AgentctlAdapter`` and drives it like a local agent.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import trio

from protocols.agentctl_wire import TOKEN_ENV
from protocols.process import terminate_group

from ..config import Config
from ..profiles import AgentProfile
from .agentctl_adapter import AgentctlAdapter
from .agentctl_strays import AgentctlStrays
from .base import LaunchedAgent
from .environment import agent_environment

__all__ = ["agentctl_token", "launch_agentctl", "offline_args", "spawn_agentctl"]


def agentctl_token(profile: AgentProfile) -> str | None:
    """The profile's ``agentctl_token``, else ``TURNVISOR_AGENTCTL_TOKEN`` in its
    ``env``, else in the backend's environment."""
    return (profile.agentctl_token or profile.env.get(TOKEN_ENV)
            or os.environ.get(TOKEN_ENV))


def offline_args(profile: AgentProfile) -> list[str]:
    """The profile's ``offline_cancel_s`` as agentctl's flag (DESIGN.md §20),
    for every executor that starts an agentctl."""
    if profile.offline_cancel_s is None:
        return []
    return ["--offline-cancel-s", f"{profile.offline_cancel_s:g}"]


@asynccontextmanager
async def spawn_agentctl(profile: AgentProfile, cwd: str, token: str, *, start_s: float,
                         term_grace_s: float, extra_args: Sequence[str] = (),
                         ) -> AsyncIterator[tuple[trio.Process, str]]:
    """A local ``turnvisor agentctl`` for ``profile`` on a free loopback port, in
    its own process group; yields it and its URL, and tears it down on exit
    (SIGTERM: agentctl stops its agent; SIGKILL after ``term_grace_s``: the
    agent's lifeline kills its group)."""
    ready_r, ready_w = os.pipe()
    # The backend's own token stays with the backend (agentctl passes its
    # environment on to the agent, minus the agentctl token).
    env = agent_environment(profile.env) | {TOKEN_ENV: token}
    command = [sys.executable, "-m", "web", "agentctl", "--listen", "127.0.0.1:0",
               "--protocol", profile.protocol, "--cwd", cwd, "--ready-fd", str(ready_w),
               *extra_args, "--", *profile.command]
    try:
        proc = await trio.lowlevel.open_process(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, env=env, process_group=0, pass_fds=(ready_w,))
    except BaseException:
        os.close(ready_r)
        raise
    finally:
        os.close(ready_w)
    try:
        ready = trio.lowlevel.FdStream(ready_r)
        buf = b""
        with trio.move_on_after(start_s):
            while not buf.endswith(b"\n"):
                chunk = await ready.receive_some(4096)
                if not chunk:
                    break
                buf += chunk
        await ready.aclose()
        url = buf.decode(errors="replace").strip()
        if not url.startswith("http"):
            raise OSError(f"agentctl did not report its URL within {start_s:g}s "
                          f"(exit status {proc.returncode})")
        yield proc, url
    finally:
        await terminate_group(proc, grace_s=term_grace_s)


@asynccontextmanager
async def launch_agentctl(config: Config, profile: AgentProfile, cwd: str, *,
                          owner: str | None = None) -> AsyncIterator[LaunchedAgent]:
    """The executor for ``executor = "agentctl"`` profiles.

    With ``agentctl_url``: connect to that agentctl (token: ``agentctl_token``);
    nothing is spawned and nothing is torn down but the connection, so the agent
    survives a backend restart and is re-attached by ``owner``, with its running
    turn (``TurnHandover``).  Without it:
    spawn a local agentctl (own process group, recorded like an agent's) and
    tear it down, agent included, on exit.
    """
    timeouts = config.timeouts
    url = profile.agentctl_url
    if url:
        token = agentctl_token(profile)
        if not token:
            raise OSError(f"profile {profile.name!r}: no agentctl token "
                          f"(agentctl_token, or {TOKEN_ENV} in env)")
        # Reached over a network: a cut is waited out, not taken for a crash
        # (DESIGN.md §20).
        adapter = AgentctlAdapter(url, token, owner=owner, session_cwd=profile.cwd,
                                  protocol=profile.protocol, timeouts=timeouts,
                                  reconnect=True)
        try:
            yield LaunchedAgent(adapter=adapter, handover=adapter,
                                strays=AgentctlStrays(adapter.connection))
        finally:
            await adapter.aclose()
        return
    token = secrets.token_urlsafe(32)
    # The agentctl's agent gets the local agents' sandbox: this data dir hidden,
    # once it is checked to be the one recorded at start (agentctl records it
    # anew and checks it before each of its own launches).
    for hidden in config.hidden_dirs():
        hidden.check()
    sandbox_args = ["--hide", str(config.data_dir), *offline_args(profile),
                    *(["--sandbox", profile.sandbox] if profile.sandbox else []),
                    *(a for p in profile.sandbox_writable for a in ("--sandbox-writable", p)),
                    *(["--home", profile.private_home] if profile.private_home else []),
                    *(a for name in profile.env for a in ("--profile-env", name)),
                    *(["--network", profile.network] if profile.network else []),
                    *(a for port in profile.host_ports for a in ("--host-port", str(port))),
                    *(a for rel, rw in profile.home_binds
                      for a in ("--home-bind", f"~/{rel}" + ("" if rw else ":ro")))]
    async with spawn_agentctl(profile, cwd, token, start_s=config.timeouts.agent_start_s,
                              term_grace_s=config.timeouts.term_grace_s,
                              extra_args=sandbox_args) as (proc, url):
        adapter = AgentctlAdapter(url, token, owner=owner, session_cwd=cwd,
                                  protocol=profile.protocol, timeouts=timeouts)
        try:
            # ``pgid`` is agentctl's group; the agent's is agentctl's to scan.
            yield LaunchedAgent(adapter=adapter, pgid=proc.pid,
                                process=proc, stderr=proc.stderr,
                                strays=AgentctlStrays(adapter.connection))
        finally:
            await adapter.aclose()
