"""The rename race against the data dir's cover (issue 40, item 2).

The sandbox covers the data dir with a tmpfs at its path.  An agent that can
write a directory above it could swap that directory with a decoy in a loop
(``renameat2(RENAME_EXCHANGE)``) while new sandboxes are built, so that a
cover lands on the decoy and the real ``turnvisor.toml`` and token show.  It
exposed 4 of 29 sandboxes before agents got a private home: the person's home,
which holds the data dir, was the agent's ``$HOME`` and writable.  Now no
agent can write above the data dir, so the flipper cannot run at all: it
gets an error at every try, the data dir never moves, and 30 launches made
while it runs show nothing of it.  The control shows the flipper works where
it may write.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from protocols.sandbox import bwrap_works
from supervisor.profiles import BUILTIN_PROFILES, AgentProfile
from tests.security.shell import launch, shell
from tests.support.server import TOKEN, running_server
from tests.support.ws import ws_client

HOSTILE = Path(__file__).with_name("hostile_agent.py")
LAUNCHES = 30
CLIENTS = 3

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot run here")

#: Swaps two names until the file ``stop`` appears (at most ``seconds``); writes
#: "swaps failures last-error" to ``report``.
FLIPPER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b, seconds, report = sys.argv[1].encode(), sys.argv[2].encode(), float(sys.argv[3]), sys.argv[4]
stop = sys.argv[5]
ok = failed = 0
last = ""
end = time.monotonic() + seconds
while time.monotonic() < end and ((ok + failed) % 1000 or not os.path.exists(stop)):
    if libc.renameat2(-100, a, -100, b, 2) == 0:
        ok += 1
    else:
        failed += 1
        last = os.strerror(ctypes.get_errno())
open(report, "w").write(f"{ok} {failed} {last}")
"""


async def test_the_flipper_cannot_run_and_30_launches_show_nothing(
        outside_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = outside_tmp / "home"
    # As by default: the data dir under the home of the person who runs Turnvisor.
    monkeypatch.setenv("HOME", str(home))
    data = home / ".local" / "share" / "turnvisor"
    data.mkdir(parents=True)
    (data / "token").write_text(TOKEN + "\n")
    (data / "turnvisor.toml").write_text("# the real config\n")
    decoy = home / "decoy"
    (decoy / "share" / "turnvisor").mkdir(parents=True)
    identity = data.stat().st_ino
    hostile = AgentProfile(name="hostile", protocol="acp", command=(sys.executable, str(HOSTILE)))
    # The flipper runs while the launches go on, however long they take on a
    # loaded machine, and stops when they are done (a fixed 20 s run outlasted
    # quick launches for nothing, and ended before slow ones did).
    seconds = 150
    with trio.fail_after(240):
        async with running_server(data, profiles={**BUILTIN_PROFILES, "hostile": hostile}) \
                as srv, ws_client(srv) as ws:
            sid = await launch(ws, title="race")
            flip = (f"{sys.executable} -c '{FLIPPER}' {home}/.local {decoy} {seconds} "
                    "flip.txt flip.stop")
            # The control first: where it may write (its own cwd), the flipper swaps.
            await shell(ws, sid, "mkdir -p x y")
            control = f"{sys.executable} -c '{FLIPPER}' x y 0.2 control.txt control.stop"
            await shell(ws, sid, control)
            (work,) = (data / "work").glob(f"*/{sid}")
            swaps = int((work / "control.txt").read_text().split()[0])
            assert swaps > 0, (work / "control.txt").read_text()
            # The attack, in the background while the launches go on.
            await shell(ws, sid, f"(setsid {flip} >/dev/null 2>&1 </dev/null &) ; echo started")
            # Several clients at once: sandboxes built side by side under the flips
            # are the same attack, the launches just end sooner.
            async def launches(n: int) -> None:
                async with ws_client(srv) as mine:
                    for _ in range(n):
                        other = await launch(mine, title="race")
                        seen = await shell(mine, other,
                                           f"cat {data}/token {data}/turnvisor.toml "
                                           f"{decoy}/share/turnvisor/token; ls -a {data}")
                        assert TOKEN not in seen["out"] and "real config" not in seen["out"], seen
                        assert data.stat().st_ino == identity
            async with trio.open_nursery() as clients:
                for _ in range(CLIENTS):
                    clients.start_soon(launches, LAUNCHES // CLIENTS)
            # What the flipper got meanwhile: an error at every try, never a swap.
            report = work / "flip.txt"
            assert not report.exists(), "the flipper stopped before the launches ended"
            (work / "flip.stop").write_text("")
            with trio.move_on_after(30):
                while not report.exists():
                    await trio.sleep(0.5)
    ok, failed = report.read_text().split()[:2]
    assert ok == "0" and int(failed) > 0, report.read_text()
    assert (data / "token").read_text() == TOKEN + "\n" and data.stat().st_ino == identity
