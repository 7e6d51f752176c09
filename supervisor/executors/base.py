"""What every executor hands the lifecycle: the launched agent, and the launcher type.

An executor is an async context manager that yields a ``LaunchedAgent`` (an
adapter plus what the lifecycle needs to know about the process) and tears
the agent down on exit.  The lifecycle drives every executor's agent the same
way; it never asks which executor it came from.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import trio

from protocols.adapters import AgentAdapter

from ..profiles import AgentProfile

__all__ = ["LaunchedAgent", "Launcher"]


@dataclass(eq=False)
class LaunchedAgent:
    adapter: AgentAdapter
    #: The agent's process group, when it is our child (recorded for the startup sweep).
    pgid: int | None = None
    process: trio.Process | None = None
    stderr: trio.abc.ReceiveStream | None = None
    #: The tag in the agent's environment (its tools inherit it), recorded for the sweep.
    tag: str | None = None

    @property
    def returncode(self) -> int | None:
        return self.process.returncode if self.process is not None else None


#: (profile, cwd, our session id) → the agent, up for as long as the context lasts.
Launcher = Callable[[AgentProfile, str, str], AbstractAsyncContextManager[LaunchedAgent]]
