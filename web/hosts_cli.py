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
    ok, line = trio.run(check_host, data_dir, args.profile)
    print(line, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


async def check_host(data_dir: Path, profile_name: str) -> tuple[bool, str]:
    """Whether ``profile_name``'s host is ready, and one line saying so (or what is not)."""
    from supervisor.config import Config, ConfigError
    from supervisor.executors.ssh_host import SshHost, control_dir, ssh_error

    try:
        config = Config.load(data_dir)
    except ConfigError as exc:
        return False, f"turnvisor hosts check: configuration error: {exc}"
    profile = config.profiles.get(profile_name)
    if profile is None:
        return False, f"turnvisor hosts check: unknown profile {profile_name!r}"
    target = profile.ssh
    if profile.executor != "ssh" or target is None:
        return False, (f"turnvisor hosts check: profile {profile_name!r} is not "
                       f"executor = \"ssh\" (it is {profile.executor!r})")
    host = SshHost(target, control_dir(config.data_dir),
                   connect_s=config.timeouts.agentctl_connect_s)
    command = " ".join(target.remote_turnvisor)
    try:
        done = await host.run([*target.remote_turnvisor, "--version"],
                              timeout_s=config.timeouts.agentctl_connect_s + 10)
    except OSError as exc:
        return False, str(exc)
    if done.returncode == 255:
        return False, ssh_error(target, done.stderr, done.returncode)
    if done.returncode == 127:
        return False, (f"{target}: {command!r} is not found on the host (install Turnvisor "
                       "there, or set remote_turnvisor to the command that runs it)")
    out = (done.stdout + done.stderr).decode(errors="replace").strip()
    words = out.split()
    if done.returncode != 0 or len(words) < 2 or words[0] != "turnvisor":
        return False, (f"{target}: {command!r} --version did not answer as Turnvisor does "
                       f"(exit status {done.returncode}): {out[-300:]}")
    here = turnvisor_version()
    if words[1] != here:
        return False, f"{target}: the host runs Turnvisor {words[1]}, this backend {here}"
    return True, f"{target}: Turnvisor {here}, as here"
