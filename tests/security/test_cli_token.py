"""The command-line client sends a token only to the server it belongs to (issue 40, item 9).

The attack: an agent that can write the person's data dir (a home it could
write held the default one) plants ``server.json`` naming a URL of its own;
the person's ``turnvisor tasks`` then sent ``TURNVISOR_TOKEN`` there.  Here a
real ``turnvisor serve`` runs on its data dir, the person's environment holds
its token, and a trap (a TCP listener in this process, on another port)
records every connection it gets.  Each variant of a planted record is
refused with one line, and the trap never gets a connection, let alone the
token; the genuine record still works.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.serverproc import BlockingServerProcess, start_blocking_server

SECRET = "cli-token-test-secret-0123456789abcdefgh"
NOBODY = 65534


class Trap:
    """A listener on 127.0.0.1 that records what every connection sends."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port: int = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="token-trap", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                data = b""
                try:
                    while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                        data += chunk
                except TimeoutError:
                    pass
                self.received.append(data)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BlockingServerProcess]:
    proc = start_blocking_server(tmp_path_factory.mktemp("served"), token=SECRET)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def trap() -> Iterator[Trap]:
    t = Trap()
    try:
        yield t
    finally:
        t.close()


@pytest.fixture
def record(server: BlockingServerProcess) -> Iterator[dict[str, Any]]:
    """The server's genuine record; put back (bytes and mode) after the test."""
    path = server.data_dir / "server.json"
    genuine = path.read_bytes()
    try:
        yield json.loads(genuine)
    finally:
        if path.is_symlink() or path.exists():
            path.unlink()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(genuine)
        os.chmod(server.data_dir, 0o700)


def plant(path: Path, data: dict[str, Any], mode: int = 0o600) -> None:
    """What the agent writes: a record in place of the server's (renamed over it)."""
    partial = path.with_name(".planted")
    partial.write_text(json.dumps(data))
    os.chmod(partial, mode)
    os.replace(partial, path)


