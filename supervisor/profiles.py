"""Agent profiles: how to start each agent and which protocol it speaks.

Built in: ``mock`` and ``mock-codex`` (the mock agent in each dialect;
``mock-acp2`` is the mock that also speaks ACP 2), and the
real CLIs ``codex``, ``auggie``, ``claude``, ``gemini``, ``codex-acp``, ``qwen``
and ``opencode``.  ``turnvisor.toml``
in the data dir adds or overrides profiles (DESIGN.md §7)::

    [agents.my-codex]
    protocol = "codex"
    command = ["codex", "app-server"]
    env = { CODEX_HOME = "/srv/codex" }
    cwd = "/srv/work"
    sandbox = "bwrap"                 # or "none"; unset: bwrap when it works here
    sandbox_writable = ["/srv/cache"] # more writable paths inside the sandbox
    home_binds = ["~/.codex", {path = "~/.config/x", writable = false}]
    network = "isolated"              # or "host"; unset: isolated where pasta is
    host_ports = [11434]              # host loopback ports it may reach
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from protocols.adapters import AcpVersion, McpServer, ProtocolName

from .ssh_target import SSH_KEYS, SshTarget, parse_docker_host, parse_ssh

__all__ = ["BUILTIN_PROFILES", "AgentProfile", "KubeSettings", "ProfileError",
           "parse_profiles"]


class ProfileError(ValueError):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectVolume:
    """Where a ``kubernetes`` profile's projects are in its Pods: a hostPath
    directory of the node or a PersistentVolumeClaim, mounted at ``path`` (the
    path the backend knows the projects by: a session's cwd under it is the
    same directory in the Pod)."""

    path: str
    host_path: str | None = None
    claim: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeSettings:
    """A ``kubernetes`` profile's Pod settings (``executor = "kubernetes"``)."""

    namespace: str | None = None
    resources: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    service_account: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    kubeconfig: str | None = None
    #: None: the session's directory in the Pod is an empty one of its own.
    project_volume: ProjectVolume | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentProfile:
    name: str
    protocol: ProtocolName
    command: tuple[str, ...]
    #: Merged over the server's environment.
    env: Mapping[str, str] = field(default_factory=dict)
    #: Working directory for the agent (and the session's cwd); None = the data dir's work/.
    cwd: str | None = None
    #: Extra ``thread/start`` parameters (Codex only).
    thread_params: Mapping[str, Any] = field(default_factory=dict)
    #: ``local`` runs the agent as a child of the backend; ``agentctl`` drives it
    #: through an agentctl server at ``agentctl_url`` (none: a local agentctl is
    #: spawned for each execution).  docs/deploy.md.
    executor: str = "local"
    agentctl_url: str | None = None
    #: The agentctl bearer token (else ``TURNVISOR_AGENTCTL_TOKEN`` in ``env`` or
    #: in the backend's environment).
    agentctl_token: str | None = None
    #: DESIGN.md §20: the agentctl Turnvisor starts for it cancels its running
    #: turn once no backend has been connected this long (None: never).
    offline_cancel_s: float | None = None
    #: ``bwrap`` (the agent in a bubblewrap sandbox that hides the data dir,
    #: protocols/sandbox.py), ``none``, or None: bwrap when it works here.
    sandbox: str | None = None
    #: Paths the sandboxed agent may write besides its cwd, its own /tmp and its homes.
    sandbox_writable: tuple[str, ...] = ()
    #: ``kubernetes``: the Pod's namespace, resources (``{requests = {cpu = "500m"},
    #: limits = {memory = "1Gi"}}``), service account and node selector, and the
    #: kubeconfig to use (None: in-cluster config).  docs/deploy.md.
    kube: KubeSettings | None = None
    #: ``ssh``: the host (and how to reach it and run Turnvisor there;
    #: supervisor/ssh_target.py); a ``container`` profile's ``ssh://`` engine's keys.
    ssh: SshTarget | None = None
    #: ``container``: its engine (as ``DOCKER_HOST`` names one; None: that variable).
    docker_host: str | None = None
    #: ``container``: each execution's agentctl in its own container of ``image``
    #: (default: the one scripts/build_agent_image.sh tags with Turnvisor's
    #: version), limited to ``cpus`` CPUs, ``memory`` bytes and ``pids`` processes.
    image: str | None = None
    cpus: float | None = None
    memory: int | None = None
    pids: int | None = None
    #: ACP only: ``auto`` offers ACP 2 and speaks what the agent answers (1 or
    #: 2); ``1`` / ``2`` insist on that version (2: an agent that answers 1
    #: fails its start, with the reason).
    acp_version: AcpVersion = "auto"
    #: What the agent needs of the person's real home (its login and config),
    #: each ``(path under ~, writable)``: bound by identity over the same place
    #: in the agent's private home (DESIGN.md §17).  The rest of the real home
    #: is read-only to the agent, and not its ``HOME``.
    home_binds: tuple[tuple[str, bool], ...] = ()
    #: ``isolated``: the agent's own network namespace, outbound access only
    #: (protocols/netns.py), plus ``host_ports`` of the host's loopback (a local
    #: model server); ``host``: the backend's network (warned at start); None:
    #: isolated where passt's pasta is installed, else host (warned).
    network: str | None = None
    host_ports: tuple[int, ...] = ()
    #: The agent's private writable home, ``DATA_DIR/homes/<workspace>/<profile>``:
    #: set by the supervisor for each launch (never from the config file).
    private_home: str | None = None
    #: The (device, inode) the session's cwd must be (its task's project, as
    #: recorded at ``task.create``): set by the supervisor for each launch.
    cwd_identity: tuple[int, int] | None = None
    #: The ``[mcp_servers]`` that apply to this launch (its profile and project;
    #: supervisor/mcp_servers.py): set by the supervisor for each launch.
    mcp_servers: tuple[McpServer, ...] = ()


