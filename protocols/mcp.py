"""MCP servers handed to an agent for its session (DESIGN.md §19), as each protocol takes them.

Sans-IO: a configured server is an ``McpServer``; ``acp_servers`` makes ACP's
``mcpServers`` list (``session/new``, ``session/load``, ``session/resume``) for an
agent's advertised capabilities, and ``codex_config`` the ``config`` overrides of
Codex's ``thread/start`` / ``thread/resume`` (its ``mcp_servers`` table, one dotted
key per value).  A server of a kind the agent cannot take is refused with
``McpUnsupported`` (one line naming it) before anything is sent: a session must not
start quietly without a tool the person configured for it.

The servers are started by the agent, not by Turnvisor: a stdio server is the agent's
own child, inside its sandbox, and stops with it.

Kinds per dialect: ACP v1 takes stdio always, ``http`` and ``sse`` when its
``agentCapabilities.mcpCapabilities`` says so; ACP v2 takes stdio always and ``http``
when ``capabilities.session.mcp.http`` is present (v2 has no SSE transport); Codex
takes stdio and streamable HTTP (``url``), no SSE.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = ["McpKind", "McpServer", "McpUnsupported", "acp_kinds", "acp_servers", "codex_config"]

McpKind: TypeAlias = Literal["stdio", "http", "sse"]

#: What Codex's app-server takes (stdio, streamable HTTP).
CODEX_KINDS: frozenset[McpKind] = frozenset({"stdio", "http"})


class McpUnsupported(ValueError):
    """A configured MCP server is of a kind the agent does not take."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServer:
    name: str
    kind: McpKind
    #: stdio: the executable (absolute) and its arguments, its environment.
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    #: http / sse: where, and the headers of every request.
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def target(self) -> str:
        """What it runs or reaches, as a person reads it."""
        return " ".join((self.command, *self.args)) if self.kind == "stdio" else self.url


def acp_kinds(capabilities: Mapping[str, Any], version: int) -> frozenset[McpKind]:
    """The kinds an ACP agent takes, from what ``initialize`` advertised."""
    kinds: set[McpKind] = {"stdio"}
    if version == 2:
        session = capabilities.get("session")
        mcp = session.get("mcp") if isinstance(session, Mapping) else None
        if isinstance(mcp, Mapping) and isinstance(mcp.get("http"), Mapping):
            kinds.add("http")
    else:
        mcp = capabilities.get("mcpCapabilities")
        if isinstance(mcp, Mapping):
            kinds.update(k for k in ("http", "sse") if mcp.get(k) is True)
    return frozenset(kinds)


def _refuse(servers: Sequence[McpServer], kinds: frozenset[McpKind], agent: str) -> None:
    for server in servers:
        if server.kind not in kinds:
            takes = ", ".join(sorted(kinds))
            raise McpUnsupported(f"MCP server {server.name!r} is {server.kind}, which {agent} "
                                 f"does not take (it takes: {takes})")


def _pairs(values: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in values.items()]


def acp_servers(servers: Sequence[McpServer], capabilities: Mapping[str, Any],
                version: int) -> list[dict[str, Any]]:
    """ACP's ``mcpServers``: stdio ``{name, command, args, env: [{name, value}]}`` (v2 with
    ``type: "stdio"``), http/sse ``{type, name, url, headers: [{name, value}]}``;
    ``McpUnsupported`` for a server the agent's capabilities leave out."""
    _refuse(servers, acp_kinds(capabilities, version), f"this ACP {version} agent")
    out: list[dict[str, Any]] = []
    for s in servers:
        if s.kind == "stdio":
            entry: dict[str, Any] = {"type": "stdio"} if version == 2 else {}
            entry.update(name=s.name, command=s.command, args=list(s.args), env=_pairs(s.env))
        else:
            entry = {"type": s.kind, "name": s.name, "url": s.url, "headers": _pairs(s.headers)}
        out.append(entry)
    return out


def codex_config(servers: Sequence[McpServer]) -> dict[str, Any]:
    """``thread/start``'s ``config`` overrides: ``mcp_servers.NAME.command`` / ``args`` /
    ``env``, or ``url`` / ``http_headers``; ``McpUnsupported`` for an SSE server."""
    _refuse(servers, CODEX_KINDS, "Codex")
    config: dict[str, Any] = {}
    for s in servers:
        key = f"mcp_servers.{s.name}"
        if s.kind == "stdio":
            config[f"{key}.command"] = s.command
            config[f"{key}.args"] = list(s.args)
            if s.env:
                config[f"{key}.env"] = dict(s.env)
        else:
            config[f"{key}.url"] = s.url
            if s.headers:
                config[f"{key}.http_headers"] = dict(s.headers)
    return config
