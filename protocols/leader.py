"""The sandboxed agent's process-group leader, run by path: ``python -I -S leader.py``.

    leader.py --lifeline FD [--keep-fd N]... [--net JSON] -- bwrap --args N -- env ...

The backend spawns this (standard library only, isolated mode: nothing of the
agent's environment or directories is imported) as the leader of a new
process group and session, outside the sandbox.  It

- starts bwrap as its child with SIGTERM *ignored*, so a SIGTERM to the group
  reaches the agent (``env --default-signal=TERM`` restores it inside) while
  bwrap stays to report its status; the leader itself ignores SIGTERM,
  SIGINT and SIGHUP the same way;
- when ``--net`` is given (``{"helper": [argv], "info": FD, "block": FD}``):
  reads the sandbox's pid from bwrap's ``--info-fd``, starts the network
  helper (passt's ``pasta``) on the sandbox's network namespace (``{pid}`` in
  its argv), waits until the namespace has its default route, and only then
  writes to bwrap's ``--block-fd`` so the agent starts with its network up;
  the helper is stopped when bwrap exits;
- watches ``--lifeline``, the read end of a pipe whose write end only the
  backend holds: its EOF means the backend is gone, however it died (SIGKILL
  included), and the whole group is SIGKILLed — bwrap with it, and with bwrap
  the sandbox's pid namespace, so nothing of the agent outlives the backend
  or keeps its port;
- exits with bwrap's status (``128 + n`` for a signal).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

__all__ = ["main"]

#: How long the network helper may take to give the namespace its route.
NET_READY_S = 10.0
#: How long to wait for bwrap to say which pid the sandbox is.
INFO_S = 10.0


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


def _parse(argv: list[str]) -> tuple[int, list[int], dict[str, object] | None, list[str]] | None:
    if len(argv) < 4 or argv[0] != "--lifeline":
        return None
    lifeline = int(argv[1])
    keep: list[int] = []
    net: dict[str, object] | None = None
    rest = argv[2:]
    while rest[:1] in (["--keep-fd"], ["--net"]) and len(rest) >= 2:
        if rest[0] == "--keep-fd":
            keep.append(int(rest[1]))
        else:
            net = json.loads(rest[1])
        rest = rest[2:]
    if rest[:1] != ["--"] or len(rest) < 2:
        return None
    return lifeline, keep, net, rest[1:]


def _sandbox_pid(fd: int) -> int:
    """The pid bwrap's ``--info-fd`` names (its JSON, read until it parses)."""
    data = b""
    deadline = time.monotonic() + INFO_S
    while time.monotonic() < deadline:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        try:
            info = json.loads(data)
        except ValueError:
            continue
        return int(info["child-pid"])
    raise OSError("bwrap said no sandbox pid")


def _has_route(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/net/route", encoding="ascii") as f:
            return any(line.split()[1:2] == ["00000000"] for line in list(f)[1:])
    except OSError:
        return False


def _start_network(net: dict[str, object],
                   child: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
    info, block, helper = net["info"], net["block"], net["helper"]
    if not (isinstance(info, int) and isinstance(block, int) and isinstance(helper, list)):
        raise ValueError("--net needs helper, info and block")
    pid = _sandbox_pid(info)
    os.close(info)
    argv = [str(a).replace("{pid}", str(pid)) for a in helper]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + NET_READY_S
    while not _has_route(pid):
        if proc.poll() is not None or child.poll() is not None:
            raise OSError(f"the network helper {argv[0]} exited ({proc.returncode})")
        if time.monotonic() > deadline:
            raise OSError(f"the network helper {argv[0]} did not set up the network "
                          f"within {NET_READY_S:g} s")
        time.sleep(0.001)
    os.write(block, b"1")
    os.close(block)
    return proc


def main(argv: list[str]) -> int:
    parsed = _parse(argv)
    if parsed is None:
        print("usage: leader.py --lifeline FD [--keep-fd N]... [--net JSON] -- COMMAND...",
              file=sys.stderr)
        return 2
    lifeline, keep, net, command = parsed
    threading.Thread(target=_watch, args=(lifeline,), daemon=True, name="lifeline").start()
    # Ignored (not handled) while bwrap and the helper start: they inherit it.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    own = [v for k, v in (net or {}).items() if k in ("info", "block") and isinstance(v, int)]
    try:
        child = subprocess.Popen(command, pass_fds=[k for k in keep if k not in own])
    except OSError as exc:
        print(f"turnvisor: cannot start {command[0]!r}: {exc}", file=sys.stderr, flush=True)
        return 127
    for kept in keep:
        if kept not in own:
            os.close(kept)
    helper = None
    if net is not None:
        try:
            helper = _start_network(net, child)
        except (OSError, ValueError, KeyError) as exc:
            print(f"turnvisor: the agent's network: {exc}", file=sys.stderr, flush=True)
            os.killpg(0, signal.SIGKILL)
    # The agent alone holds the pipes from now on: its exit is their EOF.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    status = child.wait()
    if helper is not None:
        helper.kill()
        helper.wait()
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