def _mock(name: str, protocol: ProtocolName, *extra: str) -> AgentProfile:
    return AgentProfile(
        name=name,
        protocol=protocol,
        command=(sys.executable, "-m", "protocols.mock_agent", "--protocol", protocol, *extra),
    )


BUILTIN_PROFILES: dict[str, AgentProfile] = {
    "mock": _mock("mock", "acp"),
    "mock-codex": _mock("mock-codex", "codex"),
    # The mock that also speaks ACP 2 (when offered 2, as ``auto`` does).
    "mock-acp2": _mock("mock-acp2", "acp", "--acp-version", "2"),
    # The mock that needs a login first (DESIGN.md §19), in each dialect.
    "mock-login": _mock("mock-login", "acp", "--login"),
    "mock-login-acp2": _mock("mock-login-acp2", "acp", "--acp-version", "2", "--login"),
    "mock-login-codex": _mock("mock-login-codex", "codex", "--login"),
    # The real CLIs (pinned versions: scripts/install_agents.sh; how to point each
    # at its provider: docs/agents.md).  Each is found on PATH; the env entries
    # only keep a supervised agent from updating or re-launching itself.
    "codex": AgentProfile(
        name="codex",
        protocol="codex",
        command=("codex", "app-server"),
        # ThreadStartParams of the app-server schema: the model asks before it
        # leaves the workspace sandbox; the person answers in the UI.
        thread_params={"approvalPolicy": "on-request", "sandbox": "workspace-write"},
        home_binds=((".codex", True),),
    ),
    "auggie": AgentProfile(
        name="auggie",
        protocol="acp",
        command=("auggie", "--acp"),
        env={"AUGMENT_DISABLE_AUTO_UPDATE": "1"},
        home_binds=((".augment", True),),
    ),
    "claude": AgentProfile(
        name="claude",
        protocol="acp",
        command=("claude-agent-acp",),
        env={"DISABLE_AUTOUPDATER": "1"},
        # claude-agent-acp 0.101 speaks ACP 2 when offered, but advertises its
        # steering extension only in v1 (docs/agents.md): v1 keeps steer.
        acp_version=1,
        home_binds=((".claude", True), (".claude.json", True)),
    ),
    "gemini": AgentProfile(
        name="gemini",
        protocol="acp",
        command=("gemini", "--acp"),
        # Without it the CLI re-launches itself as a child with a larger heap.
        env={"GEMINI_CLI_NO_RELAUNCH": "true"},
        home_binds=((".gemini", True),),
    ),
    "codex-acp": AgentProfile(name="codex-acp", protocol="acp", command=("codex-acp",),
                              home_binds=((".codex", True),)),
    "qwen": AgentProfile(name="qwen", protocol="acp", command=("qwen", "--acp"),
                         home_binds=((".qwen", True),)),
    "opencode": AgentProfile(
        name="opencode",
        protocol="acp",
        command=("opencode", "acp"),
        env={"OPENCODE_DISABLE_AUTOUPDATE": "1"},
        home_binds=((".config/opencode", True), (".local/share/opencode", True)),
    ),
}

