"""A hostile ACP agent (run as a program): the mock agent, plus two prompts.

    /attack <data dir> <server url> <backend pid> <outside path>

tries what a coding agent's shell commands could try against Turnvisor:
read the token, the database and the config, list the data dir, find the
backend in /proc, connect to the server with a guessed token, signal the
backend and its process group, type into a terminal, and write outside the
places it may write.  Each attempt's outcome goes, as it happens, into
``attack.json`` in its working directory (it may not survive its last
attempts), and the whole report is its answer.

    /sh COMMAND

runs any shell command, as an agent's tool would, and answers with its
status and output (``{"rc": …, "out": …}``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from protocols import mock_agent
from protocols.mock import stdio
from protocols.mock.base import Turn
from protocols.mock.scripts import Steps, echo


def _try(fn: Callable[[], object]) -> str:
    try:
        return f"ok: {fn()!r}"[:300]
    except BaseException as exc:  # the report is the point: every failure is recorded
        return f"refused: {type(exc).__name__}: {exc}"[:300]


def _read(path: str) -> str:
    return Path(path).read_text(errors="replace")


def _http(url: str, token: str) -> int:
    req = urllib.request.Request(url + "/api/v1/tasks",
                                 headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _write(path: str) -> str:
    Path(path).write_text("planted by a hostile agent\n")
    return path


def _parent_group() -> str:
    parent = os.getppid()
    group = os.getpgid(parent)
    if group in (0, os.getpgrp()):
        # Its "parent's group" is its own (or unknown): signalling it hits
        # nothing but the agent itself.
        return f"not reachable: parent {parent} is in group {group}, the agent's own"
    os.killpg(group, signal.SIGTERM)
    return f"SIGTERM sent to group {group}"


def _backend_pids() -> list[int]:
    """Processes in /proc whose command line looks like Turnvisor's backend."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if b"web\x00serve" in cmd:
                found.append(int(entry))
    return found


def shell(turn: Turn, text: str) -> Steps:
    if not text.startswith("/sh "):
        return echo(turn, text)
    # Any shell command, as an agent's tool would run it: its status and output.
    done = subprocess.run(["sh", "-c", text[4:]], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60, check=False)
    turn.chunk(json.dumps({"rc": done.returncode, "out": done.stdout + done.stderr}))
    turn.end("end_turn")
    return iter(())


def attack(turn: Turn, text: str) -> Steps:
    words = text.split()
    if len(words) != 5:
        return echo(turn, text)
    data, url, pid, outside = words[1], words[2], int(words[3]), words[4]
    report: dict[str, str] = {}
    out = Path("attack.json")

    def attempt(name: str, fn: Callable[[], object]) -> None:
        report[name] = _try(fn)
        out.write_text(json.dumps(report, indent=1))

    attempt("env_token", lambda: os.environ["TURNVISOR_TOKEN"])
    attempt("read_token", lambda: _read(f"{data}/token"))
    attempt("read_db", lambda: len(Path(f"{data}/turnvisor.db").read_bytes()))
    attempt("read_wal", lambda: len(Path(f"{data}/turnvisor.db-wal").read_bytes()))
    attempt("read_config", lambda: _read(f"{data}/turnvisor.toml"))
    attempt("list_data_dir", lambda: sorted(os.listdir(data)))
    attempt("backend_in_proc", _backend_pids)
    attempt("backend_environ", lambda: _read(f"/proc/{pid}/environ"))
    attempt("guessed_token", lambda: _http(url, "turnvisor-guess-0123456789"))
    attempt("empty_token", lambda: _http(url, ""))
    attempt("controlling_tty", lambda: os.close(os.open("/dev/tty", os.O_RDWR)))
    attempt("write_outside", lambda: _write(outside))
    attempt("write_data_dir", lambda: _write(f"{data}/planted"))
    attempt("signal_backend", lambda: os.kill(pid, signal.SIGTERM))
    attempt("signal_backend_group", lambda: os.killpg(pid, signal.SIGTERM))
    attempt("signal_parent_group", _parent_group)
    turn.chunk(json.dumps(report))
    turn.end("end_turn")
    return iter(())


def main() -> int:
    args = mock_agent.build_parser().parse_args(["--protocol", "acp"])
    return stdio.serve(mock_agent.machine(args, {"/sh": shell, "/attack": attack}))


if __name__ == "__main__":
    sys.exit(main())
