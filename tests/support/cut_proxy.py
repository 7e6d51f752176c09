"""A loopback TCP proxy a test can cut and restore: the link to an agentctl
lost and found again while agentctl (and its agent) run on untouched.

``cut`` drops every connection through it and closes each new one at once (as
a dropped route or a dead tunnel looks to the backend); ``restore`` lets
connections through again.  The port stays the same throughout.

Threads and blocking sockets, so that sync tests (the browser's) and Trio
tests use the same one: ``cut``/``restore`` return at once, and the proxy runs
whatever the caller's event loop does.  Used as a context manager, plain or
``async with``; leaving it closes the listener and joins its threads.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from types import TracebackType

__all__ = ["CutProxy", "cut_proxy"]

#: How long ``close`` waits for each of its threads (they end once their sockets close).
_JOIN_S = 10.0


class CutProxy:
    """Proxy from ``127.0.0.1:port`` to ``target`` (module doc)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.open = True
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self._closed = False
        self._live: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _spawn(self, target: Callable[..., None], *args: socket.socket) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                # Closed by ``close``: done (the loop's test).  Anything else (a
                # connection the backend gave up on before it was taken) must not
                # end the proxy, or every later connection would hang unanswered.
                continue
            if not self.open:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                # A cut between the accept and here must drop this pair too.
                admitted = self.open
                if admitted:
                    self._live |= {client, upstream}
            if not admitted:
                client.close()
                upstream.close()
                continue
            self._spawn(self._pipe, client, upstream)
            self._spawn(self._pipe, upstream, client)

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            self._drop(s)

    def _drop(self, s: socket.socket) -> None:
        with self._lock:
            self._live.discard(s)
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()

    def cut(self) -> None:
        with self._lock:
            self.open = False
            live = list(self._live)
        for s in live:
            self._drop(s)

    def restore(self) -> None:
        self.open = True

    def close(self) -> None:
        self._closed = True
        self.cut()
        try:
            # Wakes the accept thread (a bare close would leave it blocked in accept).
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(_JOIN_S)

    def __enter__(self) -> CutProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> CutProxy:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.close()


def cut_proxy(target_url: str) -> CutProxy:
    """A proxy on a free loopback port to ``target_url``'s host and port
    (``http://HOST:PORT``)."""
    host_port = target_url.split("://", 1)[1].rstrip("/")
    host, port = host_port.rsplit(":", 1)
    return CutProxy((host, int(port)))
