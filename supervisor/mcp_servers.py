"""``[mcp_servers.NAME]`` of turnvisor.toml: the MCP servers agents get, and where.

    [mcp_servers.files]                 # stdio: the agent starts it, as its own child
    command = ["/usr/local/bin/mcp-files", "--read-only"]   # or a string
    args = ["--verbose"]
    env = { LOG_LEVEL = "info" }
    profiles = ["claude"]               # only for these agent profiles ...
    projects = ["~/src/app"]            # ... working in these projects (both: both hold)

    [mcp_servers.docs]
    type = "http"                       # or "sse"
    url = "https://mcp.example.com/mcp"
    headers = { Authorization = "Bearer ..." }

A server with neither ``profiles`` nor ``projects`` applies to every session.  A project
is the session's task's project directory (else its cwd) and applies when it is the
configured directory or lies in it; directories are given as ``[projects] roots`` are
(``~`` expanded, relative to the data dir).

The agent starts a stdio server itself, inside its sandbox (DESIGN.md §17): its command
must be an absolute path the sandbox shows, so one in the data dir (hidden from every
agent) is refused here.  How each protocol takes them: protocols/mcp.py.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from protocols.mcp import McpKind, McpServer

from .data_dir_fence import DataDirFence

__all__ = ["McpEntry", "McpServerError", "parse_mcp_servers", "servers_for"]

#: Codex's rule for a server's name (its config keys are dotted paths).
_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_COMMON: Final = frozenset({"type", "profiles", "projects"})
_KEYS: Final[Mapping[str, frozenset[str]]] = {
    "stdio": _COMMON | {"command", "args", "env"},
    "http": _COMMON | {"url", "headers"},
    "sse": _COMMON | {"url", "headers"},
}


class McpServerError(ValueError):
    """A bad ``[mcp_servers.NAME]``, said in one line (a ConfigError to the config)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpEntry:
    server: McpServer
    #: Empty: every profile.
    profiles: tuple[str, ...] = ()
    #: Resolved directories; empty: every project.
    projects: tuple[Path, ...] = ()

    def applies(self, profile: str, project: Path | None) -> bool:
        if self.profiles and profile not in self.profiles:
            return False
        if not self.projects:
            return True
        return project is not None and any(project == p or project.is_relative_to(p)
                                           for p in self.projects)


def servers_for(entries: Collection[McpEntry], profile: str,
                project: str | None) -> tuple[McpServer, ...]:
    """The servers of a launch of ``profile`` in ``project`` (a directory), in config order."""
    where = Path(project).resolve() if project else None
    return tuple(e.server for e in entries if e.applies(profile, where))


def parse_mcp_servers(raw: Any, data_dir: Path, profiles: Collection[str]) -> tuple[McpEntry, ...]:
    if not isinstance(raw, Mapping):
        raise McpServerError("[mcp_servers] must hold tables: [mcp_servers.NAME]")
    return tuple(_entry(name, table, data_dir, profiles) for name, table in raw.items())


def _entry(name: str, raw: Any, data_dir: Path, known: Collection[str]) -> McpEntry:
    where = f"[mcp_servers.{name}]"
    if not _NAME.match(name):
        raise McpServerError(f"{where}: a name is letters, digits, '_' and '-' (64 at most)")
    if not isinstance(raw, Mapping):
        raise McpServerError(f"{where} must be a table")
    kind = raw.get("type", "stdio")
    if kind not in _KEYS:
        raise McpServerError(f"{where} type must be \"stdio\", \"http\" or \"sse\", not {kind!r}")
    unknown = set(raw) - _KEYS[kind]
    if unknown:
        raise McpServerError(f"{where}: unknown key(s) for a {kind} server: "
                             f"{', '.join(sorted(unknown))}")
    profiles = _strings(raw.get("profiles", []), f"{where} profiles")
    for profile in profiles:
        if profile not in known:
            raise McpServerError(f"{where} profiles: unknown agent profile {profile!r}")
    projects = tuple(_project(p, where, data_dir)
                     for p in _strings(raw.get("projects", []), f"{where} projects"))
    server = (_stdio(name, kind, raw, where, data_dir) if kind == "stdio"
              else _remote(name, kind, raw, where))
    return McpEntry(server=server, profiles=profiles, projects=projects)


def _stdio(name: str, kind: McpKind, raw: Mapping[str, Any], where: str,
           data_dir: Path) -> McpServer:
    command = raw.get("command")
    if isinstance(command, str):
        command = [command]
    if (not isinstance(command, list) or not command
            or not all(isinstance(c, str) and c for c in command)):
        raise McpServerError(f"{where} needs command = \"/path/to/server\" (or a list: the "
                             "program and its arguments)")
    program = command[0]
    if not program.startswith("/"):
        raise McpServerError(f"{where} command {program!r} must be an absolute path (the agent "
                             "starts it inside its sandbox, where no PATH of ours applies)")
    if DataDirFence.of(data_dir).meets(Path(program)) not in (None, "contains"):
        raise McpServerError(f"{where} command {program!r} lies in the data dir, which every "
                             "agent's sandbox hides: the agent could not start it")
    args = (*command[1:], *_strings(raw.get("args", []), f"{where} args"))
    return McpServer(name=name, kind=kind, command=program, args=args,
                     env=_table(raw.get("env", {}), f"{where} env"))


def _remote(name: str, kind: McpKind, raw: Mapping[str, Any], where: str) -> McpServer:
    url = raw.get("url")
    if not isinstance(url, str) or not re.match(r"^https?://[^\s/]+", url):
        raise McpServerError(f"{where} needs url = \"http(s)://host/...\" for a {kind} server")
    return McpServer(name=name, kind=kind, url=url,
                     headers=_table(raw.get("headers", {}), f"{where} headers"))


def _strings(raw: Any, what: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(v, str) and v for v in raw):
        raise McpServerError(f"{what} must be a list of non-empty strings")
    return tuple(raw)


def _table(raw: Any, what: str) -> dict[str, str]:
    if not isinstance(raw, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in raw.items()):
        raise McpServerError(f"{what} must be a table of strings (NAME = \"value\")")
    return dict(raw)


def _project(raw: str, where: str, data_dir: Path) -> Path:
    path = (data_dir / Path(raw).expanduser()).resolve()
    if not path.is_dir():
        raise McpServerError(f"{where} projects: {raw!r} is not a directory")
    return path
