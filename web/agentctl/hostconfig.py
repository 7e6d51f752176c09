"""What agentctl's host is configured with, and the refusals it answers with."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from protocols.adapters import ProtocolName
from protocols.framing import DEFAULT_MAX_LINE_BYTES
from protocols.sandbox import HiddenDir
from supervisor.config import Timeouts

__all__ = ["AgentctlConfig", "HostError", "not_running"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentctlConfig:
    command: tuple[str, ...]
    protocol: ProtocolName
    #: Merged over agentctl's environment (minus Turnvisor's secrets) for the agent.
    env: Mapping[str, str] = field(default_factory=dict)
    #: The agent's working directory, and a session's cwd when a client names none.
    cwd: str = field(default_factory=os.getcwd)
    #: Extra ``thread/start`` parameters (Codex only).
    thread_params: Mapping[str, Any] = field(default_factory=dict)
    #: Every bound, as the backend names them (supervisor/config.py): agentctl
    #: uses ``cancel_join_s`` (the join window when a cancel request names
    #: none), ``cancel_operation_s`` (the longest one it may name),
    #: ``agent_start_s``, ``agent_request_s``, ``turn_s``, ``term_grace_s`` and
    #: ``cancel_cleanup_s`` (how long a turn task waits for the reader to publish
    #: a turn's end before publishing it itself).
    timeouts: Timeouts = field(default_factory=Timeouts)
    #: Frames queued to one event-stream subscriber before it is dropped.
    subscriber_buffer: int = 1024
    #: Log entries kept for reconnecting subscribers.
    replay_events: int = 4096
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    #: ``bwrap``, ``none``, or None: bwrap when it works here (protocols/sandbox.py).
    sandbox: str | None = None
    #: Directories the sandbox hides from the agent (a Turnvisor data dir): by
    #: identity, checked before each launch, when recorded (``HiddenDir.record``).
    hide: tuple[HiddenDir | str, ...] = ()
    #: Paths the sandboxed agent may write besides its cwd, its own /tmp and its homes.
    sandbox_writable: tuple[str, ...] = ()
    #: The sandboxed agent's private writable home (its HOME and XDG dirs; made
    #: when missing), and what it needs of the person's real home: ``(path
    #: under ~, writable)`` bound over the same place in it (DESIGN.md §17).
    home: str | None = None
    home_binds: tuple[tuple[str, bool], ...] = ()
    #: ``isolated``: the agent's own network namespace, outbound only, plus the
    #: host's loopback ``host_ports`` (protocols/netns.py); ``host``: agentctl's;
    #: None: isolated where passt's pasta is installed.
    network: str | None = None
    host_ports: tuple[int, ...] = ()
    #: DESIGN.md §20: cancel the running turn once no client has been connected
    #: to the event stream this long (None: never; web/agentctl/offline.py).
    offline_cancel_s: float | None = None


class HostError(Exception):
    """A request agentctl refuses; ``status`` and ``body`` are the HTTP answer."""

    def __init__(self, status: int, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.status = status
        self.body: dict[str, Any] = {"success": False, "error": error, **extra}


def not_running(detail: str | None = None) -> HostError:
    return HostError(503, "agent not running", **({"detail": detail} if detail else {}))
