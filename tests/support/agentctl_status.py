"""agentctl's status once its agent has settled.

agentctl answers at once while its agent is still initializing (``starting``);
a test that asserts the agent's state right after something else it waited
for (a stray seen, a session made) would otherwise race that initialize on a
loaded machine. The caller bounds the wait (``trio.fail_after``)."""

from __future__ import annotations

from typing import Any

import trio

from supervisor.executors.agentctl_link import AgentctlLink

__all__ = ["status_once_started"]


async def status_once_started(link: AgentctlLink) -> dict[str, Any]:
    """agentctl's ``GET /api/v1/status`` once its agent has left ``starting``."""
    while True:
        _, status = await link.request("GET", "/api/v1/status", None, timeout_s=10)
        if status["agent"]["state"] != "starting":
            return status
        await trio.sleep(0.05)