def client(data_dir: Path, *args: str, token: str = SECRET
           ) -> subprocess.CompletedProcess[str]:
    """The person's ``turnvisor tasks``: their token in the environment, no URL."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TURNVISOR_URL", "TURNVISOR_DATA_DIR")}
    env["TURNVISOR_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "web", "tasks", "--data-dir", str(data_dir),
                           *args], capture_output=True, text=True, env=env, timeout=60,
                          check=False)


def refused(done: subprocess.CompletedProcess[str], why: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("turnvisor: ") and why in lines[0], lines
    assert "no request sent" in lines[0]
    assert done.stdout == ""


def nothing_reached(trap: Trap) -> None:
    assert not any(SECRET.encode() in got for got in trap.received)
    assert trap.received == [], "the client connected to the planted URL"


def test_the_genuine_record_is_used(server: BlockingServerProcess,
                                    record: dict[str, Any]) -> None:
    done = client(server.data_dir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("TASK")
    # The record's own token goes to the record's own URL, never the environment's:
    # a wrong TURNVISOR_TOKEN changes nothing (had it been sent, the server would answer 401).
    other = client(server.data_dir, token="not-the-token-" + "x" * 32)
    assert other.returncode == 0, other.stderr


def test_a_foreign_url_beside_the_live_servers_pid_is_refused(
        server: BlockingServerProcess, record: dict[str, Any], trap: Trap) -> None:
    # Everything true of the real server (its pid, its data dir, its lock) but the URL.
    plant(server.data_dir / "server.json", {**record, "url": trap.url, "token": "planted"})
    refused(client(server.data_dir), f"port {trap.port} is held by another process")
    nothing_reached(trap)


def test_a_url_nobody_listens_on_is_refused(server: BlockingServerProcess,
                                            record: dict[str, Any], trap: Trap) -> None:
    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    plant(server.data_dir / "server.json", {**record, "url": f"http://127.0.0.1:{port}"})
    refused(client(server.data_dir), f"does not listen on 127.0.0.1 port {port}")


def test_a_live_pid_holding_the_port_that_is_not_turnvisor_is_refused(
        server: BlockingServerProcess, record: dict[str, Any], trap: Trap) -> None:
    # This test process holds the trap's port: alive, ours, listening, not a turnvisor serve.
    plant(server.data_dir / "server.json", {**record, "url": trap.url, "pid": os.getpid()})
    refused(client(server.data_dir), f"pid {os.getpid()} is not a turnvisor serve")
    nothing_reached(trap)


def test_a_dead_pid_is_refused(server: BlockingServerProcess, record: dict[str, Any],
                               trap: Trap) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    plant(server.data_dir / "server.json", {**record, "url": trap.url, "pid": gone.pid})
    refused(client(server.data_dir), f"pid {gone.pid} is not running")
    nothing_reached(trap)


def test_a_record_of_another_mode_is_refused(server: BlockingServerProcess,
                                             record: dict[str, Any]) -> None:
    # The genuine content: only the mode is wrong (without the check, this would succeed).
    plant(server.data_dir / "server.json", record, mode=0o644)
    refused(client(server.data_dir), "its mode is 0644, not 0600")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_record_of_another_owner_is_refused(server: BlockingServerProcess,
                                              record: dict[str, Any]) -> None:
    path = server.data_dir / "server.json"
    plant(path, record)
    os.chown(path, NOBODY, NOBODY)
    refused(client(server.data_dir), f"owned by uid {NOBODY}")


def test_a_symlinked_record_is_refused(server: BlockingServerProcess, record: dict[str, Any],
                                       tmp_path: Path) -> None:
    elsewhere = tmp_path / "record.json"
    plant(elsewhere, record)
    (server.data_dir / "server.json").unlink()
    (server.data_dir / "server.json").symlink_to(elsewhere)
    refused(client(server.data_dir), "it is a symbolic link")


def test_a_fifo_in_its_place_is_refused(server: BlockingServerProcess,
                                        record: dict[str, Any]) -> None:
    path = server.data_dir / "server.json"
    path.unlink()
    os.mkfifo(path, 0o600)
    refused(client(server.data_dir), "it is not a regular file")


def test_a_data_dir_others_can_write_is_refused(server: BlockingServerProcess,
                                                record: dict[str, Any]) -> None:
    os.chmod(server.data_dir, 0o770)
    refused(client(server.data_dir), "its data dir is writable by others")


def test_a_record_in_another_data_dir_is_refused(server: BlockingServerProcess,
                                                 record: dict[str, Any],
                                                 tmp_path: Path) -> None:
    # A copy of the genuine record in a dir the agent made (and the person named).
    decoy = tmp_path / "decoy"
    decoy.mkdir(mode=0o700)
    plant(decoy / "server.json", record)
    refused(client(decoy), f"it names another data dir ({server.data_dir})")
    # ... naming that dir: the live server does not hold its lock.
    (decoy / "serve.lock").write_text(f"{record['pid']}\n")
    plant(decoy / "server.json", {**record, "data_dir": str(decoy)})
    refused(client(decoy), f"pid {record['pid']} does not hold this data dir's lock")


def test_a_record_without_its_data_dir_is_refused(server: BlockingServerProcess,
                                                  record: dict[str, Any]) -> None:
    plant(server.data_dir / "server.json", {k: v for k, v in record.items() if k != "data_dir"})
    refused(client(server.data_dir), "it names no data dir")


def test_a_token_flag_without_a_url_is_refused(server: BlockingServerProcess,
                                               record: dict[str, Any]) -> None:
    done = client(server.data_dir, "--token", SECRET)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "turnvisor: --token goes only to a server you name: add --url or set TURNVISOR_URL"]


def test_no_record_no_url_sends_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    (empty / "token").write_text(SECRET + "\n")
    done = client(empty)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no running server found" in lines[0], lines

