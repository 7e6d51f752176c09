"""The local executor: the agent is a child of the backend, in its own process group."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from protocols.adapters import make_adapter
from protocols.process import start_agent_process, terminate_group
from protocols.sandbox import resolve_mode, wrap

from ..config import Config
from ..profiles import AgentProfile
from .base import LaunchedAgent
from .environment import agent_environment

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
    # The sandbox hides the data dir (token, database, config) from the agent,
    # after checking it is still the directory recorded at start.
    with wrap(profile.command, resolve_mode(profile.sandbox), cwd=cwd, env=env,
              hide=config.hidden_dirs(), extra_writable=profile.sandbox_writable) as command:
        proc = await start_agent_process(command.argv, env=env, cwd=cwd, tag=tag,
                                         pass_fds=command.pass_fds)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        adapter = make_adapter(
            profile.protocol, proc.stdin, proc.stdout, timeouts=config.timeouts.adapter(),
            max_line_bytes=config.limits.max_agent_line_bytes,
            thread_params=dict(profile.thread_params), acp_version=profile.acp_version,
        )
        yield LaunchedAgent(adapter=adapter, pgid=proc.pid, process=proc, stderr=proc.stderr,
                            tag=tag)
    finally:
        await terminate_group(proc, grace_s=config.timeouts.term_grace_s, tag=tag)
