"""``turnvisor images load``: put the container executor's image on an engine.

    turnvisor images load --profile NAME
    turnvisor images load --engine ssh://user@host[:port][/socket] [--image TAG]
                          [--ssh-identity FILE] [--ssh-known-hosts FILE]

reads the image from the engine here (``DOCKER_HOST``, or ``--from``) and
streams it to the named engine (``--profile``: that container profile's
``docker_host``, ``image`` and ssh keys) over SSH, the way the container
executor reaches it (supervisor/executors/image_load.py).  One line says what
was loaded (exit 0), or what failed (exit 1): the image missing here, the
host unreachable, its host key refused.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from supervisor.config import Config
    from supervisor.executors.engine_api import EngineAddress
    from supervisor.profiles import AgentProfile
    from supervisor.ssh_target import SshTarget

__all__ = ["add_images_command"]


def add_images_command(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                       default_data_dir: Path) -> None:
    images = sub.add_parser("images", help="the container executor's image on an engine")
    verbs = images.add_subparsers(dest="verb", required=True)
    load = verbs.add_parser("load", help="send the image from the engine here to ENGINE "
                                         "(or PROFILE's engine), streamed over ssh")
    target = load.add_mutually_exclusive_group(required=True)
    target.add_argument("--profile", metavar="PROFILE",
                        help="a container profile: its engine, image and ssh keys")
    target.add_argument("--engine", metavar="URL",
                        help="ssh://user@host[:port][/path/to/socket] (or unix://, tcp://)")
    load.add_argument("--image", metavar="TAG",
                      help="default: the profile's image, else this Turnvisor's agent image")
    load.add_argument("--from", dest="source", metavar="URL",
                      help="the engine to read it from (default: DOCKER_HOST's)")
    load.add_argument("--ssh-identity", metavar="FILE")
    load.add_argument("--ssh-known-hosts", metavar="FILE")
    load.add_argument("--timeout", type=float, default=1800.0, metavar="SECONDS",
                      help="the whole transfer's bound (default 1800)")
    load.add_argument("--data-dir", default=str(default_data_dir))
    images.set_defaults(run=_images)


def _images(args: argparse.Namespace) -> int:
    from supervisor.executors.engine_api import EngineError

    # Its one line says what happened; each request's log line would bury it.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        line = trio.run(_load, *_plan(args))
    except (_Failed, EngineError) as exc:
        print(f"turnvisor images load: {exc}", file=sys.stderr)
        return 1
    print(line)
    return 0


class _Failed(Exception):
    pass


def _plan(args: argparse.Namespace) -> tuple[Config, EngineAddress, AgentProfile | None,
                                             SshTarget | None, argparse.Namespace]:
    """The configuration, the target engine, its profile and ssh keys (one
    clear error for each bad argument)."""
    from supervisor.config import Config, ConfigError
    from supervisor.executors.engine_api import engine_address
    from supervisor.executors.ssh_engine import profile_engine
    from supervisor.ssh_target import SshTarget

    data_dir = Path(args.data_dir).expanduser()
    try:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        config = Config.load(data_dir)
    except (ConfigError, OSError) as exc:
        raise _Failed(f"configuration error: {exc}") from None
    if args.profile is not None:
        profile = config.profiles.get(args.profile)
        if profile is None:
            raise _Failed(f"unknown profile {args.profile!r}")
        if profile.executor != "container":
            raise _Failed(f"profile {args.profile!r} is not executor = \"container\" "
                          f"(it is {profile.executor!r})")
        return config, profile_engine(profile), profile, None, args
    target = _engine(engine_address, "--engine", args.engine)
    keys = None
    if target.ssh is not None:
        keys = SshTarget(destination=target.ssh.destination, port=target.ssh.port,
                         identity=_file(args.ssh_identity),
                         known_hosts=_file(args.ssh_known_hosts))
    return config, target, None, keys, args


async def _load(config: Config, target: EngineAddress, profile: AgentProfile | None,
                keys: SshTarget | None, args: argparse.Namespace) -> str:
    from supervisor.executors.engine_api import engine_address
    from supervisor.executors.image_load import load_image

    source = _engine(engine_address, "--from", args.source) if args.source else None
    done = await load_image(config, target, image=args.image, source=source,
                            profile=profile, keys=keys, timeout_s=args.timeout)
    said = "; ".join(done.said) or "loaded"
    size = f"{done.size / 1e6:.1f} MB" if done.size >= 1e5 else f"{done.size} bytes"
    return f"{done.image} → {done.target}: {size} sent ({said})"


def _engine(parse: Callable[[Mapping[str, str]], EngineAddress], option: str,
            url: str) -> EngineAddress:
    """``url`` as an engine address; its error names the option."""
    from supervisor.executors.engine_api import EngineError

    try:
        return parse({"DOCKER_HOST": url})
    except EngineError as exc:
        raise _Failed(str(exc).replace("DOCKER_HOST=", f"{option} ", 1)) from None


def _file(path: str | None) -> str | None:
    if path is None:
        return None
    found = Path(path).expanduser()
    if not found.is_file():
        raise _Failed(f"{path} is not a file")
    return str(found)
