"""``turnvisor serve``: the supervisor tree with Hypercorn serving the app inside it.

    serve
    └── open_supervisor                   root nursery (lifecycle, operations)
        └── server nursery
            ├── front.serve_http          /ws (web.wsconn, every upgrade) + Hypercorn for the rest
            └── _watch_signals            SIGINT/SIGTERM → graceful stop

Where to find it: ``DATA_DIR/server.json`` (0600: url, token, pid, data dir) is written
at every start, for a person and a command-line client on this machine; the
token URL itself is printed only when stdout is a terminal (a log file or a
pipe that others may read gets the file's path instead).

Graceful stop: Hypercorn stops accepting and drains for ``graceful_timeout``;
then the supervisor cancels running turns and stops every agent (SIGTERM to
each group, grace, SIGKILL), all under ``shutdown_s``.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import trio

from supervisor.config import Config
from supervisor.root import DEFAULT_WORKSPACE, open_supervisor

from .app import create_app
from .auth import Tokens
from .front import conn_limits, serve_http
from .hyper import Config as HyperConfig
from .hyper import Sockets

__all__ = ["serve"]

log = logging.getLogger(__name__)


#: A connection whose peer takes no data (zero TCP window) or acknowledges
#: nothing for this long is aborted by the kernel (TCP_USER_TIMEOUT, set on the
#: listening socket and inherited by every accepted one).  Hypercorn writes to
#: the socket inside a *shielded* cancel scope, so no Trio timeout can free a
#: response stuck on a client that stopped reading (``/ws`` is not Hypercorn's:
#: the gateway's send deadline bounds it): without this, such a client would
#: hold its connection (and graceful shutdown) forever.  Long
#: enough for a flaky network's retransmissions; a dropped client reconnects
#: and resyncs from the subscribe snapshot.
STALLED_PEER_TIMEOUT_S = 10.0


class _HyperConfig(HyperConfig):
    def create_sockets(self) -> Sockets:
        sockets = super().create_sockets()
        timeout_ms = int(STALLED_PEER_TIMEOUT_S * 1000)
        user_timeout = getattr(socket, "TCP_USER_TIMEOUT", None)
        for sock in sockets.insecure_sockets:
            if user_timeout is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, user_timeout, timeout_ms)
        return sockets


def hypercorn_config(config: Config, host: str, port: int) -> HyperConfig:
    hc = _HyperConfig()
    hc.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    # The access log would print query strings, and a page URL may carry ?token=.
    hc.accesslog = None
    hc.errorlog = logging.getLogger("hypercorn.error")
    hc.graceful_timeout = 2.0
    return hc


async def serve(
    config: Config,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    token: str,
    on_ready: Callable[[str, Any], None] | None = None,
    stop: trio.Event | None = None,
    tune_gc: bool = False,
) -> None:
    """Run until ``stop`` is set (or SIGINT/SIGTERM, when on the main thread)."""
    stop = stop if stop is not None else trio.Event()
    tokens = Tokens({DEFAULT_WORKSPACE: token, **config.workspace_tokens})
    async with open_supervisor(config) as sup, trio.open_nursery() as nursery:
        if threading.current_thread() is threading.main_thread():
            nursery.start_soon(_watch_signals, stop)
        app = create_app(sup, tokens, bound_host=host)
        # Hypercorn in a nursery of its own: once it has drained, the signal
        # watcher (which may never see a signal when ``stop`` is set by the
        # caller) is cancelled, so the server nursery can close.
        async with trio.open_nursery() as http:
            binds: list[str] = await http.start(
                partial(serve_http, app, hypercorn_config(config, host, port),
                        app.extensions["turnvisor"]["ws_route"], conn_limits(config),
                        shutdown_trigger=stop.wait, authenticates=tokens.carried_by)
            )
            url = binds[0].replace("0.0.0.0", "127.0.0.1")
            if on_ready is not None:
                on_ready(url, sup)
            if tune_gc:
                # Fewer cyclic-GC passes: with 1,000 WebSocket connections a full
                # collection walks every one of their objects, and at the default
                # (700, 10, 10) that was ~40% of the server's CPU per fanned-out frame.
                gc.collect()
                gc.freeze()
                gc.set_threshold(50_000, 20, 100)
            found_at = write_server_file(config.data_dir, url, token)
            if sys.stdout.isatty():
                print(f"Turnvisor listening on {url}/?token={token}", flush=True)
            else:
                print(f"Turnvisor listening on {url} (the address with its token is in "
                      f"{found_at})", flush=True)
            await stop.wait()
            log.info("shutting down")
            app.extensions["turnvisor"]["gateway"].close_all()
        nursery.cancel_scope.cancel()
    log.info("stopped")


def write_server_file(data_dir: Path, url: str, token: str) -> Path:
    """``DATA_DIR/server.json``: where this server listens and its token, 0600."""
    path = data_dir / "server.json"
    # data_dir and pid: what the command-line client checks before it trusts the
    # file (web/client/server_record.py).
    data = {"url": url, "login_url": f"{url}/?token={token}", "token": token,
            "pid": os.getpid(), "data_dir": str(data_dir)}
    partial_path = path.with_name(".server.json.tmp")
    fd = os.open(partial_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)  # an older file of another mode, reused
        json.dump(data, f)
        f.write("\n")
    os.replace(partial_path, path)
    return path


async def _watch_signals(stop: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            print(f"Turnvisor: {signal.Signals(signum).name}, shutting down", file=sys.stderr,
                  flush=True)
            stop.set()
            return
