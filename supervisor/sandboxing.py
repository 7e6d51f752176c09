"""Which sandbox each profile's agent gets here, and the one warning when the
default (bwrap) cannot run on this machine (protocols/sandbox.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Final

import trio

from protocols.sandbox import bwrap_works, resolve_mode

from .profiles import AgentProfile

__all__ = ["NO_SANDBOX_WARNING", "check_sandbox", "sandbox_modes", "sandbox_warning"]

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


async def check_sandbox(profiles: Mapping[str, AgentProfile]) -> None:
    """At start: run the (cached) probe off the Trio thread, warn once."""
    await trio.to_thread.run_sync(bwrap_works)
    warning = sandbox_warning(profiles)
    if warning is not None:
        log.warning("%s", warning)
