"""The fence each agent gets here: the programs the backend runs, resolved once
from directories no agent can write (protocols/tools.py), which sandbox each
profile's agent gets, and the one warning when the default (bwrap) cannot run
on this machine (protocols/sandbox.py)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import trio

from protocols.fence_paths import open_by_identity
from protocols.sandbox import bwrap_works, resolve_mode
from protocols.tools import Tools, current, install, resolve

from ..config import Config
from ..profiles import AgentProfile

__all__ = ["NO_SANDBOX_WARNING", "agent_home", "agent_writable_trees", "check_sandbox",
           "network_warnings", "prepare_agent_dirs", "project_identity", "resolve_tools",
           "sandbox_modes", "sandbox_warning"]

log = logging.getLogger(__name__)

NO_SANDBOX_WARNING: Final = (
    "bubblewrap (bwrap) cannot run on this machine: agents run WITHOUT a sandbox and can "
    "read Turnvisor's token, database and config (apt-get install bubblewrap, or set "
    "sandbox = \"none\" in the profile to silence this)")


def sandbox_modes(profiles: Mapping[str, AgentProfile]) -> dict[str, str]:
    """Profile name → ``bwrap`` or ``none`` (an agentctl profile: what its agentctl applies)."""
    return {name: resolve_mode(p.sandbox) for name, p in profiles.items()}


def sandbox_warning(profiles: Mapping[str, AgentProfile]) -> str | None:
    """The warning, if a profile left to the default runs unsandboxed."""
    if any(p.sandbox is None for p in profiles.values()) and not bwrap_works():
        return NO_SANDBOX_WARNING
    return None


def agent_writable_trees(config: Config) -> list[str]:
    """Every tree some agent of ``config`` can write: the default work dirs and
    agent homes under the data dir, the project roots, each profile's cwd and
    writable paths."""
    trees = [str(config.work_dir), str(config.data_dir / "homes"),
             *(str(r) for r in config.projects.roots)]
    for profile in config.profiles.values():
        trees += [os.path.expanduser(p) for p in profile.sandbox_writable]
        if profile.cwd:
            trees.append(os.path.expanduser(profile.cwd))
    return trees


def agent_home(config: Config, workspace_id: str, profile_name: str) -> Path:
    """The private writable home of ``profile_name``'s agents in a workspace:
    Turnvisor's, under the data dir, where no agent can re-point it (its
    parents are not writable to any agent)."""
    for part in (workspace_id, profile_name):
        if not part or "/" in part or part in (".", ".."):
            raise ValueError(f"not a path component: {part!r}")
    return config.data_dir / "homes" / workspace_id / profile_name


def prepare_agent_dirs(config: Config, cwd: str, home: str | None) -> None:
    """Make the session's cwd and the agent's private home where missing,
    without following a symbolic link an agent planted on the way
    (``PathRefused`` says which)."""
    trees = agent_writable_trees(config)
    for path in (cwd, home):
        if path is not None:
            os.close(open_by_identity(path, untrusted=trees, create=True).fd)


def project_identity(config: Config, path: str) -> tuple[int, int]:
    """The (device, inode) of the project directory ``path``, reached without
    following a link an agent planted (recorded at ``task.create``)."""
    opened = open_by_identity(path, untrusted=agent_writable_trees(config))
    os.close(opened.fd)
    return opened.identity


def resolve_tools(config: Config, *, unsandboxed: bool) -> Tools:
    """The programs for ``config``: ``unsandboxed`` (some agent runs without a
    fence, so it can write whatever this user can) trusts root's directories only."""
    search = None if config.tools_path is None else os.pathsep.join(config.tools_path)
    return resolve(search, untrusted=agent_writable_trees(config), owner_ok=not unsandboxed)


async def check_sandbox(config: Config) -> None:
    """At start: resolve and install the programs, run the (cached) probe off
    the Trio thread, warn once."""
    explicit_none = any(p.sandbox == "none" for p in config.profiles.values())
    install(resolve_tools(config, unsandboxed=explicit_none))
    await trio.to_thread.run_sync(bwrap_works)
    if not explicit_none and "none" in sandbox_modes(config.profiles).values():
        install(resolve_tools(config, unsandboxed=True))
    warning = sandbox_warning(config.profiles)
    if warning is not None:
        log.warning("%s", warning)
    for line in network_warnings(config.profiles):
        log.warning("%s", line)


def network_warnings(profiles: Mapping[str, AgentProfile]) -> list[str]:
    """What start says about the agents' network: each profile that shares the
    host's (it reaches Turnvisor's port and every local service), by choice or
    for want of passt's pasta, and the profiles that cannot start without it."""
    sandboxed = {n: p for n, p in profiles.items()
                 if p.executor == "local" and resolve_mode(p.sandbox) == "bwrap"}
    out = [f"agent profile {name!r} runs with network = \"host\": its agent can reach "
           "Turnvisor's port and every service on this machine's loopback"
           for name, p in sandboxed.items() if p.network == "host"]
    if current().get("pasta") is None:
        shared = sorted(n for n, p in sandboxed.items() if p.network is None)
        if shared:
            out.append(f"passt's pasta is not installed: agents of {', '.join(shared)} share "
                       "this machine's network and can reach Turnvisor's port (apt-get "
                       "install passt gives each its own)")
        closed = sorted(n for n, p in sandboxed.items() if p.network == "isolated")
        if closed:
            out.append(f"passt's pasta is not installed: agents of {', '.join(closed)} "
                       "(network = \"isolated\") cannot start (apt-get install passt)")
    return out
