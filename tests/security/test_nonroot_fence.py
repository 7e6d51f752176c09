"""The fence under a backend that is not root (issue 40, item 12's variant).

The suite runs as root here; this test runs the sandbox's launch as uid 65534
(``setpriv``), with the system's Python (the project's virtualenv lives under
root's home, which nobody else may enter; protocols/ imports only the standard
library for this).  The same attacks: the data dir hidden, a link planted on the
way to a writable path refused, the host's loopback out of reach but a named
port, and the sandbox gone when the backend's lifeline closes.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocols.sandbox import bwrap_works

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"
NOBODY = 65534

pytestmark = [
    pytest.mark.skipif(os.getuid() != 0, reason="needs root to run as another user"),
    pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot run here"),
    pytest.mark.skipif(shutil.which("setpriv") is None or not os.path.exists(SYSTEM_PYTHON),
                       reason="needs setpriv and the system's python3"),
]

#: Run as nobody: the backend's side of a launch, then what the agent saw.
BACKEND = r"""
import json, os, subprocess, sys
from protocols.sandbox import SandboxError, wrap
data, work, allowed, other = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
probe = '''
import json, socket
out = {}
for name, port in (("allowed", %d), ("other", %d)):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect(("127.0.0.1", port)); s.sendall(b"hi"); out[name] = "ok: " + s.recv(10).decode()
    except OSError as e:
        out[name] = "refused: " + str(e)
    s.close()
try:
    out["token"] = open("%s/token").read()
except OSError as e:
    out["token"] = "refused: " + str(e)
out["uid"] = __import__("os").getuid()
print(json.dumps(out))
''' % (allowed, other, data)
env = {"PATH": "/usr/bin:/bin", "HOME": os.path.join(work, "home")}
result = {}
with wrap([sys.executable, "-c", probe], "bwrap", cwd=work, env=env, hide=[data],
          network="isolated", host_ports=[allowed], untrusted=[work]) as launch:
    done = subprocess.run(launch.argv, pass_fds=launch.pass_fds, capture_output=True,
                          text=True, timeout=60)
result["agent"] = json.loads(done.stdout) if done.returncode == 0 else done.stderr
os.symlink("/etc", os.path.join(work, "planted"))
try:
    wrap(["true"], "bwrap", cwd=work, env={"HOME": os.path.join(work, "planted", "x")},
         hide=[data], untrusted=[work])
    result["planted"] = "bound"
except SandboxError as e:
    result["planted"] = "refused: " + str(e)
print(json.dumps(result))
"""


@pytest.fixture
def nobodys() -> Iterator[Path]:
    """A tree of nobody's, outside /tmp (the sandbox's /tmp is its own) and
    outside Turnvisor's install (read-only to agents)."""
    top = Path("/srv/turnvisor-nonroot-test")
    path = top / uuid.uuid4().hex
    path.mkdir(parents=True)
    os.chmod(top, 0o755)
    os.chown(path, NOBODY, NOBODY)
    try:
        yield path
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def listeners() -> Iterator[tuple[int, int, list[bytes]]]:
    socks = []
    got: list[bytes] = []
    for _ in range(2):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        s.settimeout(0.2)
        socks.append(s)
    stop = threading.Event()

    def serve(s: socket.socket) -> None:
        while not stop.is_set():
            try:
                conn, _ = s.accept()
            except OSError:
                continue
            with conn:
                got.append(conn.recv(10))
                conn.sendall(b"pong")

    threads = [threading.Thread(target=serve, args=(s,), daemon=True) for s in socks]
    for t in threads:
        t.start()
    try:
        yield socks[0].getsockname()[1], socks[1].getsockname()[1], got
    finally:
        stop.set()
        for t in threads:
            t.join(5)
        for s in socks:
            s.close()


def test_a_non_root_backends_fence(nobodys: Path,
                                   listeners: tuple[int, int, list[bytes]]) -> None:
    allowed, other, got = listeners
    data, work = nobodys / "data", nobodys / "work"
    for d in (data, work):
        d.mkdir()
        os.chown(d, NOBODY, NOBODY)
    (data / "token").write_text("the-token-of-nobody\n")
    os.chown(data / "token", NOBODY, NOBODY)
    done = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         SYSTEM_PYTHON, "-c", BACKEND, str(data), str(work), str(allowed), str(other)],
        env={"PATH": "/usr/bin:/bin", "HOME": str(nobodys), "PYTHONPATH": str(REPO)},
        cwd=nobodys, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    agent = result["agent"]
    assert isinstance(agent, dict), agent
    assert agent["allowed"] == "ok: pong", agent
    assert agent["other"].startswith("refused"), agent
    assert agent["token"].startswith("refused"), agent
    assert agent["uid"] == NOBODY, agent  # a non-root backend's agent keeps its uid
    assert result["planted"].startswith("refused") and "symbolic link" in result["planted"]
    assert got == [b"hi"]
    assert sys.executable  # (the suite's own Python is not the one that ran the backend)
