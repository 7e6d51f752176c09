"""The local executor: the agent is a child of the backend, in its own process group."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from protocols.adapters import make_adapter
from protocols.netns import resolve_network
from protocols.process import start_agent_process, terminate_group
from protocols.process_group import GroupStrays
from protocols.sandbox import HomeBind, resolve_mode, wrap

from ..config import Config
from ..profiles import AgentProfile
from ..workspace.sandboxing import agent_writable_trees
from .base import LaunchedAgent
from .environment import agent_environment, private_home

__all__ = ["launch_local"]


@asynccontextmanager
async def launch_local(config: Config, profile: AgentProfile,
                       cwd: str) -> AsyncIterator[LaunchedAgent]:
    # The tag finds the agent's tools wherever they went (their own group or
    # session, re-parented after the agent exited): they are stopped with it.
    tag = uuid.uuid4().hex
    env = agent_environment(profile.env)
    if shutil.which(profile.command[0], path=env.get("PATH")) is None:
        # Said before the sandbox hides it behind its own "execvp" failure.
        raise FileNotFoundError(f"{profile.command[0]}: command not found")
    mode = resolve_mode(profile.sandbox)
    binds: list[HomeBind] = []
    if mode == "bwrap" and profile.private_home is not None:
        # The person's real home is read-only to the agent and not its HOME;
        # what it needs from there is bound by identity (home_binds).
        env, binds = private_home(env, profile.env, profile.private_home, profile.home_binds)
    # The sandbox hides the data dir (token, database, config) from the agent,
    # after checking it is still the directory recorded at start; every
    # writable path is bound by descriptor, opened without following a link
    # an agent could have planted (protocols/fence_paths.py).
    with wrap(profile.command, mode, cwd=cwd, env=env, hide=config.hidden_dirs(),
              extra_writable=profile.sandbox_writable, untrusted=agent_writable_trees(config),
              home_binds=binds, network=resolve_network(profile.network),
              host_ports=profile.host_ports, cwd_identity=profile.cwd_identity) as command:
        proc = await start_agent_process(command.argv, env=env, cwd=cwd, tag=tag,
                                         pass_fds=command.pass_fds)
        # Held while the agent lives: its close (ours, or our death's) ends the sandbox.
        lifeline = command.take_lifeline()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        adapter = make_adapter(
            profile.protocol, proc.stdin, proc.stdout, timeouts=config.timeouts.adapter(),
            max_line_bytes=config.limits.max_agent_line_bytes,
            thread_params=dict(profile.thread_params), acp_version=profile.acp_version,
        )
        # Sandboxed, the group's leader is protocols/leader.py and the agent
        # pid 2 of the sandbox's pid namespace (protocols/process_group.py).
        strays = GroupStrays(proc, "sandbox" if mode == "bwrap" else "agent")
        yield LaunchedAgent(adapter=adapter, pgid=proc.pid, process=proc, stderr=proc.stderr,
                            tag=tag, strays=strays)
    finally:
        try:
            await terminate_group(proc, grace_s=config.timeouts.term_grace_s, tag=tag)
        finally:
            if lifeline is not None:
                os.close(lifeline)
