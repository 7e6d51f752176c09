"""The agent's process-group leader: ties the agent's life to agentctl's.

    python launcher.py --lifeline FD [--keep-fd N]... -- <agent command...>

agentctl starts this script (by path, standard library only, so it starts in
a few tens of milliseconds whatever the agent's working directory) as the
leader of a new process group.  It starts the agent as its child, in the same
group, with the same stdin/stdout/stderr, and then only waits:

- when the agent exits, it exits with the agent's status (``128 + n`` for a
  signal), so agentctl sees the agent's exit as the group leader's;
- when ``FD`` (the read end of a pipe whose write end only agentctl holds)
  reaches EOF, agentctl is gone, however it died (SIGKILL included), and the
  whole group is SIGKILLed.  PR_SET_PDEATHSIG cannot do this for a Trio
  program (it forks on worker threads that retire), a pipe's EOF can.

The launcher is its descendants' subreaper: an orphan (a daemonized tool the
agent started) is re-parented to it, not to PID 1, and reaped here; in a
container agentctl is PID 1 and reaps nobody.

SIGTERM, SIGINT and SIGHUP do not stop the launcher: they reach the agent
through the group (``terminate_group`` signals the group), and the launcher
stays to report the agent's status.  Handlers, unlike ignored signals, are
reset for the agent at exec.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

__all__ = ["main"]


def _watch(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 1):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    os.killpg(0, signal.SIGKILL)


def _parse(argv: list[str]) -> tuple[int, list[int], list[str]] | None:
    """``--lifeline FD [--keep-fd N]... -- COMMAND...``: the lifeline, the
    descriptors the agent command inherits, the command."""
    if len(argv) < 4 or argv[0] != "--lifeline":
        return None
    keep: list[int] = []
    rest = argv[2:]
    while rest[:1] == ["--keep-fd"] and len(rest) >= 2:
        keep.append(int(rest[1]))
        rest = rest[2:]
    if rest[:1] != ["--"] or len(rest) < 2:
        return None
    return int(argv[1]), keep, rest[1:]


def main(argv: list[str]) -> int:
    parsed = _parse(argv)
    if parsed is None:
        print("usage: launcher.py --lifeline FD [--keep-fd N]... -- COMMAND...",
              file=sys.stderr)
        return 2
    fd, keep, command = parsed
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: None)
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_child_subreaper = 36
        ctypes.CDLL(None).prctl(pr_set_child_subreaper, 1, 0, 0, 0)
    try:
        # close_fds (the default) keeps the lifeline out of the agent; the
        # sandbox's descriptors go to bwrap, which closes them.
        child = subprocess.Popen(command, pass_fds=keep)
    except OSError as exc:
        print(f"agentctl: cannot start {command[0]!r}: {exc}", file=sys.stderr, flush=True)
        return 127
    for kept in keep:
        os.close(kept)
    # The agent alone holds the pipes from now on: its exit is their EOF.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    threading.Thread(target=_watch, args=(fd,), daemon=True, name="lifeline").start()
    while True:
        pid, raw = os.waitpid(-1, 0)
        if pid == child.pid:
            break
    status = child.returncode = os.waitstatus_to_exitcode(raw)
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
