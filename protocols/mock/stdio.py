"""The mock agent's transport as a program: stdin and stdout, one thread, the real clock.

It waits for stdin with ``select`` until the machine's next timer, feeds what came, lets
the machine's due scripts run, and carries out the effects.  Writes block (a client that
does not read slows the agent down, as it would a real one); input is read between them.
"""

from __future__ import annotations

import os
import select
import sys
import time

from .base import CloseOut, Err, Exit, Out
from .machine import MockMachine

__all__ = ["serve"]


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
