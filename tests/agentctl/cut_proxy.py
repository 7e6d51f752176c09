"""A TCP proxy a test can cut and restore: the link to an agentctl lost and
found again while agentctl (and its agent) run on untouched.

``cut`` closes every connection through it and closes each new one at once
(as a dropped route or a dead tunnel looks to the backend); ``restore`` lets
connections through again.  The port stays the same throughout.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio


@dataclass(eq=False)
class CutProxy:
    target: tuple[str, int]
    port: int = 0
    open: bool = True
    #: Each live pair's scope: cancelled by ``cut``.
    _pairs: set[trio.CancelScope] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self) -> None:
        self.open = False
        for scope in list(self._pairs):
            scope.cancel()

    def restore(self) -> None:
        self.open = True

    async def handle(self, client: trio.SocketStream) -> None:
        async with client:
            if not self.open:
                return
            try:
                upstream = await trio.open_tcp_stream(*self.target)
            except OSError:
                return
            async with upstream, trio.open_nursery() as nursery:
                self._pairs.add(nursery.cancel_scope)
                nursery.start_soon(_pipe, client, upstream, nursery.cancel_scope)
                nursery.start_soon(_pipe, upstream, client, nursery.cancel_scope)
            self._pairs.discard(nursery.cancel_scope)


async def _pipe(src: trio.SocketStream, dst: trio.SocketStream,
                scope: trio.CancelScope) -> None:
    try:
        while data := await src.receive_some(65536):
            await dst.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    scope.cancel()  # one side ended: the pair ends


@asynccontextmanager
async def cut_proxy(target_url: str) -> AsyncIterator[CutProxy]:
    """A proxy on a free loopback port to ``target_url``'s host and port."""
    host_port = target_url.split("://", 1)[1].rstrip("/")
    host, port = host_port.rsplit(":", 1)
    proxy = CutProxy(target=(host, int(port)))
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, proxy.handle, 0, host="127.0.0.1"))
        proxy.port = listeners[0].socket.getsockname()[1]
        yield proxy
        nursery.cancel_scope.cancel()
