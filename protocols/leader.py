"""The sandboxed agent's process-group leader, run by path: ``python -I -S leader.py``.

    leader.py --lifeline FD [--keep-fd N]... --info FD --block FD
              [--port P]... [--helper ARG]... -- bwrap --args N -- env ...

The backend spawns this (isolated mode, nothing of the agent's environment or
directories imported; only modules built into the interpreter, so it starts in
a few milliseconds) as the leader of a new process group and session, outside
the sandbox.  It

- starts bwrap as its child with SIGTERM *ignored*, so a SIGTERM to the group
  reaches the agent (``env --default-signal=TERM`` restores it inside) while
  bwrap stays to report its status; the leader itself ignores SIGTERM,
  SIGINT and SIGHUP the same way;
- reads the sandbox's pid from bwrap's ``--info-fd`` (``--info``); with a
  ``--helper`` (passt's ``pasta``, ``{pid}`` and ``{userns}`` in its argv),
  starts it on the sandbox's network namespace and waits until the namespace
  has its default route and a listener on each ``--port``; only then writes to
  bwrap's ``--block-fd`` (``--block``) so the agent starts, with its network
  up; the helper is stopped when bwrap exits;
- watches ``--lifeline``, the read end of a pipe whose write end only the
  backend holds: its EOF means the backend is gone, however it died (SIGKILL
  included), and bwrap and the sandbox's init are SIGKILLed — with them the
  sandbox's pid namespace, every process the agent started, detached or not —
  and the network helper, so nothing of the agent outlives the backend or
  keeps its port;
- exits with bwrap's status (``128 + n`` for a signal).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # (signal.py would import enum)
import _thread
import fcntl
import os
import sys
import time

__all__ = ["main"]

#: How long the network helper may take to give the namespace its route.
NET_READY_S = 10.0
#: How long to wait for bwrap to say which pid the sandbox is.
INFO_S = 10.0
#: ioctl(2) on a namespace: the user namespace that owns it (linux/nsfs.h).
NS_GET_USERNS = 0xB701
SIGKILL = 9

#: What dies with the lifeline: bwrap, the sandbox's init (bwrap's own
#: --die-with-parent is not armed while it waits on --block-fd) and the
#: helper.  Not the group: a leader run inside another's group (agentctl's
#: launcher, a test) must not take that one down.
_victims: list[int] = []


def _kill_all() -> None:
    for pid in _victims:
        try:
            os.kill(pid, SIGKILL)
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
    _kill_all()
    os._exit(128 + SIGKILL)


class _Args:
    def __init__(self) -> None:
        self.lifeline = -1
        self.keep: list[int] = []
        self.info = -1
        self.block = -1
        self.ports: set[int] = set()
        self.helper: list[str] = []
        self.command: list[str] = []


def _parse(argv: list[str]) -> _Args | None:
    args = _Args()
    ints = {"--lifeline", "--keep-fd", "--info", "--block", "--port"}
    i = 0
    while i < len(argv) and argv[i] != "--":
        flag = argv[i]
        if i + 1 >= len(argv):
            return None
        value = argv[i + 1]
        if flag in ints and not value.isdigit():
            return None
        if flag == "--lifeline":
            args.lifeline = int(value)
        elif flag == "--keep-fd":
            args.keep.append(int(value))
        elif flag == "--info":
            args.info = int(value)
        elif flag == "--block":
            args.block = int(value)
        elif flag == "--port":
            args.ports.add(int(value))
        elif flag == "--helper":
            args.helper.append(value)
        else:
            return None
        i += 2
    args.command = argv[i + 1:]
    if args.lifeline < 0 or args.info < 0 or args.block < 0 or not args.command:
        return None
    return args


def _spawn(argv: list[str], *, stderr: int | None = None) -> int:
    """``argv`` as a child: the descriptors it inherits are the inheritable
    ones; SIGPIPE and SIGXFSZ at their defaults (Python ignores them), SIGTERM
    as it is here (ignored)."""
    actions: list[tuple[int, ...]] = []
    if stderr is not None:
        # A helper: nothing of the agent's stdio (its pipes to the backend).
        devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        actions = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1),
                   (os.POSIX_SPAWN_DUP2, stderr, 2)]
    return os.posix_spawn(argv[0], argv, os.environ, file_actions=actions,
                          setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ))


def _sandbox_pid(fd: int) -> int:
    """The pid in bwrap's ``--info-fd`` JSON (``"child-pid": N``)."""
    data = b""
    deadline = time.monotonic() + INFO_S
    while time.monotonic() < deadline:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        key = data.find(b'"child-pid"')
        # The whole document first: closing our end while bwrap still writes
        # would kill it with SIGPIPE.
        if key >= 0 and data.rstrip().endswith(b"}"):
            rest = data[key + len(b'"child-pid"'):].lstrip(b" \t\n:")
            digits = rest[:len(rest) - len(rest.lstrip(b"0123456789"))]
            if digits:
                return int(digits)
    raise OSError("bwrap said no sandbox pid")


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except OSError:
        return ""


def _has_route(pid: int) -> bool:
    return any(line.split()[1:2] == ["00000000"]
               for line in _read(f"/proc/{pid}/net/route").splitlines()[1:])


