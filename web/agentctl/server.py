"""``turnvisor agentctl``: Hypercorn serving one agent's control API.

    serve_agentctl                 root nursery
    ├── AgentHost.run              the agent (host.py has its own tree)
    ├── http nursery
    │   └── serve_listener         Hypercorn's HTTP + WebSocket, held to the
    │                              idle timeout and per-peer cap (web/listener.py)
    └── _watch_signals             SIGINT/SIGTERM → graceful stop

Graceful stop: Hypercorn stops accepting and drains for ``graceful_timeout``
(event streams are closed with 1001 first); then the host nursery is cancelled
and the agent's group is torn down (stdin EOF, SIGTERM, grace, SIGKILL).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from functools import partial

import trio
from hypercorn.config import Config as HyperConfig

from ..credentials import head_carries
from ..listener import ConnLimits, serve_listener
from .app import HEARTBEAT_S, create_app
from .host import AgentctlConfig, AgentHost

__all__ = ["parse_listen", "serve_agentctl"]

log = logging.getLogger(__name__)


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[v6]:PORT`` or ``:PORT`` (loopback) → (host, port);
    ``unix:PATH`` → (``unix:PATH``, 0): a unix socket, its path absolute."""
    if value.startswith("unix:"):
        if not value[5:].startswith("/"):
            raise ValueError(f"--listen unix:PATH wants an absolute path, not {value!r}")
        return value, 0
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--listen wants HOST:PORT, not {value!r}")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def _hypercorn_config(host: str, port: int) -> HyperConfig:
    hc = HyperConfig()
    if host.startswith("unix:"):
        hc.bind = [host]
        # Only its owner may connect (the directory around it should say so too).
        hc.umask = 0o177
    else:
        hc.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    hc.accesslog = None
    hc.errorlog = logging.getLogger("hypercorn.error")
    hc.graceful_timeout = 1.0
    hc.websocket_max_message_size = 1024 * 1024
    return hc


async def serve_agentctl(
    config: AgentctlConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str,
    stop: trio.Event | None = None,
    on_ready: Callable[[str, AgentHost], None] | None = None,
    ready_fd: int | None = None,
    heartbeat_s: float = HEARTBEAT_S,
    limits: ConnLimits | None = None,
) -> None:
    """Run until ``stop`` is set (or SIGINT/SIGTERM, on the main thread).

    Once bound, prints ``agentctl listening on <url>`` and, with ``ready_fd``,
    writes the URL and a newline to that descriptor and closes it (how a parent
    that spawned agentctl with ``--listen 127.0.0.1:0`` learns the port).
    ``limits``: the idle timeout and the bound on unauthenticated connections
    (default ``ConnLimits()``).
    """
    stop = stop if stop is not None else trio.Event()
    agent_host = AgentHost(config)
    async with trio.open_nursery() as nursery:
        if threading.current_thread() is threading.main_thread():
            nursery.start_soon(_watch_signals, stop)
        await nursery.start(agent_host.run)
        app = create_app(agent_host, token, heartbeat_s=heartbeat_s)

        async def stopping() -> None:
            await stop.wait()
            # Close the event streams first, so Hypercorn's drain is not spent on them.
            agent_host.log.close("agentctl is shutting down")

        async with trio.open_nursery() as http:
            binds: list[str] = await http.start(partial(
                serve_listener, app, _hypercorn_config(host, port), limits or ConnLimits(),
                # The backend's requests carry the token: never closed for a
                # connection bound, whatever the agent on this host opens.
                authenticates=head_carries(token), shutdown_trigger=stopping))
            url = binds[0]
            print(f"agentctl listening on {url}", flush=True)
            if ready_fd is not None:
                with os.fdopen(ready_fd, "w") as ready:
                    ready.write(url + "\n")
            if on_ready is not None:
                on_ready(url, agent_host)
            await stop.wait()
            log.info("agentctl shutting down")
        nursery.cancel_scope.cancel()


async def _watch_signals(stop: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            print(f"agentctl: {signal.Signals(signum).name}, shutting down", file=sys.stderr,
                  flush=True)
            stop.set()
            return
