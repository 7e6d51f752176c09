"""``turnvisor hosts``: the SSH hosts of ``executor = "ssh"`` profiles.

``turnvisor hosts check PROFILE`` (run here) reaches the profile's host and
runs its ``remote_turnvisor --version``: one line for what is missing or
which version differs, exit status 0 when the host is ready, 1 when not.

``turnvisor hosts stop NAME`` and ``turnvisor hosts sweep PREFIX`` are what
the backend runs on a host over ssh (web/agentctl/detached.py): stop one
detached agentctl, or all of a backend instance's.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

import trio

__all__ = ["add_hosts_command", "turnvisor_version"]


def turnvisor_version() -> str:
    try:
        return metadata.version("turnvisor")
    except metadata.PackageNotFoundError:
        return "unknown"


def add_hosts_command(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                      default_data_dir: Path) -> None:
    hosts = sub.add_parser("hosts", help="the SSH hosts of executor = \"ssh\" profiles")
    verbs = hosts.add_subparsers(dest="verb", required=True)
    check = verbs.add_parser("check", help="reach PROFILE's host and compare its Turnvisor")
    check.add_argument("profile", metavar="PROFILE")
    stop = verbs.add_parser("stop", help="(on a host) stop the detached agentctl NAME")
    stop.add_argument("name", metavar="NAME")
    sweep = verbs.add_parser("sweep", help="(on a host) stop every detached agentctl of PREFIX")
    sweep.add_argument("prefix", metavar="PREFIX")
    sweep.add_argument("--keep", action="append", default=[], metavar="NAME")
    for verb in (check, stop, sweep):
        verb.add_argument("--data-dir", default=str(default_data_dir))
    hosts.set_defaults(run=_hosts)


def _hosts(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).expanduser()
    if args.verb == "stop":
        from .agentctl.detached import stop_detached

        return stop_detached(data_dir, args.name)
    if args.verb == "sweep":
        from .agentctl.detached import sweep_detached

        return sweep_detached(data_dir, args.prefix, args.keep)
    problems, line = trio.run(check_host, data_dir, args.profile)
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print(line)
    return 1 if problems else 0


async def check_host(data_dir: Path, profile_name: str) -> tuple[list[str], str]:
    """What keeps ``profile_name``'s host from running its agents (one line
    each; none: ready), and the line that says it is ready."""
    from supervisor.config import Config, ConfigError
    from supervisor.executors.ssh_host import SshHost, control_dir, ssh_error

    try:
        config = Config.load(data_dir)
    except ConfigError as exc:
        return [f"turnvisor hosts check: configuration error: {exc}"], ""
    profile = config.profiles.get(profile_name)
    if profile is None:
        return [f"turnvisor hosts check: unknown profile {profile_name!r}"], ""
    target = profile.ssh
    if profile.executor != "ssh" or target is None:
        return [f"turnvisor hosts check: profile {profile_name!r} is not executor = \"ssh\" "
                f"(it is {profile.executor!r})"], ""
    host = SshHost(target, control_dir(config.data_dir),
                   connect_s=config.timeouts.agentctl_connect_s)
    command = " ".join(target.remote_turnvisor)
    bound = config.timeouts.agentctl_connect_s + 10
    try:
        done = await host.run([*target.remote_turnvisor, "--version"], timeout_s=bound)
    except OSError as exc:
        return [str(exc)], ""
    if done.returncode == 255:
        return [ssh_error(target, done.stderr, done.returncode)], ""
    problems = []
    out = (done.stdout + done.stderr).decode(errors="replace").strip()
    words = out.split()
    here = turnvisor_version()
    if done.returncode == 127:
        problems.append(f"{target}: {command!r} is not found on the host (install Turnvisor "
                        "there, or set remote_turnvisor to the command that runs it)")
    elif done.returncode != 0 or len(words) < 2 or words[0] != "turnvisor":
        problems.append(f"{target}: {command!r} --version did not answer as Turnvisor does "
                        f"(exit status {done.returncode}): {out[-300:]}")
    elif words[1] != here:
        problems.append(f"{target}: the host runs Turnvisor {words[1]}, this backend {here}")
    # What agentctl's sandbox needs there (unless the profile does without).
    tools = await host.run(["sh", "-c", "for t in bwrap pasta; do command -v $t >/dev/null "
                            "&& echo $t; done; true"], timeout_s=bound)
    found = tools.stdout.decode(errors="replace").split()
    if profile.sandbox != "none" and "bwrap" not in found:
        problems.append(f"{target}: bwrap (bubblewrap) is missing on the host: agentctl there "
                        "cannot sandbox the agent (apt-get install bubblewrap, or sandbox = "
                        "\"none\")")
    if profile.network == "isolated" and "pasta" not in found:
        problems.append(f"{target}: pasta (passt) is missing on the host: network = "
                        "\"isolated\" cannot be set up there (apt-get install passt)")
    return problems, f"{target}: Turnvisor {here}, as here"
