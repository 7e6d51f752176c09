"""The ``turnvisor`` command: every public entry point lives behind it."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import trio

from supervisor.config import Config, ConfigError

__all__ = ["main"]


def default_data_dir() -> Path:
    env = os.environ.get("TURNVISOR_DATA_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "turnvisor"


#: What the data dir holds that nobody else may read (the token, the
#: workspaces' tokens, the conversations).
PRIVATE_FILES = ("token", "turnvisor.toml", "server.json", "turnvisor.db", "turnvisor.db-wal",
                 "turnvisor.db-shm")


def make_private(data_dir: Path) -> None:
    """The data dir 0700 (created so) and its files 0600."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(data_dir, 0o700)
    for name in PRIVATE_FILES:
        path = data_dir / name
        if path.is_file() and not path.is_symlink():
            os.chmod(path, 0o600)


def _serve(args: argparse.Namespace) -> int:
    from .startup import check_port, hold_data_dir, start_failure

    data_dir = Path(args.data_dir).expanduser().resolve()
    listening: list[bool] = []
    try:
        check_port(args.port)
        # One server per data dir, decided before anything touches it (docs/reliability.md).
        with hold_data_dir(data_dir):
            return _serve_held(args, data_dir, listening)
    except Exception as exc:
        line = None if listening else start_failure(exc, host=args.host, port=args.port)
        if line is None:
            raise
        print(f"turnvisor: {line}", file=sys.stderr)
        return 2


def _serve_held(args: argparse.Namespace, data_dir: Path, listening: list[bool]) -> int:
    from .auth import load_default_token
    from .server import serve

    try:
        make_private(data_dir)
        config = Config.load(data_dir, default_agent=args.agent,
                             project_roots=args.project_root)
        config.check_start_dir()
        token = load_default_token(data_dir)
    except ConfigError as exc:
        print(f"turnvisor: configuration error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"turnvisor: data dir {data_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    trio.run(lambda: serve(config, host=args.host, port=args.port, token=token, tune_gc=True,
                           on_ready=lambda _url, _sup: listening.append(True)))
    return 0


def _backup(args: argparse.Namespace) -> int:
    from .backup import BackupError, backup, restore

    data_dir = Path(args.data_dir).expanduser().resolve()
    path = Path(args.path).expanduser().absolute()
    try:
        if args.command == "backup":
            done = backup(data_dir, path)
            print(f"backed up {data_dir} to {done.path} (schema {done.schema}, "
                  f"{done.tasks} tasks, {done.messages} messages)")
        else:
            done = restore(data_dir, path)
            kept = f"; the previous database is kept as {done.kept}" if done.kept else ""
            print(f"restored {path} into {data_dir} (schema {done.schema}, {done.tasks} "
                  f"tasks, {done.messages} messages){kept}")
    except BackupError as exc:
        print(f"turnvisor: {exc}", file=sys.stderr)
        return 2
    return 0


def _agentctl(args: argparse.Namespace) -> int:
    from .agentctl.cli import run_agentctl

    return run_agentctl(args, default_data_dir())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="turnvisor", description=__doc__)
    parser.add_argument("--log-level", default=os.environ.get("TURNVISOR_LOG", "INFO"))
    from .hosts_cli import add_hosts_command, turnvisor_version

    parser.add_argument("--version", action="version",
                        version=f"turnvisor {turnvisor_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the UI, REST and WebSocket API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    serve.add_argument("--data-dir", default=str(default_data_dir()))
    serve.add_argument("--agent", default=None, help="default agent profile (mock)")
    serve.add_argument("--project-root", action="append", metavar="DIR",
                       help="a directory tasks may work in (repeatable; replaces [projects] "
                            "roots; default: the start directory); never one holding the "
                            "data dir")
    serve.set_defaults(run=_serve)
    for name, what in (("backup", "copy the database to PATH (while serving, too)"),
                       ("restore", "replace a stopped data dir's database by PATH")):
        cmd = sub.add_parser(name, help=what)
        cmd.add_argument("path", metavar="PATH")
        cmd.add_argument("--data-dir", default=str(default_data_dir()))
        cmd.set_defaults(run=_backup)
    agentctl = sub.add_parser(
        "agentctl", help="serve one agent's control API (agents on other machines)",
        usage="turnvisor agentctl --listen HOST:PORT [--token T] "
              "(--profile NAME | -- COMMAND...) [--protocol acp|codex]")
    from .agentctl.cli import add_arguments

    add_arguments(agentctl)
    agentctl.set_defaults(run=_agentctl)
    from .client.cli import add_client_commands

    add_client_commands(sub, default_data_dir())
    add_hosts_command(sub, default_data_dir())
    from .images_cli import add_images_command

    add_images_command(sub, default_data_dir())
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
