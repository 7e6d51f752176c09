"""What every executor hands the lifecycle: the launched agent, and the launcher type.

An executor is an async context manager that yields a ``LaunchedAgent`` (an
adapter plus what the lifecycle needs to know about the process) and tears
the agent down on exit.  The lifecycle drives every executor's agent the same
way; it never asks which executor it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

import trio

from protocols.adapters import AgentAdapter
from protocols.process_group import Stray, StraysEnded

from ..profiles import AgentProfile

__all__ = ["LaunchedAgent", "Launcher", "StrayControl", "TurnHandover"]


class TurnHandover(Protocol):
    """How a running turn passes from one backend to the next, for an agent
    that outlives the backend (an agentctl at a configured URL).

    The lifecycle binds each turn to our turn id before its prompt, records
    after each batch of events it wrote down the position ``take`` returns,
    and after a restart ``adopt``s the turn (before the link runs), opens the
    session, and asks ``settle_adoption`` whether the turn is its own again.
    """

    def bind_turn(self, turn_id: str) -> None: ...
    def take(self, count: int) -> int | None: ...
    def adopt(self, turn_id: str, after: int) -> None: ...
    async def settle_adoption(self) -> bool: ...
    def detach(self) -> None: ...


class StrayControl(Protocol):
    """The processes left in the agent's process group, the agent and what
    holds it excluded (protocols/process_group.py), for the stop receipt's
    ``strays`` and ``session.kill_strays``.

    ``scan`` lists them (oldest first); ``end`` SIGTERMs each one still in the
    group (``only`` these, when given: the same pid and start time), SIGKILLs
    those alive after a short grace, and returns the pids it ended and the
    strays left.  Local agents are read from /proc here;
    agentctl's (and a container's, whose agentctl is its PID 1) through
    agentctl's ``/api/v1/agent/strays`` endpoints, failing like every agentctl
    call (``AgentClosed``, ``AgentTimeout``)."""

    async def scan(self) -> list[Stray]: ...
    async def end(self, only: Sequence[Stray] | None = None) -> StraysEnded: ...


@dataclass(eq=False)
class LaunchedAgent:
    adapter: AgentAdapter
    #: The agent's process group, when it is our child (recorded for the startup sweep).
    pgid: int | None = None
    process: trio.Process | None = None
    stderr: trio.abc.ReceiveStream | None = None
    #: The tag in the agent's environment (its tools inherit it), recorded for the sweep.
    tag: str | None = None
    #: Set when the agent outlives the backend: its running turn is handed over
    #: to the next backend instead of being stopped at shutdown.
    handover: TurnHandover | None = None
    #: The agent's strays (``StrayControl``); None where the executor cannot
    #: see its agent's processes.
    strays: StrayControl | None = None
    #: DESIGN.md §20: re-attached to an agent a previous backend started from
    #: a profile whose settings named here have changed since (launch_record.py):
    #: it runs on as it was started; the change applies at its next start.
    profile_changed: tuple[str, ...] = ()

    @property
    def returncode(self) -> int | None:
        return self.process.returncode if self.process is not None else None


#: (profile, cwd, our session id) → the agent, up for as long as the context lasts.
Launcher = Callable[[AgentProfile, str, str], AbstractAsyncContextManager[LaunchedAgent]]
