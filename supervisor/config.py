"""One typed configuration: every limit a named field with its unit.

Read from ``DATA_DIR/turnvisor.toml``; unknown keys are rejected by name (a
misspelled timeout must not pass silently).  Sections: ``[timeouts]`` (seconds),
``[limits]``, ``[agents.NAME]`` (supervisor.profiles), ``[workspaces.NAME]``,
``[server]`` (``allowed_hosts``: names besides the bound address and loopback
that the server answers to, web/guard.py), ``[projects]`` (the directories tasks
may work in, DESIGN.md §12; none may hold or lie in the data dir, §17),
``[mcp_servers.NAME]`` (the MCP servers agents get: supervisor/mcp_servers.py).
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from protocols.adapters import AdapterTimeouts, McpServer
from protocols.process import EOF_GRACE_S, REAP_S
from protocols.sandbox import HiddenDir

from .data_dir_fence import DataDirFence
from .mcp_servers import McpEntry, McpServerError, parse_mcp_servers, servers_for
from .models import Task
from .profiles import BUILTIN_PROFILES, AgentProfile, ProfileError, parse_profiles
from .project_roots import read_added

__all__ = ["MIN_TOKEN_CHARS", "ROOTS_HINT", "Config", "ConfigError", "Limits", "Projects",
           "Timeouts"]

#: The shortest token accepted (the default one and every workspace's).
MIN_TOKEN_CHARS = 32

_T = TypeVar("_T")


class ConfigError(ValueError):
    pass


#: What to do about a project root that meets the data dir (one line with the refusal).
ROOTS_HINT = ("pass --project-root DIR to `turnvisor serve`, or set [projects] roots in "
              "turnvisor.toml, to directories that neither hold nor lie in the data dir")


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeouts:
    #: After the protocol cancel is sent, how long the turn may take to end
    #: before the cancel is reported late (not acknowledged).
    cancel_join_s: float = 3.0
    #: An agent that keeps streaming the cancelled turn gets the protocol cancel
    #: again after this long (some drop a cancel that follows the prompt at once) ...
    cancel_resend_s: float = 0.25
    #: ... and once more after this long, both inside the join window.
    cancel_resend_again_s: float = 1.0
    #: From the protocol cancel, how long before the turn is escalated
    #: (synthetic completion, execution ready).
    cancel_escalate_s: float = 10.0
    #: Bound on the escalation's own cleanup.
    cancel_cleanup_s: float = 2.0
    #: Bound on a whole accepted cancel operation, whatever happens inside
    #: (a stop after the step: from the cancel's write, after its wait).
    cancel_operation_s: float = 30.0
    #: A stop after the step waits this long at most for the running tool
    #: calls to finish; then it is a cancel now (DESIGN.md §18).
    after_step_timeout_s: float = 120.0
    #: Agent start-up: spawn + initialize + session/new.
    agent_start_s: float = 30.0
    #: Reopening a session's conversation in a fresh agent process (ACP
    #: session/resume or session/load, Codex thread/resume), and the fresh
    #: session it falls back to when that fails (DESIGN.md §10).
    restore_s: float = 30.0
    #: An agent with no running turn for this long is stopped (its whole process
    #: group); the session's next prompt starts and restores a new one.
    idle_agent_s: float = 900.0
    #: A request to the agent (permission answers, writes).
    agent_request_s: float = 10.0
    #: One turn at most (a cancel has its own, shorter bounds).
    turn_s: float = 3600.0
    #: Teardown: SIGTERM to the agent's group, then SIGKILL after this.
    term_grace_s: float = 2.0
    #: Graceful server shutdown.
    shutdown_s: float = 8.0
    #: How long a store write waits for a lock held elsewhere (a backup, a sqlite3
    #: shell) before it fails: long enough to ride out seconds of contention.
    store_wait_s: float = 30.0
    #: A turn whose close the store refused is closed again in the background,
    #: with backoff, for this long at most (then the next cancel or start reconciles it).
    store_retry_s: float = 600.0
    #: After an agent's stdout ends, how long to wait for its exit status (so a
    #: crash is reported with its status, not as "closed its output").
    exit_status_s: float = 0.2
    #: Streamed text is written (and its messages announced) at most this often,
    #: every session's together (supervisor/turn/text_writer.py): a fast agent's chunks
    #: are coalesced, and many streaming sessions cost one transaction and one
    #: write per connection per period instead of one per chunk.
    stream_flush_s: float = 0.05
    #: A running turn silent this long (no text, tool call, plan or permission
    #: from the agent) gets a "No output from the agent" notice (DESIGN.md §9).
    stall_notice_s: float = 120.0
    #: A turn with no agent event at all after this long ends as an error, its
    #: agent is replaced and the session's queue parked.
    never_started_s: float = 300.0
    #: agentctl: TCP + WebSocket handshake of the event stream, and its status call.
    agentctl_connect_s: float = 10.0
    #: agentctl: silence on the event stream (it sends a heartbeat every 5 s)
    #: before the link is declared lost.
    agentctl_heartbeat_s: float = 20.0
    #: agentctl: re-attaching to a session whose turn is still running (a previous
    #: backend's): how long that turn may take to end after it is cancelled.
    agentctl_attach_join_s: float = 5.0
    #: agentctl at a configured URL: after a backend restart, taking a running
    #: turn over (re-attach, replay of what the agent did meanwhile) must be done
    #: within this long; otherwise the turn is interrupted as any other.
    agentctl_takeover_s: float = 15.0
    #: A cancel met by a remote agent's link that is down waits for it this
    #: long (pending, phase ``link_down``), then is answered as failed and
    #: stays held: sent first whenever the link returns (DESIGN.md §20).
    link_down_cancel_s: float = 900.0

    #: The window of ``[limits] auth_failures_per_peer``.
    auth_failure_window_s: float = 60.0

    @property
    def stop_s(self) -> float:
        """The whole teardown of one agent: stdin EOF grace, SIGTERM grace, reap."""
        return EOF_GRACE_S + self.term_grace_s + REAP_S

    def adapter(self) -> AdapterTimeouts:
        """The protocol layer's bounds, derived from these (the one translation)."""
        return AdapterTimeouts(initialize_s=self.agent_start_s, session_s=self.agent_start_s,
                               request_s=self.agent_request_s, turn_s=self.turn_s,
                               write_s=self.agent_request_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    #: Longest line accepted from an agent.
    max_agent_line_bytes: int = 8 * 1024 * 1024
    #: Largest WebSocket frame accepted from a client.
    max_ws_frame_bytes: int = 256 * 1024
    #: Frames queued to one WebSocket client before it is dropped as too slow.
    ws_send_queue: int = 1024
    #: Largest REST body.
    max_body_bytes: int = 256 * 1024
    #: Longest prompt.
    max_prompt_chars: int = 100_000
    #: Messages waiting in one session's queue (DESIGN.md §9).
    max_queue: int = 100
    #: A connection that sends nothing for this long is closed: no request head
    #: yet, between keep-alive requests, in the middle of a body.  An idle
    #: WebSocket is pinged instead, and closed if it answers nothing for as long.
    idle_connection_s: float = 60.0
    #: Open connections without the token from one remote address; past it the
    #: idlest of them is closed (web/connpool.py; one with the token never counts).
    max_connections_per_peer: int = 64
    #: Text one turn may stream (UTF-8 bytes, every channel together): the
    #: agent's text beyond it is dropped, with one status message saying so; the
    #: turn goes on.  Bounds what a flood costs on disk and on every connection.
    max_turn_output_bytes: int = 8 * 1024 * 1024
    #: Largest upload (``POST /api/v1/attachments``, DESIGN.md §19): streamed to
    #: disk, refused with 413 past it.
    max_attachment_bytes: int = 10 * 1024 * 1024
    #: Failed authentications one peer (address) may make per
    #: ``auth_failure_window_s`` before it is refused with 429 (web/guard.py).
    auth_failures_per_peer: int = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class Projects:
    """DESIGN.md §12: the directories a task may name as its project (resolved,
    symlinks followed); the default is the directory the server started in.
    None of them holds the data dir or lies in it (checked by ``Config``)."""

    roots: tuple[Path, ...] = field(default_factory=lambda: (Path.cwd().resolve(),))
    #: ``roots`` is the start directory because none are configured.  Such a
    #: root is refused where it is served (``Config.check_start_dir``), not when
    #: a command that serves no projects (backup, agentctl) reads the config.
    start_dir: bool = False
    #: Checkpoints around every turn (off: no snapshot, no changes, no revert).
    checkpoints: bool = True
    #: Bound of the snapshot taken before a prompt is written (past it the turn
    #: runs without one, and the transcript says so).
    before_turn_s: float = 5.0
    #: Of ``roots``, those added at run time (``project.root.add``, kept in the
    #: data dir: ``supervisor.project_roots``).
    added: tuple[Path, ...] = ()

    def add_root(self, root: Path) -> None:
        """``root`` (checked by ``project_roots.check_root``) becomes a root of
        every holder of this config at once.  The one change made to a config
        after it is built; the event loop's thread makes it, between awaits."""
        if root not in self.roots:
            object.__setattr__(self, "roots", (*self.roots, root))
        if root not in self.added:
            object.__setattr__(self, "added", (*self.added, root))


def _root(path: Path, named: str, fence: DataDirFence) -> Path:
    """``path`` made real, if it is a directory clear of the data dir."""
    real = path.expanduser().resolve()
    if not real.is_dir():
        raise ConfigError(f"{named} is not a directory")
    overlap = fence.meets(real)
    if overlap is not None:
        raise ConfigError(f"{named} ({real}) {fence.describe(overlap)}: agents working there "
                          f"would reach Turnvisor's own files; {ROOTS_HINT}")
    return real


def _projects(raw: Any, data_dir: Path, cli_roots: Sequence[str] | None) -> Projects:
    if not isinstance(raw, Mapping):
        raise ConfigError("[projects] must be a table")
    unknown = set(raw) - {"roots", "checkpoints", "before_turn_s"}
    if unknown:
        raise ConfigError(f"[projects]: unknown key(s) {', '.join(sorted(unknown))}")
    values: dict[str, Any] = {}
    fence = DataDirFence.of(data_dir)
    if "roots" in raw:
        roots = raw["roots"]
        if (not isinstance(roots, list) or not roots
                or not all(isinstance(r, str) and r for r in roots)):
            raise ConfigError("[projects] roots must be a non-empty list of directories")
        # (Relative to the data dir; one that stays inside it is refused below.)
        values["roots"] = tuple(_root(data_dir / Path(r).expanduser(), f"[projects] root {r!r}",
                                      fence) for r in roots)
    if cli_roots:
        # The command line wins over the file; relative to where it was typed.
        values["roots"] = tuple(_root(Path(r), f"--project-root {r!r}", fence)
                                for r in cli_roots)
    if "roots" not in values:
        values.update(roots=(Path.cwd().resolve(),), start_dir=True)
    added = read_added(data_dir)
    values.update(roots=(*values["roots"], *(a for a in added if a not in values["roots"])),
                  added=added)
    if "checkpoints" in raw:
        values["checkpoints"] = _flag(raw, "checkpoints", "projects")
    if "before_turn_s" in raw:
        values["before_turn_s"] = float(_positive(raw["before_turn_s"], "projects",
                                                  "before_turn_s"))
    return Projects(**values)


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    data_dir: Path
    default_agent: str = "mock"
    timeouts: Timeouts = field(default_factory=Timeouts)
    limits: Limits = field(default_factory=Limits)
    profiles: Mapping[str, AgentProfile] = field(default_factory=lambda: dict(BUILTIN_PROFILES))
    #: Extra workspaces: name → token.  The default token's workspace is "default".
    workspace_tokens: Mapping[str, str] = field(default_factory=dict)
    projects: Projects = field(default_factory=lambda: Projects(start_dir=True))
    #: The data dir as the sandbox hides it: its (device, inode) recorded when
    #: the supervisor starts (``with_identity``), checked before every launch.
    data_dir_hidden: HiddenDir | None = None
    #: ``[server] allowed_hosts``: extra Host names answered (web/guard.py).
    allowed_hosts: tuple[str, ...] = ()
    #: ``[server] tools_path``: the directories searched, instead of ``PATH``, for
    #: the programs the backend runs (git, bwrap, ...; protocols/tools.py).
    tools_path: tuple[str, ...] | None = None
    #: ``[server] trace_cancels``: the cancel path's tracing hook on (stage marks,
    #: settled operations: the benchmarks' and GET /api/v1/debug/cancel-stages).
    trace_cancels: bool = False
    #: ``[mcp_servers.NAME]``, in the file's order.
    mcp_servers: tuple[McpEntry, ...] = ()

    def __post_init__(self) -> None:
        # Every Config, however built (a test's, a replace()), keeps configured
        # roots clear of the data dir: the file's and the command line's are
        # checked with their own names on load, this is the construction-wide
        # guarantee.  (The start directory as default: ``check_start_dir``.)
        if not self.projects.start_dir:
            self._check_roots()

    def _check_roots(self) -> None:
        fence = DataDirFence.of(self.data_dir)
        for root in self.projects.roots:
            overlap = fence.meets(root)
            if overlap is None:
                continue
            named = (f"the start directory {root}, the default project root (no roots "
                     "configured),") if self.projects.start_dir else f"project root {root}"
            raise ConfigError(f"{named} {fence.describe(overlap)}; {ROOTS_HINT}")

    def check_start_dir(self) -> None:
        """``ConfigError`` if the roots are the start directory by default and
        it holds or lies in the data dir (as when `serve` starts in ``$HOME``,
        which holds the default data dir): checked before projects are served."""
        if self.projects.start_dir:
            self._check_roots()

    def mcp_for(self, profile: str, cwd: str, task: Task | None) -> tuple[McpServer, ...]:
        """The MCP servers a launch of ``profile`` gets: those of its profile and of its
        project (the task's project directory, else the session's ``cwd``)."""
        project = task.project_dir if task is not None else None
        return servers_for(self.mcp_servers, profile, project or cwd)

    @property
    def db_path(self) -> Path:
        return self.data_dir / "turnvisor.db"

    @property
    def work_dir(self) -> Path:
        return self.data_dir / "work"

    def session_work_dir(self, workspace_id: str, session_id: str) -> Path:
        """The default cwd of a session whose profile names none: its own,
        under its workspace's (the same after a restart, so restores find it)."""
        for part in (workspace_id, session_id):
            if not part or "/" in part or part in (".", ".."):
                raise ValueError(f"not a path component: {part!r}")
        return self.work_dir / workspace_id / session_id

    def with_identity(self) -> Config:
        """This config with the data dir's identity recorded (now)."""
        return dataclasses.replace(self, data_dir_hidden=HiddenDir.record(self.data_dir))

    def hidden_dirs(self) -> list[HiddenDir]:
        """What the sandbox hides: the data dir, by identity once recorded."""
        return [self.data_dir_hidden or HiddenDir(str(self.data_dir))]

    @classmethod
    def load(cls, data_dir: Path, *, project_roots: Sequence[str] | None = None,
             **overrides: Any) -> Config:
        """``DATA_DIR/turnvisor.toml``; ``project_roots`` (``--project-root``)
        replace its ``[projects] roots``."""
        path = data_dir / "turnvisor.toml"
        raw: dict[str, Any] = {}
        if path.exists():
            try:
                raw = tomllib.loads(path.read_text())
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"{path}: {exc}") from None
        return cls.from_mapping(data_dir, raw, project_roots=project_roots, **overrides)

    @classmethod
    def from_mapping(cls, data_dir: Path, raw: Mapping[str, Any], *,
                     project_roots: Sequence[str] | None = None,
                     **overrides: Any) -> Config:
        unknown = set(raw) - {"timeouts", "limits", "agents", "workspaces", "default_agent",
                          "server", "projects", "mcp_servers"}
        if unknown:
            raise ConfigError(f"unknown section(s): {', '.join(sorted(unknown))}")
        timeouts = _section(Timeouts, raw.get("timeouts", {}), "timeouts")
        limits = _section(Limits, raw.get("limits", {}), "limits")
        try:
            profiles = parse_profiles(raw.get("agents", {}))
        except ProfileError as exc:
            raise ConfigError(str(exc)) from None
        try:
            mcp = parse_mcp_servers(raw.get("mcp_servers", {}), data_dir, profiles)
        except McpServerError as exc:
            raise ConfigError(str(exc)) from None
        tokens: dict[str, str] = {}
        for name, ws in raw.get("workspaces", {}).items():
            if not isinstance(ws, Mapping) or set(ws) != {"token"} or not isinstance(
                ws["token"], str
            ) or len(ws["token"]) < MIN_TOKEN_CHARS:
                raise ConfigError(f"[workspaces.{name}] needs exactly token = "
                                  f"\"<{MIN_TOKEN_CHARS}+ chars>\"")
            tokens[name] = ws["token"]
        values: dict[str, Any] = {
            "data_dir": data_dir, "timeouts": timeouts, "limits": limits,
            "profiles": profiles, "workspace_tokens": tokens,
            "allowed_hosts": _allowed_hosts(raw.get("server", {})),
            "tools_path": _tools_path(raw.get("server", {})),
            "trace_cancels": _flag(raw.get("server", {}), "trace_cancels", "server"),
            "mcp_servers": mcp,
        }
        if overrides.get("projects") is None:
            values["projects"] = _projects(raw.get("projects", {}), data_dir, project_roots)
        if "default_agent" in raw:
            values["default_agent"] = raw["default_agent"]
        values.update({k: v for k, v in overrides.items() if v is not None})
        cfg = cls(**values)
        if cfg.default_agent not in cfg.profiles:
            raise ConfigError(f"unknown agent {cfg.default_agent!r}")
        return cfg


