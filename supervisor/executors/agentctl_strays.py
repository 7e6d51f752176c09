"""The strays of an agent behind agentctl (``StrayControl`` over its HTTP API).

agentctl knows its agent's process group (its launcher leads it) and scans it
where it runs, on its own machine or in its container
(web/agentctl/strays.py); this asks it, on the link's bounded HTTP calls.  A
failure is an agentctl call's (``AgentClosed``: the link is lost;
``AgentTimeout``: no answer in time, an agentctl without these endpoints, or
an answer that is not the expected shape).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, TypeGuard

from protocols.process_group import STRAY_GRACE_S, Stray, StraysEnded
from protocols.transport import AgentTimeout

from .agentctl_link import AgentctlLink

__all__ = ["AgentctlStrays", "parse_strays"]

_PATH: Final = "/api/v1/agent/strays"
#: Beyond the grace: the SIGKILL's landing and the two scans.
_KILL_MARGIN_S: Final = 2.0


def parse_strays(value: object, what: str) -> list[Stray]:
    """agentctl's ``[{pid, command, start}]``; ``AgentTimeout`` naming ``what``
    if it is anything else."""
    if not isinstance(value, list):
        raise AgentTimeout(f"agentctl's {what} is not a list")
    out = []
    for item in value:
        entry: dict[str, Any] = item if isinstance(item, dict) else {}
        pid, command, start = entry.get("pid"), entry.get("command"), entry.get("start")
        if not (_count(pid) and pid > 0 and isinstance(command, str) and _count(start)):
            raise AgentTimeout(f"agentctl's {what} holds a malformed entry: {item!r:.200}")
        out.append(Stray(pid, command, start))
    return out


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class AgentctlStrays:
    """``scan`` and ``end`` through agentctl (module doc)."""

    def __init__(self, link: AgentctlLink, *, grace_s: float = STRAY_GRACE_S) -> None:
        self.link = link
        self.grace_s = grace_s

    async def scan(self) -> list[Stray]:
        _, data = await self.link.request("GET", _PATH, None,
                                          timeout_s=self.link.timeouts.agent_request_s)
        return parse_strays(data.get("strays"), "strays")

    async def end(self, only: Sequence[Stray] | None = None) -> StraysEnded:
        body: dict[str, Any] = {"grace_s": self.grace_s}
        if only is not None:
            body["only"] = [{"pid": s.pid, "start": s.start} for s in only]
        _, data = await self.link.request(
            "POST", _PATH + "/kill", body,
            timeout_s=self.link.timeouts.agent_request_s + self.grace_s + _KILL_MARGIN_S)
        killed: Any = data.get("killed")
        if not isinstance(killed, list) or not all(_count(p) for p in killed):
            raise AgentTimeout("agentctl's killed strays are not a list of pids")
        return StraysEnded(tuple(killed), tuple(parse_strays(data.get("remaining"),
                                                             "remaining strays")))
