"""What a session's DTO says of its agent (``agent_live``, ``agent_protocol``).

Written by the executions (an agent registered when it is up, forgotten when
its execution ends) and read by the notifier for every DTO it builds: a fact
kept below both, so that building a DTO calls nothing above it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import trio

from .profiles import AgentProfile

__all__ = ["AgentStatus"]


class AgentStatus:
    def __init__(self, profiles: Mapping[str, AgentProfile] | None = None) -> None:
        self._profiles: Mapping[str, AgentProfile] = profiles or {}
        #: Each running agent's connection's end (set once its output closed).
        self._closed: dict[str, trio.Event] = {}
        #: What each session's agent last negotiated in this backend (kept
        #: after the agent stops: the next one speaks what its profile allows).
        self.protocols: dict[str, str] = {}
        #: DESIGN.md §20: whether a remote agent's host answers, per session
        #: whose link survives a cut (registered with its execution).
        self._reach: dict[str, Callable[[], bool]] = {}
        #: DESIGN.md §20: the profile settings that changed since the running
        #: agent (re-attached after a restart) was started.
        self._changed: dict[str, tuple[str, ...]] = {}

    def up(self, session_id: str, protocol: str, closed: trio.Event) -> None:
        """The session's agent runs, speaking ``protocol``, until ``closed``."""
        self._closed[session_id] = closed
        self.protocols[session_id] = protocol

    def down(self, session_id: str, closed: trio.Event) -> None:
        """That agent's execution ended (a newer one's registration stays)."""
        if self._closed.get(session_id) is closed:
            del self._closed[session_id]
            self._reach.pop(session_id, None)
            self._changed.pop(session_id, None)

    def reach(self, session_id: str, reachable: Callable[[], bool]) -> None:
        """The session's agent is remote: ``reachable`` says whether its host answers."""
        self._reach[session_id] = reachable

    def profile_changed(self, session_id: str, fields: tuple[str, ...]) -> None:
        """The profile settings that changed since the session's running agent
        was started (until its execution ends)."""
        self._changed[session_id] = fields

    def reachable(self, session_id: str) -> bool:
        """False while the session's remote agent's host does not answer: its
        turn is then not known to run (DESIGN.md §20)."""
        reach = self._reach.get(session_id)
        return reach is None or reach()

    def agent_live(self, session_id: str) -> bool:
        """Whether the session's agent process is running: false before its
        first start and once it stopped."""
        closed = self._closed.get(session_id)
        return closed is not None and not closed.is_set()

    def liveness(self, session_id: str) -> tuple[bool, bool, tuple[str, ...]]:
        """``agent_live``, ``reachable`` and ``profile_changed`` in one call (a
        DTO needs them all; it is built on the cancel's path, whose calls are
        counted)."""
        closed = self._closed.get(session_id)
        reach = self._reach.get(session_id)
        return (closed is not None and not closed.is_set(), reach is None or reach(),
                self._changed.get(session_id, ()))

    def agent_protocol(self, profile_name: str, session_id: str) -> str | None:
        """``acp/1`` / ``acp/2`` / ``codex``: what the session's agent
        negotiated, else what its profile implies (None for an ACP profile
        with ``acp_version = "auto"`` whose agent has not started here)."""
        known = self.protocols.get(session_id)
        if known is not None:
            return known
        profile = self._profiles.get(profile_name)
        if profile is None:
            return None
        if profile.protocol == "codex":
            return "codex"
        return None if profile.acp_version == "auto" else f"acp/{profile.acp_version}"
