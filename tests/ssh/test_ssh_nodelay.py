"""The shared connection answers small writes at once: a real ``sshd``
(tests/ssh/sshd.py), a unix socket on the "host" forwarded over a master that
``SshHost.ensure_master`` started and nothing else has used.

That is the connection the ssh executor has after a cut (``reforward``: a new
master, the forwards again, no command) and the one an ``ssh://HOST/socket``
engine has.  sshd turns Nagle's algorithm off on a connection only when a
session on it executes a command; with it on, the second of two small writes
back (agentctl's ``CancelWritten``, then the turn's end) waits for the first
one's delayed ACK, at least 40 ms on Linux (TCP_ATO_MIN), every time.
"""

from __future__ import annotations

import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from supervisor.executors.ssh_host import SshHost, control_dir
from supervisor.ssh_target import SshTarget
from tests.ssh.sshd import Sshd

#: Between the two answers of an exchange (the agent's answer time, about).
GAP_S = 0.005
#: Under the delayed ACK's 40 ms, well over the gap and a loaded machine's median.
BOUND_MS = 32.0


@pytest.fixture
def two_answers(tmp_path: Path) -> Iterator[Path]:
    """A unix socket whose server answers each line twice, ``GAP_S`` apart."""
    path = tmp_path / "answers.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(4)

    def answer() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            with conn, conn.makefile("rb") as lines:
                for _line in lines:
                    conn.sendall(b"a" * 180 + b"\n")
                    time.sleep(GAP_S)
                    conn.sendall(b"b" * 180 + b"\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        server.shutdown(socket.SHUT_RDWR)
        server.close()
        thread.join(10)


async def exchange(stream: trio.SocketStream) -> float:
    """A line out; ms until both answers are in."""
    start = time.perf_counter()
    await stream.send_all(b"q" * 160 + b"\n")
    got = b""
    while got.count(b"\n") < 2:
        chunk = await stream.receive_some(65536)
        assert chunk, "the forwarded socket closed"
        got += chunk
    return (time.perf_counter() - start) * 1000


async def test_a_fresh_shared_connection_does_not_hold_the_second_small_write(
        tmp_path: Path, sshd: Sshd, two_answers: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    host = SshHost(SshTarget(destination=sshd.destination, port=sshd.port,
                             identity=str(sshd.identity), known_hosts=str(sshd.known_hosts)),
                   control_dir(data), connect_s=20)
    local = host.sockets / "answers.sock"
    with trio.fail_after(90):
        await host.ensure_master()
        assert await host.master_running()  # it persists after its start
        await host.forward(local, str(two_answers))
        stream = await trio.open_unix_socket(str(local))
        try:
            await exchange(stream)  # the forward's first connection made
            took = [await exchange(stream) for _ in range(9)]
        finally:
            await stream.aclose()
            await host.cancel_forward(local, str(two_answers))
            await trio.run_process(["ssh", *host.options(), "-O", "exit",
                                    sshd.destination], capture_stdout=True,
                                   capture_stderr=True, check=False)
    # Each exchange is the gap plus two trips through ssh; held by Nagle, each
    # would be the delayed ACK's 40 ms or more.
    assert statistics.median(took) < BOUND_MS, took


async def test_a_login_that_refuses_commands_still_gets_its_connection_and_forwards(
        tmp_path: Path, sshd: Sshd, two_answers: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The master's start runs ``true``; a host whose login runs no command (a
    nologin shell, here a ``ForceCommand`` that fails) still forwards, as it
    did for ``ssh -N``: the connection is kept, and the log says what it costs."""
    with (sshd.dir / "sshd_config").open("a") as config:
        config.write("ForceCommand /bin/false\n")
    await trio.to_thread.run_sync(sshd.stop)
    await trio.to_thread.run_sync(sshd.start)
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    host = SshHost(SshTarget(destination=sshd.destination, port=sshd.port,
                             identity=str(sshd.identity), known_hosts=str(sshd.known_hosts)),
                   control_dir(data), connect_s=20)
    local = host.sockets / "answers.sock"
    with trio.fail_after(90):
        await host.ensure_master()
        assert await host.master_running()
        assert "the login refused a command" in caplog.text
        await host.forward(local, str(two_answers))
        stream = await trio.open_unix_socket(str(local))
        try:
            await exchange(stream)  # both answers came through the forward
        finally:
            await stream.aclose()
            await host.cancel_forward(local, str(two_answers))
            await trio.run_process(["ssh", *host.options(), "-O", "exit",
                                    sshd.destination], capture_stdout=True,
                                   capture_stderr=True, check=False)
