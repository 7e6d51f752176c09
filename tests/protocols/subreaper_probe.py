"""Run as a program by test_process.py: the subreaper path needs a process of
its own (a subreaper stays one for life; pytest's process must not become one).

It becomes a subreaper, starts an agent that puts a grandchild (``sleep``) in
a session of its own and exits, and reports as JSON what happened to the
orphan, to a known agent that still runs, and to a helper in its own group.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import trio

from protocols.process import become_subreaper, reap_orphans, start_agent_process, terminate_group

#: An agent that starts a tool in a new session, says its pid, and exits.
LEAVER = (
    "import subprocess, sys\n"
    "p = subprocess.Popen(['sleep', '30'], start_new_session=True)\n"
    "print(p.pid, flush=True)\n"
)


def ppid_of(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid = text.rsplit(")", 1)[1].split()[:2]
    return None if state in ("Z", "X") else int(ppid)


def exists(pid: int) -> bool:
    """In /proc at all, zombie or not: a reaped process is not."""
    return Path(f"/proc/{pid}").exists()


async def main() -> dict[str, object]:
    report: dict[str, object] = {"me": os.getpid(), "subreaper": become_subreaper()}
    # Children that must survive the sweep: a running agent it knows, and a
    # helper command in the backend's own group.
    keeper = await start_agent_process(["sleep", "30"])
    helper = await trio.lowlevel.open_process(["sleep", "30"])
    leaver = await start_agent_process([sys.executable, "-c", LEAVER])
    assert leaver.stdout is not None
    orphan = int((await leaver.stdout.receive_some()).split()[0])
    with trio.fail_after(10):
        await leaver.wait()
        # Re-parenting happens as the leaver exits; give /proc a moment.
        while ppid_of(orphan) not in (os.getpid(), 1):
            await trio.sleep(0.01)
    report["orphan_ppid"] = ppid_of(orphan)
    await terminate_group(leaver, grace_s=0.2, eof_grace_s=0.0)
    report["orphan_alive_after_teardown_of_exited_agent"] = ppid_of(orphan) is not None
    report["reaped"] = await reap_orphans({keeper.pid})
    report["orphan_gone"] = not exists(orphan)
    report["keeper_alive"] = ppid_of(keeper.pid) == os.getpid()
    report["helper_alive"] = ppid_of(helper.pid) == os.getpid()
    report["orphan"] = orphan
    report["second_sweep"] = await reap_orphans({keeper.pid})
    await terminate_group(keeper, grace_s=0.2, eof_grace_s=0.0)
    helper.kill()
    await helper.wait()
    return report


if __name__ == "__main__":
    print(json.dumps(trio.run(main)))
