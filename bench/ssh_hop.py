"""The SSH connection's own share of a round trip (issue 44, "Measure").

    python -m bench.ssh_hop [--rounds N] [--gap-ms G] [--json PATH]

A small echo server (this module with ``--serve``: a process of its own, as
agentctl is) listens on a unix socket "on the host" (this machine), and the
bench reaches it twice: **direct** (its socket) and **ssh** (a local socket
forwarded to it over a shared connection that ``SshHost`` starts, the
product's own OpenSSH options, through a real ``sshd`` on a loopback port:
tests/ssh/sshd.py).  Two kinds of exchange, alternated direct / ssh round by
round so both meet the same machine:

- ``one``: a 160-byte line out, one 181-byte line back (a frame each way);
- ``two``: a line out, one line back at once and a second ``--gap-ms`` later
  (agentctl's ``CancelWritten`` and then the turn's end): until the second.

``ssh - direct`` (p50) is what the SSH transport adds per exchange: two more
processes (the ``ssh`` master and sshd's connection process) and the
encryption, each way.  A connection where the second small write waits for
the first one's delayed ACK (Nagle's algorithm on) shows ~40 ms in ``two``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import trio

from supervisor.executors.ssh_host import SshHost
from supervisor.ssh_target import SshTarget
from tests.ssh.sshd import Sshd, running_sshd

from .measure import log, ms
from .stats import summary

__all__ = ["echo_server", "main", "measure_hop"]

_OUT = b"x" * 160
_BACK = b"y" * 180 + b"\n"


def serve(path: str, gap_s: float) -> None:
    """The echo server (module doc); says ``ready`` once it listens."""
    with socket.socket(socket.AF_UNIX) as srv:
        srv.bind(path)
        srv.listen(16)
        print("ready", flush=True)

        def answer(conn: socket.socket) -> None:
            with conn, conn.makefile("rb") as lines:
                for line in lines:
                    conn.sendall(_BACK)
                    if line.startswith(b"two"):
                        time.sleep(gap_s)
                        conn.sendall(_BACK)

        while True:
            conn, _ = srv.accept()
            threading.Thread(target=answer, args=(conn,), daemon=True).start()


class _Lines:
    """A client connection: send a line, time the answer's lines."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = b""

    async def exchange(self, kind: str) -> float:
        start = time.perf_counter()
        await self.stream.send_all(kind.encode() + b" " + _OUT + b"\n")
        want = 2 if kind == "two" else 1
        while self.buf.count(b"\n") < want:
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                raise OSError("the echo server closed the connection")
            self.buf += chunk
        took = time.perf_counter() - start
        self.buf = self.buf.split(b"\n", want)[want]
        return ms(took)


@contextmanager
def echo_server(tmp: Path, gap_ms: float) -> Iterator[Path]:
    """The echo server (``serve``) running in a process of its own: its socket,
    and a 0700 directory beside it for the forwards' sockets (``sockets``)."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "s").mkdir(mode=0o700)
    remote = tmp / "echo.sock"
    echo = subprocess.Popen([sys.executable, "-m", "bench.ssh_hop", "--serve", str(remote),
                             "--gap-ms", str(gap_ms)], stdout=subprocess.PIPE)
    try:
        assert echo.stdout is not None
        if echo.stdout.readline().strip() != b"ready":
            raise OSError("the echo server did not start")
        yield remote
    finally:
        echo.kill()
        echo.wait()


async def measure_hop(sshd: Sshd, remote: Path, rounds: int) -> dict[str, Any]:
    """The figures of the module doc over ``sshd``, ``rounds`` of each kind, to
    the ``echo_server`` at ``remote`` (forwards' sockets beside it, in ``s``)."""
    sockets = remote.parent / "s"
    host = SshHost(SshTarget(destination=sshd.destination, port=sshd.port,
                             identity=str(sshd.identity), known_hosts=str(sshd.known_hosts)),
                   sockets, connect_s=30)
    local = sockets / "hop.sock"
    try:
        with trio.fail_after(60):
            await host.ensure_master()
            await host.forward(local, str(remote))
            direct = _Lines(await trio.open_unix_socket(str(remote)))
            over_ssh = _Lines(await trio.open_unix_socket(str(local)))
        got: dict[str, list[float]] = {}
        for kind in ("one", "two"):
            for i in range(rounds + 3):
                pair = [("direct", direct), ("ssh", over_ssh)]
                for where, conn in pair if i % 2 else pair[::-1]:
                    with trio.fail_after(30):
                        took = await conn.exchange(kind)
                    if i >= 3:  # the first ones warm the path up
                        got.setdefault(f"{kind}_{where}", []).append(took)
                    await trio.sleep(0.002)
        for conn in (direct, over_ssh):
            await conn.stream.aclose()
    finally:
        with trio.move_on_after(30):
            await host.cancel_forward(local, str(remote))
            # The master stopped (it would persist ``PERSIST_S`` after its last use).
            await trio.run_process(["ssh", *host.options(), "-O", "exit", sshd.destination],
                                   capture_stdout=True, capture_stderr=True, check=False)
    out: dict[str, Any] = {"rounds": rounds,
                           **{key: summary(values) for key, values in got.items()}}
    for kind in ("one", "two"):
        out[f"{kind}_ssh_minus_direct_p50_ms"] = round(
            out[f"{kind}_ssh"]["p50"] - out[f"{kind}_direct"]["p50"], 3)
    return out


def report(out: dict[str, Any]) -> str:
    lines = [f"ssh hop ({out['rounds']} exchanges each, second answer {out['gap_ms']} ms "
             "later in 'two'): p50/p90/p99 ms"]
    for kind in ("one", "two"):
        d, s = out[f"{kind}_direct"], out[f"{kind}_ssh"]
        lines.append(f"  {kind}: direct {d['p50']:.3f}/{d['p90']:.3f}/{d['p99']:.3f}   "
                     f"ssh {s['p50']:.3f}/{s['p90']:.3f}/{s['p99']:.3f}   ssh - direct "
                     f"{out[f'{kind}_ssh_minus_direct_p50_ms']:+.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ssh_hop",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300, help="exchanges of each kind")
    parser.add_argument("--gap-ms", type=float, default=1.0,
                        help="between the two answers of a 'two' exchange")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--serve", metavar="SOCKET", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.gap_ms / 1000)
        return 0
    if args.rounds < 1 or args.gap_ms < 0:
        parser.error("--rounds must be at least 1 and --gap-ms not negative")
    with tempfile.TemporaryDirectory(prefix="tv-hop-") as tmp, \
            running_sshd(Path(tmp) / "sshd") as sshd, \
            echo_server(Path(tmp) / "hop", args.gap_ms) as remote:
        out = trio.run(measure_hop, sshd, remote, args.rounds)
    out["gap_ms"] = args.gap_ms
    out["load_average"] = os.getloadavg()
    print(report(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
