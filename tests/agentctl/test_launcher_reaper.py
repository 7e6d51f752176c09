"""The launcher is its agent's subreaper: a tool the agent orphaned is
re-parented to the launcher (not to PID 1, which in a container is agentctl
and reaps nobody) and reaped there, so no zombie is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from web.agentctl import launcher


def _ppid_and_state(pid: int) -> tuple[int, str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0]


def _children(pid: int) -> list[tuple[int, str, str]]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (info := _ppid_and_state(int(entry.name))) is not None \
                and info[0] == pid:
            try:
                raw = (entry / "cmdline").read_bytes()
            except FileNotFoundError:
                continue  # it was reaped between the two reads: no longer a child
            out.append((int(entry.name), info[1], raw.replace(b"\0", b" ").decode().strip()))
    return out


def test_an_orphan_of_the_agent_is_reparented_to_the_launcher_and_reaped() -> None:
    lifeline_r, lifeline_w = os.pipe()
    # The agent: a shell whose subshell leaves "sleep 0.4" behind (an orphan), then lives on.
    agent = ["sh", "-c", "(sleep 0.4 &); sleep 30"]
    proc = subprocess.Popen([sys.executable, launcher.__file__, "--lifeline", str(lifeline_r),
                             "--", *agent], pass_fds=(lifeline_r,), start_new_session=True)
    os.close(lifeline_r)
    try:
        deadline = time.monotonic() + 10
        while not any(cmd == "sleep 0.4" for _, _, cmd in _children(proc.pid)):
            assert time.monotonic() < deadline, _children(proc.pid)
            time.sleep(0.02)
        # Once it has exited, it is reaped: no zombie child of the launcher.
        deadline = time.monotonic() + 10
        while any(cmd == "sleep 0.4" or state == "Z" for _, state, cmd in
                  _children(proc.pid)):
            assert time.monotonic() < deadline, _children(proc.pid)
            time.sleep(0.05)
        assert proc.poll() is None  # the agent still runs; the launcher waits for it
    finally:
        os.close(lifeline_w)  # agentctl "gone": the launcher kills the group
        proc.wait(timeout=10)
