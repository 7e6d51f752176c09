"""``turnvisor agentctl``'s arguments (imported by ``web.cli``: argparse only here)."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from protocols.sandbox import HiddenDir

__all__ = ["add_arguments", "run_agentctl"]


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--listen", default="127.0.0.1:8765",
                   help="HOST:PORT to listen on (default 127.0.0.1:8765; port 0 picks one), "
                        "or unix:PATH (a unix socket). Anything but loopback exposes the "
                        "agent: see docs/deploy.md")
    p.add_argument("--token", default=None,
                   help="bearer token (default: $TURNVISOR_AGENTCTL_TOKEN, else a new one, "
                        "printed). Prefer the variable: arguments are visible in ps")
    p.add_argument("--profile", default=None,
                   help="agent profile name (built in, or [agents.NAME] in the data dir's "
                        "turnvisor.toml)")
    p.add_argument("--protocol", choices=("acp", "codex"), default=None,
                   help="the agent's protocol (default: the profile's, else acp)")
    p.add_argument("--data-dir", default=None,
                   help="where turnvisor.toml is read from, for --profile")
    p.add_argument("--cwd", default=None,
                   help="the agent's working directory (default: the profile's, else the "
                        "current directory)")
    p.add_argument("--sandbox", choices=("bwrap", "none"), default=None,
                   help="run the agent in a bubblewrap sandbox that hides the data dir "
                        "(default: the profile's, else bwrap when it works here)")
    p.add_argument("--hide", action="append", default=[], metavar="DIR",
                   help="another directory the sandbox hides from the agent (repeatable; "
                        "the data dir given and the default one always are)")
    p.add_argument("--sandbox-writable", action="append", default=[], metavar="PATH",
                   help="another path the sandboxed agent may write (repeatable)")
    p.add_argument("--home", default=None, metavar="DIR",
                   help="the sandboxed agent's private writable home (default: "
                        "DATA_DIR/homes/agentctl); the person's own home stays read-only")
    p.add_argument("--home-bind", action="append", default=[], metavar="~/PATH[:ro]",
                   help="a part of the real home the agent needs (its login), bound by "
                        "identity into its private home; writable unless :ro (repeatable)")
    p.add_argument("--network", choices=("isolated", "host"), default=None,
                   help="isolated: the sandboxed agent's own network namespace, outbound "
                        "only; host: agentctl's network (default: isolated where passt's "
                        "pasta is installed)")
    p.add_argument("--host-port", action="append", type=int, default=[], metavar="PORT",
                   help="a port of this host's loopback the isolated agent may reach "
                        "(a local model server; repeatable)")
    p.add_argument("--profile-env", action="append", default=[], metavar="NAME",
                   help=argparse.SUPPRESS)  # variables the backend's profile set itself
    p.add_argument("--cancel-join", type=float, default=3.0, metavar="SECONDS",
                   help="default join window of POST /api/v1/acp/cancel (default 3)")
    p.add_argument("--replay-events", type=_positive_int, default=4096, metavar="N",
                   help="log entries kept for a client that reconnects, e.g. a backend that "
                        "restarted while the agent ran a turn (default 4096): a longer absence "
                        "during which the agent produced more loses that turn")
    p.add_argument("--offline-cancel-s", type=float, default=None, metavar="SECONDS",
                   help="cancel the running turn once no backend has been connected to the "
                        "event stream for this long (default: never; DESIGN.md §20)")
    p.add_argument("--idle-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="close a connection that sends nothing for this long (no request, "
                        "a stalled body; default 60); event streams are exempt")
    p.add_argument("--max-connections-per-peer", type=_positive_int, default=64, metavar="N",
                   help="connections without the token kept from one address; a new one "
                        "closes the one idle the longest (default 64)")
    p.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--detach", default=None, metavar="NAME",
                   help="start in the background on a unix socket in DATA_DIR/agentctl/NAME, "
                        "the token and environment read as JSON from stdin; print where it "
                        "listens (what the ssh executor runs on a host: web/agentctl/detached.py)")
    p.add_argument("agent_command", nargs=argparse.REMAINDER,
                   help="-- COMMAND...: the agent to run (instead of --profile)")


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _hide_environment() -> None:
    """Make this process non-dumpable: its ``/proc/PID/environ`` (the token) is
    then unreadable to the agent, even under the same uid (root in a container),
    unless the agent has CAP_SYS_PTRACE.  The agent, exec'd, is dumpable again."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_dumpable = 4
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_dumpable, 0, 0, 0, 0)


def _hidden(data_dir: Path, default_data_dir: Path,
            more: list[str]) -> tuple[HiddenDir, ...]:
    """The data dir it was given, the default one (a backend's, wherever this
    agentctl was started from) and the ``--hide`` ones, each recorded now: a
    launch after one of them was moved away is refused."""
    from protocols.sandbox import HiddenDir

    out: dict[str, HiddenDir] = {}
    for path in (data_dir, default_data_dir.expanduser(), *map(Path, more)):
        hidden = HiddenDir.record(path)
        out.setdefault(hidden.path, hidden)
    return tuple(out.values())


