"""The fan-out floor: one frame to N loopback TCP connections with no framework at all.

What a fan-out costs on this machine before any WebSocket server exists: N
``send`` calls of one pre-framed frame (one per connection: each subscriber
has its own socket), and N reads on the receiving ends (through epoll).  Plain
Python sockets and ``selectors``, in a process of its own::

    python -m bench.fanout_floor --subscribers N [--reps R] [--frame-bytes B]

prints ``{"subscribers": N, "send_ms": [...], "receive_ms": [...]}``: per
repetition, the time to send the frame to every connection, then the time to
read it from every one.  ``send`` is the server's floor for a fan-out (one
syscall per subscriber), ``send + receive`` the floor of the bench's
measurement, which has both sides on the same two cores.
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import statistics
import sys
import time
from pathlib import Path

import trio

REPO_ROOT = Path(__file__).resolve().parent.parent

__all__ = ["fanout_floor", "measure"]


def _pairs(n: int) -> tuple[list[socket.socket], list[socket.socket]]:
    listener = socket.create_server(("127.0.0.1", 0), backlog=n)
    port = listener.getsockname()[1]
    servers: list[socket.socket] = []
    clients: list[socket.socket] = []
    for _ in range(n):
        c = socket.create_connection(("127.0.0.1", port))
        s, _ = listener.accept()
        for sock in (c, s):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.setblocking(False)
        clients.append(c)
        servers.append(s)
    listener.close()
    return servers, clients


def measure(n: int, reps: int, frame_bytes: int) -> dict[str, object]:
    frame = b"\x81\x7e" + frame_bytes.to_bytes(2, "big") + b"x" * frame_bytes
    servers, clients = _pairs(n)
    sel = selectors.DefaultSelector()
    for c in clients:
        sel.register(c, selectors.EVENT_READ)
    send_ms: list[float] = []
    receive_ms: list[float] = []
    try:
        for _ in range(reps):
            time.sleep(0.05)
            t0 = time.perf_counter()
            for s in servers:
                s.send(frame)
            t1 = time.perf_counter()
            left = len(frame) * n
            while left:
                for key, _ in sel.select(timeout=5):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    left -= len(sock.recv(65536))
            t2 = time.perf_counter()
            send_ms.append(round((t1 - t0) * 1000, 3))
            receive_ms.append(round((t2 - t1) * 1000, 3))
    finally:
        sel.close()
        for sock in (*servers, *clients):
            sock.close()
    return {"subscribers": n, "frame_bytes": len(frame), "send_ms": send_ms,
            "receive_ms": receive_ms}


async def fanout_floor(n: int, reps: int) -> dict[str, float]:
    """The floor for ``n`` subscribers, measured in a process of its own:
    medians of the send and receive times (ms)."""
    proc = await trio.run_process(
        [sys.executable, "-m", "bench.fanout_floor", "--subscribers", str(n), "--reps",
         str(reps)], capture_stdout=True, cwd=REPO_ROOT)
    result = json.loads(proc.stdout)
    return {"floor_send_ms": statistics.median(result["send_ms"]),
            "floor_receive_ms": statistics.median(result["receive_ms"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--subscribers", type=int, required=True)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--frame-bytes", type=int, default=250)
    args = parser.parse_args()
    print(json.dumps(measure(args.subscribers, args.reps, args.frame_bytes)))


if __name__ == "__main__":
    main()
