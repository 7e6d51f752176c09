"""The sandboxed agent's process-group leader, run by path: ``python -I -S leader.py``.

    leader.py --lifeline FD [--keep-fd N]... [--net JSON] -- bwrap --args N -- env ...

The backend spawns this (standard library only, isolated mode: nothing of the
agent's environment or directories is imported) as the leader of a new
process group and session, outside the sandbox.  It

- starts bwrap as its child with SIGTERM *ignored*, so a SIGTERM to the group
  reaches the agent (``env --default-signal=TERM`` restores it inside) while
  bwrap stays to report its status; the leader itself ignores SIGTERM,
  SIGINT and SIGHUP the same way;
- with ``--net`` (``{"helper": [argv] | null, "info": FD, "block": FD}``):
  reads the sandbox's pid from bwrap's ``--info-fd``; with a helper, starts
  it (passt's ``pasta``) on the sandbox's network namespace (``{pid}`` in its
  argv) and waits until the namespace has its default route; only then
  writes to bwrap's ``--block-fd`` so the agent starts (with its network up);
  the helper is stopped when bwrap exits;
- watches ``--lifeline``, the read end of a pipe whose write end only the
  backend holds: its EOF means the backend is gone, however it died (SIGKILL
  included), and bwrap is SIGKILLed — and with bwrap the sandbox's pid
  namespace, every process the agent started, detached or not — and the
  network helper, so nothing of the agent outlives the backend or keeps its
  port;
- exits with bwrap's status (``128 + n`` for a signal).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO

__all__ = ["main"]

#: How long the network helper may take to give the namespace its route.
NET_READY_S = 10.0
#: ioctl(2) on a namespace: the user namespace that owns it (linux/nsfs.h).
NS_GET_USERNS = 0xB701
#: How long to wait for bwrap to say which pid the sandbox is.
INFO_S = 10.0


#: What dies with the leader's lifeline: bwrap (and with it the sandbox's pid
#: namespace, everything the agent started) and the network helper.  Not the
#: group: a leader run inside another's group (agentctl's launcher, a test)
#: must not take that one down.
_children: list[subprocess.Popen[bytes]] = []
_sandbox_pids: list[int] = []


def _kill_children() -> None:
    for pid in _sandbox_pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for child in _children:
        try:
            child.send_signal(signal.SIGKILL)
        except OSError:
            pass


def _watch(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 1):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    _kill_children()
    os._exit(128 + signal.SIGKILL)


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


def _mapped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/uid_map", encoding="ascii") as f:
            return bool(f.read().strip())
    except OSError:
        return False


def _listening(pid: int, ports: set[int]) -> bool:
    """Whether the helper listens, inside the namespace, on each forwarded port
    (TCP LISTEN in its /proc/net/tcp or tcp6)."""
    if not ports:
        return True
    found: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}", encoding="ascii") as f:
                for line in list(f)[1:]:
                    fields = line.split()
                    if len(fields) > 3 and fields[3] == "0A":
                        found.add(int(fields[1].rsplit(":", 1)[1], 16))
        except OSError:
            continue
    return ports <= found


def _has_route(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/net/route", encoding="ascii") as f:
            return any(line.split()[1:2] == ["00000000"] for line in list(f)[1:])
    except OSError:
        return False


def _start_network(net: dict[str, object],
                   child: subprocess.Popen[bytes]) -> subprocess.Popen[bytes] | None:
    info, block, helper = net["info"], net["block"], net["helper"]
    if not (isinstance(info, int) and isinstance(block, int)
            and (helper is None or isinstance(helper, list))):
        raise ValueError("--net needs helper, info and block")
    pid = _sandbox_pid(info)
    os.close(info)
    # The sandbox's init dies with the lifeline too: bwrap's own
    # --die-with-parent is not armed while it waits on --block-fd.
    _sandbox_pids.append(pid)
    if helper is None:
        os.write(block, b"1")
        os.close(block)
        return None
    # bwrap names the pid before its user namespace has its uid map: the
    # helper joining it (a non-root backend's) must wait for the map.
    deadline = time.monotonic() + NET_READY_S
    while not _mapped(pid) and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.0005)
    argv = [str(a).replace("{pid}", str(pid)) for a in helper]
    if any("{userns}" in a for a in argv):
        # The user namespace that owns the sandbox's network namespace: not
        # the one its pid is in by then (bwrap nests another to drop its
        # privileges), which the helper could not configure the network from.
        # Named through our own descriptor table (the helper closes its own).
        net_fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        owner = fcntl.ioctl(net_fd, NS_GET_USERNS)
        os.close(net_fd)
        argv = [a.replace("{userns}", f"/proc/{os.getpid()}/fd/{owner}") for a in argv]
    # Its chatter (a syslog it cannot reach) is not the agent's stderr; it is
    # said only when the helper fails.
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _children.append(proc)
    assert proc.stderr is not None
    said: list[bytes] = []
    threading.Thread(target=_drain, args=(proc.stderr, said), daemon=True).start()
    deadline = time.monotonic() + NET_READY_S
    listed = net.get("ports")
    ports = {p for p in listed if isinstance(p, int)} if isinstance(listed, list) else set()
    while not (_has_route(pid) and _listening(pid, ports)):
        if proc.poll() is not None or child.poll() is not None:
            time.sleep(0.05)  # its last words
            raise OSError(f"the network helper {argv[0]} exited ({proc.returncode}): "
                          + _last_words(said))
        if time.monotonic() > deadline:
            raise OSError(f"the network helper {argv[0]} did not set up the network "
                          f"within {NET_READY_S:g} s: " + _last_words(said))
        time.sleep(0.001)
    os.write(block, b"1")
    os.close(block)
    return proc


def _drain(stream: IO[bytes], said: list[bytes]) -> None:
    """Keep the helper's stderr flowing (a full pipe would stop it); keep its
    last lines for an error."""
    for line in stream:
        said.append(line)
        del said[:-5]


def _last_words(said: list[bytes]) -> str:
    lines = [raw.decode("utf-8", "replace").strip() for raw in said]
    useful = [ln for ln in lines if ln and "syslog" not in ln]
    return "; ".join(useful[-3:]) or "no message"


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
        _children.append(child)
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
            _kill_children()
            child.wait()
            return 125
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
