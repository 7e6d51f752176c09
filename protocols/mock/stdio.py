"""The mock agent's transport as a program: stdin and stdout, one thread, the real clock.

It waits for stdin with ``select`` until the machine's next timer, feeds what came, lets
the machine's due scripts run, and carries out the effects.  Writes block (a client that
does not read slows the agent down, as it would a real one); input is read between them.
``spawn`` is the machine's way to leave a process behind (``/stray``).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

from .base import CloseOut, Err, Exit, Out
from .machine import MockMachine

__all__ = ["serve", "spawn"]

#: The processes ``spawn`` left running: kept so that no ``Popen`` is collected while
#: its process runs (that would warn), and reaped as they end (``_reap``).
_strays: list[subprocess.Popen[bytes]] = []


def spawn(argv: Sequence[str]) -> int:
    """Start ``argv`` in this process's own group (no new session or group: a stray
    the supervisor must find there), its stdio on /dev/null so it holds none of the
    agent's pipes open; its pid, without waiting for it."""
    if not _strays:
        # Reap an ended stray at once, so it does not linger as a zombie in the
        # group; poll() only collects one that has ended, never stops one.
        signal.signal(signal.SIGCHLD, _reap)
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _strays.append(proc)
    return proc.pid


def _reap(signum: int, frame: FrameType | None) -> None:
    _strays[:] = [p for p in _strays if p.poll() is None]


def serve(machine: MockMachine) -> int:
    """Run ``machine`` on this process's stdin and stdout until stdin ends; the exit status."""
    stdin = sys.stdin.fileno()
    out = sys.stdout.buffer
    stdout_open = True
    while True:
        for effect in machine.effects():
            match effect:
                case Out(data=data) if stdout_open:
                    try:
                        out.write(data)
                        out.flush()
                    except (BrokenPipeError, ValueError):
                        stdout_open = False
                case Err(data=data):
                    os.write(2, data)
                case CloseOut():
                    stdout_open = False
                    out.close()
                    os.close(1)
                case Exit(status=status):
                    os._exit(status)
                case _:
                    pass
        if machine.closed:
            return 0
        wake = machine.next_wakeup()
        timeout = None if wake is None else max(0.0, wake - time.monotonic())
        readable, _, _ = select.select([stdin], [], [], timeout)
        if readable:
            # os.read returns what is there (b"" at EOF), like BufferedReader.read1.
            machine.receive_data(os.read(stdin, 65536), time.monotonic())
        machine.advance(time.monotonic())
