"""A hostile agent against the host's network and the backend's life (issue 40, items 6 and 8).

The agent runs in a network namespace of its own: Turnvisor's port and every
other service on the host's loopback are out of reach (but the ports its
profile names in ``host_ports``), so are the host's abstract unix sockets,
and /run is hidden.  It has a route out (pasta), through which real agents
reach their providers.  When the backend dies, SIGKILL included, the agent's
sandbox dies with it, whatever the agent ignores.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from protocols.sandbox import bwrap_works
from supervisor.profiles import BUILTIN_PROFILES, AgentProfile
from tests.security.shell import launch, shell
from tests.security.test_hostile_agent import serve
from tests.support.leaks import processes_running
from tests.support.server import running_server
from tests.support.ws import ws_client

HOSTILE = Path(__file__).with_name("hostile_agent.py")

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot run here")

#: A Python client run inside the sandbox: what it got from each target.
PROBE = r"""
import json, socket, sys
out = {}
for name, family, addr in json.loads(sys.argv[1]):
    s = socket.socket(getattr(socket, family), socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(addr if family == "AF_UNIX" else tuple(addr))
        s.sendall(b"hello")
        out[name] = "ok: " + s.recv(100).decode()
    except OSError as e:
        out[name] = "refused: " + type(e).__name__ + ": " + str(e)
    finally:
        s.close()
print(json.dumps(out))
"""


@contextmanager
def _listener(family: int, address: Any) -> Iterator[list[bytes]]:
    """A server that answers ``pong`` and records what reached it."""
    got: list[bytes] = []
    srv = socket.socket(family, socket.SOCK_STREAM)
    srv.bind(address)
    srv.listen(8)
    srv.settimeout(0.2)
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    got.append(conn.recv(100))
                    conn.sendall(b"pong")
                except OSError:
                    pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        stop.set()
        thread.join(5)
        srv.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_host_loopback_is_out_of_reach_but_the_named_ports(tmp_path: Path) -> None:
    allowed, other = _free_port(), _free_port()
    abstract = f"\0turnvisor-test-{uuid.uuid4().hex}"
    run_sock = Path("/run") / f"turnvisor-test-{uuid.uuid4().hex}.sock"
    command = (sys.executable, str(HOSTILE))
    profiles = {**BUILTIN_PROFILES,
                "hostile": AgentProfile(name="hostile", protocol="acp", command=command,
                                        host_ports=(allowed,)),
                "open": AgentProfile(name="open", protocol="acp", command=command,
                                     network="host")}
    with _listener(socket.AF_INET, ("127.0.0.1", allowed)) as got_allowed, \
            _listener(socket.AF_INET, ("127.0.0.1", other)) as got_other, \
            _listener(socket.AF_UNIX, abstract) as got_abstract, \
            _listener(socket.AF_UNIX, str(run_sock)) as got_run:
        try:
            with trio.fail_after(120):
                async with running_server(tmp_path / "data", profiles=profiles) as srv, \
                        ws_client(srv) as ws:
                    port = int(srv.url.rsplit(":", 1)[1].split("/")[0])
                    targets: list[list[Any]] = [["turnvisor", "AF_INET", ["127.0.0.1", port]],
                               ["allowed", "AF_INET", ["127.0.0.1", allowed]],
                               ["other", "AF_INET", ["127.0.0.1", other]],
                               ["gateway", "AF_INET", ["192.0.2.1", port]],
                               ["abstract", "AF_UNIX", abstract],
                               ["run", "AF_UNIX", str(run_sock)]]
                    probe = f"{sys.executable} -c '{PROBE}' '{json.dumps(targets)}'"
                    sid = await launch(ws, "hostile")
                    seen = await shell(ws, sid, probe)
                    report = json.loads(seen["out"])
                    for name in ("turnvisor", "other", "gateway", "abstract", "run"):
                        assert report[name].startswith("refused"), (name, report)
                    assert report["allowed"] == "ok: pong", report
                    # A route out exists (pasta's), and the runtime dirs are hidden.
                    route = await shell(ws, sid, "cat /proc/net/route; ls -A /run; "
                                               "echo XDG=$XDG_RUNTIME_DIR")
                    assert any(line.split()[1:2] == ["00000000"]
                               for line in route["out"].splitlines()[1:] if line.strip()), route
                    assert run_sock.name not in route["out"] and "XDG=\n" in route["out"], route
                    # Opted in (network = "host"): the host's loopback again.
                    sid_open = await launch(ws, "open")
                    just_other = json.dumps([t for t in targets if t[0] == "other"])
                    opened = json.loads((await shell(
                        ws, sid_open, f"{sys.executable} -c '{PROBE}' '{just_other}'"))["out"])
                    assert opened["other"] == "ok: pong", opened
        finally:
            run_sock.unlink(missing_ok=True)
    assert got_allowed == [b"hello"]
    assert got_other == [b"hello"]  # the "host" agent's, only
    assert got_abstract == [] and got_run == []


def _marked(marker: str) -> set[int]:
    """Host pids whose command line holds ``marker``."""
    return processes_running(marker.encode())


async def test_the_agent_dies_with_the_backend(tmp_path: Path) -> None:
    """An agent whose tools ignore SIGTERM, SIGHUP and stdin's EOF, and leave
    its session and group: a SIGKILL of the backend takes them all within 2 s,
    and nothing holds the backend's port."""
    marker = f"turnvisor-immortal-{uuid.uuid4().hex[:8]}"
    immortal = (f"import signal, time; [signal.signal(s, signal.SIG_IGN) for s in "
                f"(signal.SIGTERM, signal.SIGHUP, signal.SIGINT)]; time.sleep(600)  # {marker}")
    data = tmp_path / "data"
    with trio.fail_after(120):
        async with serve(data, tmp_path / "home", tmp_path / "serve.log") as (proc, srv), \
                ws_client(srv) as ws:
            sid = await launch(ws, "hostile")
            await shell(ws, sid, f"setsid nohup {sys.executable} -c '{immortal}' "
                               ">/dev/null 2>&1 < /dev/null & echo started")
            deadline = time.monotonic() + 10
            while not _marked(marker) and time.monotonic() < deadline:
                await trio.sleep(0.05)
            assert _marked(marker), "the immortal tool did not start"
            port = int(srv.url.rsplit(":", 1)[1].split("/")[0])
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
            killed_at = time.monotonic()
            while _marked(marker) and time.monotonic() - killed_at < 2:
                await trio.sleep(0.02)
            assert not _marked(marker), "the agent's tool outlived the backend by 2 s"
            with socket.socket() as s, pytest.raises(ConnectionRefusedError):
                s.connect(("127.0.0.1", port))


def test_a_shared_network_is_said_at_start() -> None:
    from supervisor.profiles import parse_profiles
    from supervisor.workspace.sandboxing import network_warnings

    profiles = parse_profiles({"open": {"protocol": "acp", "command": ["x"], "network": "host"}})
    lines = network_warnings(profiles)
    assert len(lines) == 1 and "'open'" in lines[0] and "Turnvisor's port" in lines[0], lines
    assert network_warnings(parse_profiles({})) == []


def test_a_network_helper_that_fails_stops_the_launch_saying_why(tmp_path: Path) -> None:
    """The agent never starts without its network (it would run with none, or
    worse); the reason is the launch's error."""
    import subprocess

    from protocols import tools
    from protocols.sandbox import wrap

    saved = list(tools._installed)
    broken = dict(tools.current().paths, pasta="/bin/false")
    tools.install(tools.Tools(broken))
    try:
        with wrap(["sh", "-c", "echo the agent ran"], "bwrap", cwd=str(tmp_path),
                  env={"HOME": str(tmp_path / "home")}, hide=[], network="isolated") as launch:
            done = subprocess.run(launch.argv, pass_fds=launch.pass_fds, capture_output=True,
                                  text=True, timeout=60, check=False)
    finally:
        tools._installed[:] = saved
    assert done.returncode != 0
    assert "the agent ran" not in done.stdout
    assert "the agent's network" in done.stderr and "/bin/false" in done.stderr, done.stderr


def test_without_pasta_the_default_shares_the_network_and_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As without bwrap: an unset ``network`` falls back (loudly); an explicit
    ``isolated`` does not (its launch fails, saying why)."""
    from protocols import netns, tools
    from supervisor.profiles import parse_profiles
    from supervisor.workspace.sandboxing import network_warnings

    saved = list(tools._installed)
    tools.install(tools.Tools(dict(tools.current().paths, pasta=None)))
    try:
        assert netns.resolve_network(None) == "host"
        assert netns.resolve_network("isolated") == "isolated"
        lines = network_warnings(parse_profiles(
            {"strict": {"protocol": "acp", "command": ["x"], "network": "isolated"}}))
    finally:
        tools._installed[:] = saved
    assert netns.resolve_network(None) == "isolated"
    assert any("share this machine's network" in line and "'mock'" not in line
               and "mock" in line for line in lines), lines
    assert any("strict" in line and "cannot start" in line for line in lines), lines
