"""The client subcommands' arguments, and running one of them to an exit status."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from .commands import (
    EXIT,
    cancel_session,
    list_sessions,
    list_tasks,
    run_prompt,
    watch_session,
)
from .connection import Endpoint, client_error, find_server
from .stop import stop_all, stop_session

__all__ = ["add_client_commands"]


def _common(p: argparse.ArgumentParser, data_dir: Path) -> None:
    p.add_argument("--url", default=None,
                   help="the server (default: TURNVISOR_URL, else the one serving --data-dir)")
    p.add_argument("--token", default=None, help="its token (default: TURNVISOR_TOKEN, else "
                   "the one the server wrote into its data dir)")
    p.add_argument("--data-dir", default=str(data_dir))


def _runner(command: Callable[[argparse.Namespace, Endpoint], Awaitable[int]]
            ) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            endpoint = find_server(args.url, args.token, Path(args.data_dir).expanduser())
            return trio.run(command, args, endpoint)
        except KeyboardInterrupt:
            return EXIT["interrupted"]
        except BaseException as exc:
            found = client_error(exc)
            if found is None:
                raise
            print(f"turnvisor: {found}", file=sys.stderr)
            return 1
    return run


async def _run(args: argparse.Namespace, endpoint: Endpoint) -> int:
    return await run_prompt(endpoint, args.prompt, agent=args.agent, task_id=args.task,
                            session_id=args.session, out=sys.stdout, err=sys.stderr)


async def _cancel(args: argparse.Namespace, endpoint: Endpoint) -> int:
    return await cancel_session(endpoint, args.session, args.turn, sys.stdout)


async def _stop(args: argparse.Namespace, endpoint: Endpoint) -> int:
    if args.all:
        return await stop_all(endpoint, sys.stdout, args.json)
    return await stop_session(endpoint, args.session, args.turn, args.after_step, sys.stdout)


def _stop_checked(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    """``stop``'s two forms, told apart before anything is sent."""
    run = _runner(_stop)

    def check(args: argparse.Namespace) -> int:
        if args.all and (args.session is not None or args.turn is not None or args.after_step):
            parser.error("--all stops every running turn: it takes no SESSION, --turn or "
                         "--after-step")
        if not args.all and args.session is None:
            parser.error("name a SESSION, or pass --all")
        if not args.all and args.json:
            parser.error("--json goes with --all (a session's stop prints JSON already)")
        return run(args)
    return check


async def _watch(args: argparse.Namespace, endpoint: Endpoint) -> int:
    return await watch_session(endpoint, args.session, sys.stdout)


async def _tasks(args: argparse.Namespace, endpoint: Endpoint) -> int:
    return await list_tasks(endpoint, sys.stdout, args.json)


async def _sessions(args: argparse.Namespace, endpoint: Endpoint) -> int:
    return await list_sessions(endpoint, args.task, sys.stdout, args.json)


def add_client_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                        data_dir: Path) -> None:
    run = sub.add_parser(
        "run", help="send a prompt and stream the answer; Ctrl-C stops the turn",
        description="Ctrl-C while a tool call runs stops the turn after that step; again, "
                    "it stops now; again, it leaves. With no tool call running the first "
                    "stops now. Exit status: 0 the turn ended normally, 3 it was cancelled, "
                    "4 it ended otherwise (error, refusal, limits), 1 the client failed, 130 "
                    "left with the Ctrl-C after the stop now.")
    _common(run, data_dir)
    run.add_argument("--agent", default=None, help="agent profile for a new session")
    run.add_argument("--task", default=None, help="a task to add the new session to")
    run.add_argument("--session", default=None, help="send to this session instead")
    run.add_argument("prompt")
    run.set_defaults(run=_runner(_run))
    cancel = sub.add_parser("cancel", help="cancel a session's running turn")
    _common(cancel, data_dir)
    cancel.add_argument("--turn", default=None,
                        help="only if this turn still runs (never the one after it)")
    cancel.add_argument("session")
    cancel.set_defaults(run=_runner(_cancel))
    stop = sub.add_parser(
        "stop", help="stop a session's running turn (now, or after its running step), "
                     "or every running turn",
        usage="turnvisor stop [--turn TURN] [--after-step] SESSION | turnvisor stop --all "
              "[--json]",
        description="SESSION: prints the cancel's answer, with its receipt, as JSON. --all: "
                    "stops every running turn of the workspace and prints one line per "
                    "session (session, turn, outcome, latency).")
    _common(stop, data_dir)
    stop.add_argument("--turn", default=None,
                      help="only if this turn still runs (never the one after it)")
    stop.add_argument("--after-step", action="store_true",
                      help="let the running tool calls finish, then stop before the next")
    stop.add_argument("--all", action="store_true", help="stop every running turn")
    stop.add_argument("--json", action="store_true",
                      help="with --all: one JSON object per session (with its receipt)")
    stop.add_argument("session", nargs="?", default=None)
    stop.set_defaults(run=_stop_checked(stop))
    watch = sub.add_parser("watch", help="print a session's notifications as JSON lines")
    _common(watch, data_dir)
    watch.add_argument("session")
    watch.set_defaults(run=_runner(_watch))
    tasks = sub.add_parser("tasks", help="list the tasks")
    _common(tasks, data_dir)
    tasks.add_argument("--json", action="store_true", help="one JSON object per line")
    tasks.set_defaults(run=_runner(_tasks))
    sessions = sub.add_parser("sessions", help="list a task's sessions")
    _common(sessions, data_dir)
    sessions.add_argument("--json", action="store_true", help="one JSON object per line")
    sessions.add_argument("task")
    sessions.set_defaults(run=_runner(_sessions))
