"""The MCP servers the mock agent was given, in every dialect, and ``/mcp`` that lists them.

It advertises ``mcpCapabilities {http: true, sse: false}`` (ACP v1; v2: ``session.mcp
{stdio, http}``, v2 having no SSE), so a client must refuse an SSE server before the
session opens.  ACP's ``mcpServers`` (``session/new``, ``session/load``,
``session/resume``) and Codex's ``config`` overrides (``mcp_servers.NAME.*`` of
``thread/start`` / ``thread/resume``) are read alike.  A stdio server is started as a real
agent starts it: as its own child (``spawn``, in its process group, so it is stopped with
the agent); ``/mcp`` says its pid, or why it could not start.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from .base import Agent, Turn, Wait

__all__ = ["ACP1_CAPABILITIES", "ACP2_CAPABILITIES", "METHODS", "mcp", "received"]

ACP1_CAPABILITIES: Final[dict[str, bool]] = {"http": True, "sse": False}
ACP2_CAPABILITIES: Final[dict[str, dict[str, Any]]] = {"stdio": {}, "http": {}}
#: The requests that carry a session's servers.
METHODS: Final = frozenset({"session/new", "session/load", "session/resume", "thread/start",
                            "thread/resume"})


def _acp(params: dict[str, Any]) -> list[dict[str, Any]]:
    servers = params.get("mcpServers")
    out: list[dict[str, Any]] = []
    for s in servers if isinstance(servers, list) else []:
        if isinstance(s, dict):
            kind = s.get("type", "stdio")
            out.append({"name": s.get("name"), "kind": kind, "command": s.get("command"),
                        "args": s.get("args") or [], "url": s.get("url")})
    return out


def _codex(params: dict[str, Any]) -> list[dict[str, Any]]:
    config = params.get("config")
    by_name: dict[str, dict[str, Any]] = {}
    for key, value in (config.items() if isinstance(config, dict) else ()):
        parts = key.split(".")
        if len(parts) == 3 and parts[0] == "mcp_servers":
            entry = by_name.setdefault(parts[1], {"name": parts[1], "args": []})
            entry[parts[2]] = value
    for entry in by_name.values():
        entry["kind"] = "http" if "url" in entry else "stdio"
    return list(by_name.values())


def received(agent: Agent, method: str, params: dict[str, Any]) -> None:
    """Take the servers a session request carries; start the stdio ones (once each)."""
    servers = _codex(params) if method.startswith("thread/") else _acp(params)
    for server in servers:
        if server["kind"] != "stdio":
            continue
        argv = [str(server.get("command")), *(str(a) for a in server["args"])]
        try:
            if agent.spawn is None:
                raise OSError("this agent has no process of its own to start it in")
            server["pid"] = agent.spawn(argv)
        except OSError as exc:
            server["error"] = str(exc)
    agent.mcp_servers = servers


def _line(server: dict[str, Any]) -> str:
    if server["kind"] != "stdio":
        return f"{server['name']} {server['kind']} {server.get('url')}"
    said = " ".join([str(server.get("command")), *(str(a) for a in server["args"])])
    started = (f"pid {server['pid']}" if "pid" in server
               else f"not started: {server.get('error')}")
    return f"{server['name']} stdio {said} ({started})"


def mcp(turn: Turn, text: str) -> Iterator[Wait]:
    servers = turn.agent.mcp_servers
    turn.chunk("mcp: " + ("; ".join(_line(s) for s in servers) if servers else "none"))
    turn.end("end_turn")
    yield from ()
