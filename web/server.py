"""``turnvisor serve``: the supervisor tree with Hypercorn serving the app inside it.

    serve
    └── open_supervisor                   root nursery (lifecycle, operations)
        └── server nursery
            ├── hypercorn.trio.serve      HTTP + WebSocket (its own nursery tree)
            └── _watch_signals            SIGINT/SIGTERM → graceful stop

Graceful stop: Hypercorn stops accepting and drains for ``graceful_timeout``;
then the supervisor cancels running turns and stops every agent (SIGTERM to
each group, grace, SIGKILL), all under ``shutdown_s``.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import hypercorn.trio
import trio
from hypercorn.config import Config as HyperConfig

from supervisor.config import Config
from supervisor.root import DEFAULT_WORKSPACE, open_supervisor

from .app import create_app
from .auth import Tokens

__all__ = ["serve"]

log = logging.getLogger(__name__)


def hypercorn_config(config: Config, host: str, port: int) -> HyperConfig:
    hc = HyperConfig()
    hc.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    # The access log would print query strings, and a page URL may carry ?token=.
    hc.accesslog = None
    hc.errorlog = logging.getLogger("hypercorn.error")
    hc.graceful_timeout = 2.0
    # Hypercorn closes a connection on a frame above this; below it, the gateway
    # answers an oversized frame with an error and keeps the connection.
    hc.websocket_max_message_size = max(4 * 1024 * 1024, 4 * config.limits.max_ws_frame_bytes)
    return hc


async def serve(
    config: Config,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    token: str,
    on_ready: Callable[[str, Any], None] | None = None,
    stop: trio.Event | None = None,
) -> None:
    """Run until ``stop`` is set (or SIGINT/SIGTERM, when on the main thread)."""
    stop = stop if stop is not None else trio.Event()
    tokens = Tokens({DEFAULT_WORKSPACE: token, **config.workspace_tokens})
    async with open_supervisor(config) as sup, trio.open_nursery() as nursery:
        if threading.current_thread() is threading.main_thread():
            nursery.start_soon(_watch_signals, stop)
        app = create_app(sup, tokens)
        binds: list[str] = await nursery.start(
            partial(hypercorn.trio.serve, app, hypercorn_config(config, host, port),
                    shutdown_trigger=stop.wait)
        )
        url = binds[0].replace("0.0.0.0", "127.0.0.1")
        if on_ready is not None:
            on_ready(url, sup)
        print(f"Turnvisor listening on {url}/?token={token}", flush=True)
        await stop.wait()
        log.info("shutting down")
    log.info("stopped")


async def _watch_signals(stop: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            print(f"Turnvisor: {signal.Signals(signum).name}, shutting down", file=sys.stderr,
                  flush=True)
            stop.set()
            return