def run_agentctl(args: argparse.Namespace, default_data_dir: Path) -> int:
    import trio

    from protocols.adapters import ProtocolName
    from protocols.agentctl_wire import TOKEN_ENV
    from supervisor.config import Config, ConfigError, Timeouts

    from ..listener import ConnLimits
    from .host import AgentctlConfig
    from .server import parse_listen, serve_agentctl

    def fail(message: str) -> int:
        print(f"turnvisor agentctl: {message}", file=sys.stderr)
        return 2

    command = list(args.agent_command)
    if command[:1] == ["--"]:
        command = command[1:]
    if bool(command) == bool(args.profile):
        return fail("give either --profile NAME or -- COMMAND... (exactly one)")
    if getattr(args, "detach", None):
        from .detached import start_detached

        return start_detached(args, Path(args.data_dir or default_data_dir).expanduser())
    try:
        host, port = parse_listen(args.listen)
    except ValueError as exc:
        return fail(str(exc))
    # What the backend's profile set itself (a HOME it names is kept, not
    # replaced by the private one): from agentctl's own environment.
    env: dict[str, str] = {n: os.environ[n] for n in args.profile_env if n in os.environ}
    thread_params: dict[str, object] = {}
    cwd = args.cwd
    protocol: ProtocolName = args.protocol or "acp"
    data_dir = Path(args.data_dir or default_data_dir).expanduser()
    sandbox: str | None = args.sandbox
    writable: list[str] = list(args.sandbox_writable)
    home_binds: list[tuple[str, bool]] = []
    network: str | None = args.network
    host_ports: list[int] = list(args.host_port)
    for spec in args.home_bind:
        path, ro = (spec[:-3], True) if spec.endswith(":ro") else (spec, False)
        relative = path.removeprefix("~/")
        if not path.startswith("~/") or any(p in ("", ".", "..") for p in relative.split("/")):
            return fail(f"--home-bind {spec}: give a path under ~ (~/.codex), without . or ..")
        home_binds.append((relative, not ro))
    if args.profile:
        try:
            profiles = Config.load(data_dir).profiles
        except ConfigError as exc:
            return fail(f"configuration error: {exc}")
        profile = profiles.get(args.profile)
        if profile is None:
            return fail(f"unknown profile {args.profile!r} (known: {', '.join(sorted(profiles))})")
        command = list(profile.command)
        env = dict(profile.env)
        thread_params = dict(profile.thread_params)
        cwd = cwd or profile.cwd
        protocol = args.protocol or profile.protocol
        sandbox = sandbox or profile.sandbox
        writable += profile.sandbox_writable
        home_binds += profile.home_binds
        network = network or profile.network
        host_ports += profile.host_ports
    cwd = str(Path(cwd or os.getcwd()).expanduser().resolve())
    if not os.path.isdir(cwd):
        return fail(f"--cwd {cwd} is not a directory")
    if args.cancel_join < 0:
        return fail("--cancel-join must be >= 0")
    if not args.idle_timeout > 0:
        return fail("--idle-timeout must be > 0")
    token = args.token or os.environ.get(TOKEN_ENV)
    if not token:
        token = secrets.token_urlsafe(32)
        print(f"agentctl token: {token}", flush=True)
    elif len(token) < 16:
        return fail("the token must be at least 16 characters")
    if not (host.startswith("unix:") or _loopback(host)):
        print(f"turnvisor agentctl: WARNING: listening on {host}: anyone who can reach this "
              "port and has the token controls the agent; the API is plain HTTP (put TLS or "
              "an SSH tunnel in front, see docs/deploy.md)", file=sys.stderr, flush=True)
    from protocols.sandbox import resolve_mode

    if resolve_mode(sandbox) == "none" and sandbox is None:
        print("turnvisor agentctl: WARNING: bubblewrap (bwrap) cannot run here: the agent "
              "runs WITHOUT a sandbox (apt-get install bubblewrap, or --sandbox none)",
              file=sys.stderr, flush=True)
    config = AgentctlConfig(command=tuple(command), protocol=protocol, env=env, cwd=cwd,
                            thread_params=thread_params,
                            timeouts=Timeouts(cancel_join_s=args.cancel_join),
                            sandbox=sandbox, hide=_hidden(data_dir, default_data_dir,
                                                          args.hide),
                            sandbox_writable=tuple(writable),
                            home=str(Path(args.home).expanduser()) if args.home
                            else str(data_dir / "homes" / "agentctl"),
                            home_binds=tuple(home_binds),
                            network=network, host_ports=tuple(host_ports),
                            replay_events=args.replay_events,
                            offline_cancel_s=args.offline_cancel_s)
    _hide_environment()
    limits = ConnLimits(idle_s=args.idle_timeout, per_peer=args.max_connections_per_peer)
    trio.run(lambda: serve_agentctl(config, host=host, port=port, token=token,
                                    ready_fd=args.ready_fd, limits=limits))
    return 0