def _listening(pid: int, ports: set[int]) -> bool:
    """Whether something listens, inside the namespace, on each forwarded
    port (TCP LISTEN in its /proc/net/tcp or tcp6)."""
    if not ports:
        return True
    found: set[int] = set()
    for table in ("tcp", "tcp6"):
        for line in _read(f"/proc/{pid}/net/{table}").splitlines()[1:]:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A":
                found.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports <= found


#: Statuses of the children reaped while the network came up.
_reaped: dict[int, int] = {}


def _exited(pid: int) -> bool:
    if pid in _reaped:
        return True
    try:
        done, raw = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    if done == pid:
        _reaped[pid] = raw
    return done == pid


def _wait(pid: int) -> int:
    """``pid``'s wait status, once it exits (or as reaped before)."""
    while pid not in _reaped:
        try:
            _, raw = os.waitpid(pid, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            return 0
        _reaped[pid] = raw
    return _reaped[pid]


def _drain(fd: int, said: list[bytes]) -> None:
    """Keep the helper's stderr flowing (a full pipe would stop it); keep its
    last lines for an error."""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return
        said.append(chunk)
        del said[:-8]


def _last_words(said: list[bytes]) -> str:
    lines = b"".join(said).decode("utf-8", "replace").splitlines()
    useful = [ln.strip() for ln in lines if ln.strip() and "syslog" not in ln]
    return "; ".join(useful[-3:]) or "no message"


def _start_network(args: _Args, bwrap: int) -> int | None:
    """Connect the sandbox (and learn its pid); let the agent start."""
    pid = _sandbox_pid(args.info)
    os.close(args.info)
    _victims.append(pid)
    helper_pid = None
    if args.helper:
        # bwrap names the pid before its user namespace has its uid map: a
        # helper joining it (a non-root backend's) must wait for the map.
        deadline = time.monotonic() + NET_READY_S
        while not _read(f"/proc/{pid}/uid_map").strip() and time.monotonic() < deadline:
            time.sleep(0.0005)
        argv = [a.replace("{pid}", str(pid)) for a in args.helper]
        if any("{userns}" in a for a in argv):
            # The user namespace owning the sandbox's network namespace, not
            # the one its pid is in by then (bwrap nests another to drop its
            # privileges); named through our own table (the helper closes its).
            net_fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            owner = fcntl.ioctl(net_fd, NS_GET_USERNS)
            os.close(net_fd)
            os.set_inheritable(owner, False)
            argv = [a.replace("{userns}", f"/proc/{os.getpid()}/fd/{owner}") for a in argv]
        err_r, err_w = os.pipe()
        os.set_inheritable(err_w, True)
        helper_pid = _spawn(argv, stderr=err_w)
        os.close(err_w)
        _victims.append(helper_pid)
        said: list[bytes] = []
        _thread.start_new_thread(_drain, (err_r, said))
        deadline = time.monotonic() + NET_READY_S
        while not (_has_route(pid) and _listening(pid, args.ports)):
            if _exited(bwrap):
                raise OSError(f"the sandbox exited (status {_status(_wait(bwrap))}) before "
                              "its network was up")
            if _exited(helper_pid):
                time.sleep(0.05)  # its last words
                raise OSError(f"the network helper {argv[0]} exited (status "
                              f"{_status(_wait(helper_pid))}): {_last_words(said)}")
            if time.monotonic() > deadline:
                raise OSError(f"the network helper {argv[0]} did not set up the network "
                              f"within {NET_READY_S:g} s: {_last_words(said)}")
            time.sleep(0.001)
    os.write(args.block, b"1")
    os.close(args.block)
    return helper_pid


def _status(raw: int) -> int:
    code = os.waitstatus_to_exitcode(raw)
    return code if code >= 0 else 128 - code


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if args is None:
        print("usage: leader.py --lifeline FD [--keep-fd N]... --info FD --block FD "
              "[--port P]... [--helper ARG]... -- COMMAND...", file=sys.stderr)
        return 2
    # Ours alone: bwrap must not hold the lifeline, nor our ends of its pipes.
    for own in (args.lifeline, args.info, args.block):
        os.set_inheritable(own, False)
    _thread.start_new_thread(_watch, (args.lifeline,))
    # Ignored (not handled) while bwrap and the helper start: they inherit it.
    for sig in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
        _signal.signal(sig, _signal.SIG_IGN)
    try:
        bwrap = _spawn(args.command)
    except OSError as exc:
        print(f"turnvisor: cannot start {args.command[0]!r}: {exc}", file=sys.stderr,
              flush=True)
        return 127
    _victims.insert(0, bwrap)
    for kept in args.keep:
        os.close(kept)
    helper = None
    try:
        helper = _start_network(args, bwrap)
    except (OSError, ValueError) as exc:
        print(f"turnvisor: the agent's network: {exc}", file=sys.stderr, flush=True)
        _kill_all()
        _wait(bwrap)
        return 125
    # The agent alone holds the pipes from now on: its exit is their EOF.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    raw = _wait(bwrap)
    if helper is not None:
        try:
            os.kill(helper, SIGKILL)
        except OSError:
            pass
        _wait(helper)
    return _status(raw)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
