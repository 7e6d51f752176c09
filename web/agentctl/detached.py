"""A detached agentctl on a host the backend reaches over SSH (the ssh executor).

What the backend runs on the host, through ``ssh``:

``turnvisor agentctl --detach NAME ... -- COMMAND`` (``start_detached``)
    reads one JSON line from stdin: ``{"token": ..., "env": {...}}`` (the
    token and the profile's environment never appear on a command line, so
    ``ps`` on the host does not show them); starts the agentctl in a session
    of its own (``setsid``: a dropped SSH connection does not signal it), its
    output in a log file, listening on a unix socket in its run directory
    ``DATA_DIR/agentctl/NAME`` (0700, inside the data dir its agent's
    sandbox hides); waits until it listens and prints one JSON line
    ``{"socket", "pid", "attached": false}``.  When that run directory
    already holds a live agentctl (the same pid and start time, recorded in
    ``agentctl.pid``), it is left as it is and reported with ``"attached":
    true``: the backend lost its connection and comes back for it.
``turnvisor hosts stop NAME`` (``stop_detached``)
    SIGTERM (agentctl stops its agent), SIGKILL of its group after a grace;
    the run directory is removed.
``turnvisor hosts sweep PREFIX [--keep NAME] [--keep -]`` (``sweep_detached``)
    stops every run directory under ``DATA_DIR/agentctl/PREFIX`` but those
    kept (``-``: the names on stdin, one a line, as many as the backend's
    sessions): what a previous backend left whose session is gone.

Lifetime: a detached agentctl runs until the backend stops it (its session
ends), or a later backend's start sweeps it (its session gone); a lost SSH
connection, or a backend restart, leaves it running for the backend to
re-attach.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from protocols.fence_paths import PathRefused, open_by_identity
from protocols.process import process_identity

__all__ = ["RUN_DIR", "run_dir", "start_detached", "stop_detached", "sweep_detached"]

#: Under the host's data dir (hidden from every agent's sandbox there).
RUN_DIR: Final = "agentctl"
SOCKET: Final = "agentctl.sock"
PID_FILE: Final = "agentctl.pid"
LOG_FILE: Final = "agentctl.log"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,63})?")
_START_S: Final = 30.0
_STOP_GRACE_S: Final = 5.0
#: A unix socket path's bound (sun_path is 108 bytes).
_MAX_SOCKET_PATH: Final = 100


class DetachError(Exception):
    pass


def run_dir(data_dir: Path, name: str) -> Path:
    """``DATA_DIR/agentctl/NAME``; ``NAME`` is one or two plain path segments."""
    if not _NAME.fullmatch(name) or ".." in name:
        raise DetachError(f"bad run name {name!r} (letters, digits, '_.-', at most one '/')")
    return data_dir / RUN_DIR / name


def _private_dirs(path: Path, top: Path) -> None:
    """``path`` and its parents below ``top`` made 0700, each a real directory
    of ours closed to others (the fence's one way, ``open_by_identity``: a
    symlink or another user's directory planted there is refused).  ``top``
    itself is left as it is: it may be the shared temporary directory
    (sticky, everyone's)."""
    try:
        opened = open_by_identity(str(path.absolute()), create=True, mode=0o700,
                                  private_below=os.path.realpath(top))
    except PathRefused as exc:
        raise DetachError(str(exc)) from None
    os.close(opened.fd)


def _socket(run: Path) -> Path:
    """Where the agentctl of ``run`` listens: in ``run``, or (a data dir too deep
    for a unix socket path) in a 0700 directory of this user's under the
    temporary directory, named for ``run``."""
    inside = run / SOCKET
    if len(str(inside)) <= _MAX_SOCKET_PATH:
        return inside
    short = Path(tempfile.gettempdir()) / f"turnvisor-agentctl-{os.getuid()}"
    _private_dirs(short, short.parent)
    return short / (hashlib.sha256(str(run).encode()).hexdigest()[:24] + ".sock")


def _live(run: Path) -> int | None:
    """The pid of the agentctl recorded in ``run``, if that very process still runs."""
    try:
        record = json.loads((run / PID_FILE).read_text())
        pid, identity = int(record["pid"]), str(record["identity"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if process_identity(pid) == identity else None


def start_detached(args: argparse.Namespace, data_dir: Path) -> int:
    """``--detach NAME`` (module doc).  ``args`` are agentctl's, parsed."""
    try:
        run = run_dir(data_dir, args.detach)
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        _private_dirs(run, data_dir)
    except (DetachError, OSError) as exc:
        print(f"turnvisor agentctl: {exc}", file=sys.stderr)
        return 2
    pid = _live(run)
    if pid is not None:
        print(json.dumps({"socket": str(_socket(run)), "pid": pid, "attached": True}),
              flush=True)
        return 0
    line = sys.stdin.readline()
    try:
        secret: Any = json.loads(line)
        token, env = secret["token"], secret.get("env") or {}
        if not isinstance(token, str) or not isinstance(env, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise ValueError("wrong shape")
    except (ValueError, KeyError, TypeError):
        print("turnvisor agentctl: --detach wants {\"token\": ..., \"env\": {...}} as one "
              "JSON line on stdin", file=sys.stderr)
        return 2
    try:
        sock = _socket(run)
    except (DetachError, OSError) as exc:
        print(f"turnvisor agentctl: {exc}", file=sys.stderr)
        return 2
    inner = argparse.Namespace(**{**vars(args), "detach": None, "token": None,
                                  "listen": f"unix:{sock}", "ready_fd": None})
    ready_r, ready_w = os.pipe()
    with (run / LOG_FILE).open("ab") as log:
        os.chmod(run / LOG_FILE, 0o600)
        child = subprocess.Popen(
            [sys.executable, "-m", "web.agentctl.daemon", str(ready_w)],
            stdin=subprocess.PIPE, stdout=log, stderr=log, pass_fds=(ready_w,),
            start_new_session=True, env={**os.environ, **env}, close_fds=True)
    os.close(ready_w)
    assert child.stdin is not None
    # The token goes on the child's stdin, with the arguments (none of it in argv).
    given = {k: v for k, v in vars(inner).items() if not callable(v)}  # not ``run``
    child.stdin.write(json.dumps({"args": given, "token": token,
                                  "data_dir": str(data_dir)}).encode())
    child.stdin.close()
    identity = process_identity(child.pid)
    (run / PID_FILE).write_text(json.dumps({"pid": child.pid, "identity": identity}))
    ready = b""
    deadline = time.monotonic() + _START_S
    with os.fdopen(ready_r, "rb", buffering=0) as r:
        os.set_blocking(r.fileno(), False)
        while not ready.endswith(b"\n") and time.monotonic() < deadline:
            if child.poll() is not None:
                break
            try:
                chunk = r.read(4096)
            except BlockingIOError:
                chunk = None
            if chunk == b"":
                break
            if chunk:
                ready += chunk
            else:
                time.sleep(0.02)
    if not ready.endswith(b"\n"):
        tail = (run / LOG_FILE).read_text(errors="replace")[-2000:]
        _stop(run)
        print(f"turnvisor agentctl: the detached agentctl did not start "
              f"(exit status {child.poll()}):\n{tail}", file=sys.stderr)
        return 1
    print(json.dumps({"socket": str(sock), "pid": child.pid, "attached": False}), flush=True)
    return 0


def _stop(run: Path, grace_s: float = _STOP_GRACE_S) -> bool:
    """Stop the agentctl of ``run`` (if it still runs) and remove ``run``;
    whether one was running."""
    pid = _live(run)
    if pid is not None:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace_s
        while process_identity(pid) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        if process_identity(pid) is not None:
            try:
                os.killpg(pid, signal.SIGKILL)  # it leads its own group (setsid)
            except ProcessLookupError:
                pass
    try:
        _socket(run).unlink(missing_ok=True)
    except (DetachError, OSError):
        pass
    shutil.rmtree(run, ignore_errors=True)
    return pid is not None


def stop_detached(data_dir: Path, name: str) -> int:
    """``turnvisor hosts stop NAME``: prints ``stopped`` or ``gone``."""
    try:
        run = run_dir(data_dir, name)
    except DetachError as exc:
        print(f"turnvisor hosts stop: {exc}", file=sys.stderr)
        return 2
    print("stopped" if _stop(run) else "gone", flush=True)
    return 0


def sweep_detached(data_dir: Path, prefix: str, keep: list[str]) -> int:
    """``turnvisor hosts sweep PREFIX``: prints each run stopped, one a line."""
    try:
        base = run_dir(data_dir, prefix)
    except DetachError as exc:
        print(f"turnvisor hosts sweep: {exc}", file=sys.stderr)
        return 2
    kept = set(keep)
    if "-" in kept:
        kept |= {line.strip() for line in sys.stdin if line.strip()}
    if base.is_dir() and not base.is_symlink():
        for run in sorted(base.iterdir()):
            name = f"{prefix}/{run.name}"
            if name in kept or run.is_symlink() or not run.is_dir():
                continue
            if _stop(run):
                print(name, flush=True)
    return 0
