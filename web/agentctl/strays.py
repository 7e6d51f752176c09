"""agentctl's view of its agent's strays: the processes left in the agent's
process group, the agent and what holds it excluded (protocols/process_group.py).

The group is the launcher's (web/agentctl/launcher.py leads it, the agent is
its child), or, sandboxed, the launcher's with the agent inside bubblewrap's
pid namespace.  Which of the two is asked of ``resolve_mode`` again: its probe
is cached, so it answers what it answered when the agent was started.

    GET  /api/v1/agent/strays            → {pgid, strays: [{pid, command, start}]}
    POST /api/v1/agent/strays/kill {grace_s?} → {pgid, killed: [pid], remaining: [...]}

``start`` is the process's start time (clock ticks after boot), its identity
with the pid.  Without an agent process both lists are empty and ``pgid`` null.
"""

from __future__ import annotations

from typing import Any, Final

import trio

from protocols.process_group import STRAY_GRACE_S, GroupStrays, Stray
from protocols.sandbox import resolve_mode

from .host import AgentHost

__all__ = ["MAX_GRACE_S", "MAX_ONLY", "agent_strays", "end_agent_strays", "parse_only"]

#: The longest SIGTERM grace a client may ask for (the request waits for it).
MAX_GRACE_S: Final = 10.0
#: The most strays one kill may name.
MAX_ONLY: Final = 10_000


def _entry(s: Stray) -> dict[str, Any]:
    return {**s.wire(), "start": s.start}


async def _group(host: AgentHost, grace_s: float) -> GroupStrays | None:
    agent = host.agent
    if agent is None:
        return None
    mode = await trio.to_thread.run_sync(resolve_mode, host.config.sandbox)
    return GroupStrays(agent.process, "sandbox" if mode == "bwrap" else "launcher",
                       grace_s=grace_s)


async def agent_strays(host: AgentHost) -> dict[str, Any]:
    group = await _group(host, STRAY_GRACE_S)
    if group is None:
        return {"pgid": None, "strays": []}
    return {"pgid": group.process.pid, "strays": [_entry(s) for s in await group.scan()]}


def parse_only(value: object) -> list[Stray] | None:
    """``only``: the strays to end, as ``[{pid, start}]`` (None: every one);
    ``ValueError`` with one line if it is not that."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_ONLY:
        raise ValueError(f"only must be a list of at most {MAX_ONLY} {{pid, start}}")
    out = []
    for item in value:
        pid = item.get("pid") if isinstance(item, dict) else None
        start = item.get("start") if isinstance(item, dict) else None
        if not (isinstance(pid, int) and isinstance(start, int)) or isinstance(pid, bool) \
                or isinstance(start, bool) or pid <= 0 or start < 0:
            raise ValueError("each of only must be {pid, start} with whole numbers")
        out.append(Stray(pid, "", start))
    return out


async def end_agent_strays(host: AgentHost, grace_s: float = STRAY_GRACE_S,
                           only: list[Stray] | None = None) -> dict[str, Any]:
    group = await _group(host, grace_s)
    if group is None:
        return {"pgid": None, "killed": [], "remaining": []}
    ended = await group.end(only)
    return {"pgid": group.process.pid, "killed": list(ended.killed),
            "remaining": [_entry(s) for s in ended.remaining]}