_KUBE_KEYS = ("namespace", "resources", "service_account", "node_selector", "kubeconfig",
              "project_volume")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
#: A Kubernetes quantity ("500m", "1.5", "2Gi", "1e3").
_QUANTITY = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?")
_KEYS = {"protocol", "command", "env", "cwd", "thread_params", "executor", "agentctl_url",
         "agentctl_token", "sandbox", "sandbox_writable", "image", "cpus", "memory", "pids",
         "acp_version", "home_binds", "network", "host_ports", "offline_cancel_s",
         *_KUBE_KEYS, *SSH_KEYS}
_EXECUTORS = ("local", "agentctl", "container", "kubernetes", "ssh")
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def _memory(name: str, value: Any) -> int | None:
    """Bytes, or a string like ``"512m"`` / ``"2g"``."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        unit = text[-1:] if text[-1:].isalpha() else ""
        if unit in _UNITS and text[:len(text) - len(unit)].isdigit():
            value = int(text[:len(text) - len(unit)]) * _UNITS[unit]
    if isinstance(value, bool) or not isinstance(value, int) or value < 4 * 1024**2:
        raise ProfileError(f"[agents.{name}]: memory must be bytes or \"<n>k|m|g\", at least 4m")
    return value


def parse_profiles(
    table: Mapping[str, Any], base: Mapping[str, AgentProfile] = BUILTIN_PROFILES
) -> dict[str, AgentProfile]:
    """Merge ``[agents.NAME]`` tables over ``base``; unknown keys are errors, by name."""
    out = dict(base)
    for name, raw in table.items():
        if not isinstance(raw, Mapping):
            raise ProfileError(f"[agents.{name}] must be a table")
        unknown = set(raw) - _KEYS
        if unknown:
            raise ProfileError(f"[agents.{name}]: unknown key(s) {', '.join(sorted(unknown))}")
        prev = out.get(name)
        protocol = raw.get("protocol", prev.protocol if prev else None)
        if protocol not in ("acp", "codex"):
            raise ProfileError(f"[agents.{name}]: protocol must be \"acp\" or \"codex\"")
        command = raw.get("command", list(prev.command) if prev else None)
        if not isinstance(command, list | tuple) or not command or not all(
            isinstance(c, str) for c in command
        ):
            raise ProfileError(f"[agents.{name}]: command must be a non-empty list of strings")
        env = raw.get("env", dict(prev.env) if prev else {})
        if not isinstance(env, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise ProfileError(f"[agents.{name}]: env must be a table of strings")
        cwd = raw.get("cwd", prev.cwd if prev else None)
        if cwd is not None and not isinstance(cwd, str):
            raise ProfileError(f"[agents.{name}]: cwd must be a string")
        executor = raw.get("executor", prev.executor if prev else "local")
        if executor not in _EXECUTORS:
            raise ProfileError(f"[agents.{name}]: executor must be one of "
                               f"{', '.join(_EXECUTORS)}")
        image = raw.get("image", prev.image if prev else None)
        if image is not None and (not isinstance(image, str) or not image):
            raise ProfileError(f"[agents.{name}]: image must be a non-empty string")
        cpus = raw.get("cpus", prev.cpus if prev else None)
        if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, int | float)
                                 or cpus <= 0):
            raise ProfileError(f"[agents.{name}]: cpus must be a positive number")
        memory = _memory(name, raw.get("memory", prev.memory if prev else None))
        pids = raw.get("pids", prev.pids if prev else None)
        if pids is not None and (isinstance(pids, bool) or not isinstance(pids, int)
                                 or pids < 8):
            raise ProfileError(f"[agents.{name}]: pids must be an integer >= 8")
        url = raw.get("agentctl_url", prev.agentctl_url if prev else None)
        if url is not None and (not isinstance(url, str) or not url.startswith(
                ("http://", "https://"))):
            raise ProfileError(f"[agents.{name}]: agentctl_url must be an http(s) URL")
        token = raw.get("agentctl_token", prev.agentctl_token if prev else None)
        if token is not None and not isinstance(token, str):
            raise ProfileError(f"[agents.{name}]: agentctl_token must be a string")
        thread_params = raw.get("thread_params", dict(prev.thread_params) if prev else {})
        if not isinstance(thread_params, Mapping):
            raise ProfileError(f"[agents.{name}]: thread_params must be a table")
        sandbox = raw.get("sandbox", prev.sandbox if prev else None)
        if sandbox not in (None, "bwrap", "none"):
            raise ProfileError(f"[agents.{name}]: sandbox must be \"bwrap\" or \"none\"")
        writable = raw.get("sandbox_writable", list(prev.sandbox_writable) if prev else [])
        if not isinstance(writable, list | tuple) or not all(
            isinstance(p, str) and p.startswith(("/", "~")) for p in writable
        ):
            raise ProfileError(f"[agents.{name}]: sandbox_writable must be a list of "
                               "absolute paths")
        acp_version = raw.get("acp_version", prev.acp_version if prev else "auto")
        if acp_version not in ("auto", 1, 2) or isinstance(acp_version, bool):
            raise ProfileError(f"[agents.{name}]: acp_version must be \"auto\", 1 or 2")
        home_binds = _home_binds(name, raw.get("home_binds"),
                                 prev.home_binds if prev else ())
        network = raw.get("network", prev.network if prev else None)
        if network not in (None, "isolated", "host"):
            raise ProfileError(f"[agents.{name}]: network must be \"isolated\" or \"host\"")
        ports = raw.get("host_ports", list(prev.host_ports) if prev else [])
        if not isinstance(ports, list | tuple) or not all(
                isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in ports):
            raise ProfileError(f"[agents.{name}]: host_ports must be a list of port numbers")
        offline = raw.get("offline_cancel_s", prev.offline_cancel_s if prev else None)
        if offline is not None and (isinstance(offline, bool)
                                    or not isinstance(offline, int | float) or offline <= 0):
            raise ProfileError(f"[agents.{name}]: offline_cancel_s must be a number of "
                               "seconds > 0")
        kube = _kube(name, raw, prev.kube if prev else None, executor)
        try:
            ssh = parse_ssh(name, raw, prev.ssh if prev else None, executor)
            docker_host = parse_docker_host(name, raw, prev.docker_host if prev else None,
                                            executor)
        except ValueError as exc:
            raise ProfileError(str(exc)) from None
        out[name] = AgentProfile(
            name=name, protocol=protocol, command=tuple(command), env=dict(env), cwd=cwd,
            thread_params=dict(thread_params), executor=executor, agentctl_url=url,
            agentctl_token=token, sandbox=sandbox, sandbox_writable=tuple(writable),
            image=image, cpus=None if cpus is None else float(cpus), memory=memory, pids=pids,
            acp_version=acp_version, home_binds=home_binds, network=network,
            host_ports=tuple(ports), kube=kube, ssh=ssh, docker_host=docker_host,
            offline_cancel_s=None if offline is None else float(offline),
        )
    return out


def _kube(name: str, raw: Mapping[str, Any], prev: KubeSettings | None,
          executor: str) -> KubeSettings | None:
    """The ``kubernetes`` keys, refused on any other executor (a typo'd executor
    would otherwise run the agent here, silently)."""
    given = [k for k in _KUBE_KEYS if k in raw]
    if executor != "kubernetes":
        if given:
            raise ProfileError(f"[agents.{name}]: {', '.join(given)} only apply to "
                               "executor = \"kubernetes\"")
        return None
    base = prev or KubeSettings()
    namespace = raw.get("namespace", base.namespace)
    if namespace is not None and not (isinstance(namespace, str)
                                      and _DNS_LABEL.fullmatch(namespace)):
        raise ProfileError(f"[agents.{name}]: namespace must be a DNS label "
                           "(lowercase letters, digits, '-'; at most 63)")
    account = raw.get("service_account", base.service_account)
    if account is not None and not (isinstance(account, str) and _DNS_NAME.fullmatch(account)):
        raise ProfileError(f"[agents.{name}]: service_account must be a DNS name")
    selector = raw.get("node_selector", base.node_selector)
    if not isinstance(selector, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in selector.items()):
        raise ProfileError(f"[agents.{name}]: node_selector must be a table of strings")
    kubeconfig = raw.get("kubeconfig", base.kubeconfig)
    if kubeconfig is not None and not (isinstance(kubeconfig, str)
                                       and kubeconfig.startswith(("/", "~/"))):
        raise ProfileError(f"[agents.{name}]: kubeconfig must be an absolute path (or ~/...)")
    resources = raw.get("resources", base.resources)
    problem = (f"[agents.{name}]: resources must be {{requests = {{...}}, limits = {{...}}}} "
               "with quantities (cpu = \"500m\", memory = \"1Gi\")")
    if not isinstance(resources, Mapping) or not set(resources) <= {"requests", "limits"}:
        raise ProfileError(problem)
    checked: dict[str, dict[str, str]] = {}
    for kind, table in resources.items():
        if not isinstance(table, Mapping):
            raise ProfileError(problem)
        checked[kind] = {}
        for resource, amount in table.items():
            text = str(amount) if isinstance(amount, int | float) and not isinstance(
                amount, bool) else amount
            if not (isinstance(resource, str) and resource and isinstance(text, str)
                    and _QUANTITY.fullmatch(text)):
                raise ProfileError(problem)
            checked[kind][resource] = text
    volume = base.project_volume
    if "project_volume" in raw:
        volume = _project_volume(name, raw["project_volume"])
    return KubeSettings(namespace=namespace, resources=checked, service_account=account,
                        node_selector=dict(selector), kubeconfig=kubeconfig,
                        project_volume=volume)


def _project_volume(name: str, raw: Any) -> ProjectVolume:
    problem = (f"[agents.{name}]: project_volume must be {{host_path = \"/abs/dir\"}} or "
               "{claim = \"pvc-name\", path = \"/abs/dir\"} (path: where the projects are "
               "on this machine and in the Pod; host_path's own by default)")
    if not isinstance(raw, Mapping) or not set(raw) <= {"host_path", "claim", "path"} \
            or ("host_path" in raw) == ("claim" in raw):
        raise ProfileError(problem)
    host_path, claim = raw.get("host_path"), raw.get("claim")
    path = raw.get("path", host_path)
    for value in (host_path, path):
        if value is not None and not (isinstance(value, str) and value.startswith("/")
                                      and ".." not in value.split("/")):
            raise ProfileError(problem)
    if not isinstance(path, str) or (claim is not None and not (
            isinstance(claim, str) and _DNS_NAME.fullmatch(claim))):
        raise ProfileError(problem)
    return ProjectVolume(path=path.rstrip("/") or "/", host_path=host_path, claim=claim)


def _home_binds(name: str, raw: Any,
                prev: tuple[tuple[str, bool], ...]) -> tuple[tuple[str, bool], ...]:
    """``home_binds``: paths under ``~`` (``"~/.codex"``), or tables
    ``{path = "~/.codex", writable = false}``; a plain path is writable (an
    agent refreshes its own login)."""
    if raw is None:
        return prev
    problem = (f"[agents.{name}]: home_binds must be a list of \"~/path\" strings or "
               "{path = \"~/path\", writable = true|false} tables")
    if not isinstance(raw, list):
        raise ProfileError(problem)
    out: list[tuple[str, bool]] = []
    for item in raw:
        path, writable = (item, True) if isinstance(item, str) else (
            (item.get("path"), item.get("writable", True)) if isinstance(item, Mapping)
            and set(item) <= {"path", "writable"} else (None, None))
        if not isinstance(path, str) or not isinstance(writable, bool):
            raise ProfileError(problem)
        relative = path.removeprefix("~/")
        parts = relative.split("/")
        if not path.startswith("~/") or not relative or any(p in ("", ".", "..") for p in parts):
            raise ProfileError(f"[agents.{name}]: home_binds entry {path!r} must name a path "
                               "under ~ (\"~/.codex\"), without . or ..")
        out.append((relative, writable))
    return tuple(out)