def _section(kind: type[_T], raw: Any, name: str) -> _T:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"[{name}] must be a table")
    names = {f.name: f for f in dataclasses.fields(kind)}  # type: ignore[arg-type]
    unknown = set(raw) - set(names)
    if unknown:
        raise ConfigError(f"[{name}]: unknown key(s) {', '.join(sorted(unknown))}")
    return kind(**{key: _positive(value, name, key) for key, value in raw.items()})


def _positive(value: Any, table: str, key: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"[{table}] {key} must be a positive number")
    return value


def _allowed_hosts(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, Mapping):
        raise ConfigError("[server] must be a table")
    unknown = set(raw) - {"allowed_hosts", "tools_path", "trace_cancels"}
    if unknown:
        raise ConfigError(f"[server]: unknown key(s) {', '.join(sorted(unknown))}")
    hosts = raw.get("allowed_hosts", [])
    if not isinstance(hosts, list) or not all(isinstance(h, str) and h.strip() for h in hosts):
        raise ConfigError("[server] allowed_hosts must be a list of host names")
    return tuple(h.strip() for h in hosts)


def _flag(raw: Mapping[str, Any], key: str, table: str) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"[{table}] {key} must be true or false")
    return value


def _tools_path(raw: Mapping[str, Any]) -> tuple[str, ...] | None:
    dirs = raw.get("tools_path")
    if dirs is None:
        return None
    if not isinstance(dirs, list) or not dirs or not all(
            isinstance(d, str) and d.startswith("/") for d in dirs):
        raise ConfigError("[server] tools_path must be a non-empty list of absolute directories")
    return tuple(dirs)
