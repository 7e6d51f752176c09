"""The command-line client's connection: where the server is, and one WebSocket
to it that matches answers to requests and hands notifications on.

Where the server is (issue 40, item 9: a token goes only to the server it
belongs to):

- a URL from ``--url`` or ``TURNVISOR_URL`` gets the token from ``--token`` or
  ``TURNVISOR_TOKEN``, else the running server's record if that record is
  trusted and names this very URL, else the data dir's ``token`` file;
- with no URL given, the running server's own record in its data dir
  (``server.json``) gives both, and only when it is trusted
  (``server_record``: a live ``turnvisor serve`` of this data dir holding
  the record's port).  A token from a flag or the environment is never sent
  to a URL read from a file: whoever can write the file would choose where
  it goes.  Anything else is one line and no request.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    HandshakeError,
    WebSocketConnection,
    open_websocket_url,
)

from .server_record import RECORD_NAME, ServerRecord, UntrustedRecord, read_trusted_record

__all__ = ["ClientError", "Connection", "Endpoint", "client_error", "connect", "find_server"]

#: How long one request may wait for its answer (a cancel answers once it settled,
#: which the server bounds by its escalation deadline, 10 s by default).
REQUEST_TIMEOUT_S = 60.0


class ClientError(Exception):
    """Something the person must be told in one line (no traceback)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    token: str

    @property
    def ws_url(self) -> str:
        parts = urlsplit(self.url)
        scheme = "wss" if parts.scheme == "https" else "ws"
        return urlunsplit((scheme, parts.netloc, "/ws", "", ""))


def _record(data_dir: Path) -> ServerRecord:
    """The trusted record of ``data_dir``'s server, or the one line why there is none."""
    where = data_dir / RECORD_NAME
    try:
        record = read_trusted_record(data_dir)
    except UntrustedRecord as exc:
        raise ClientError(f"{where} is not trusted: {exc}; no request sent (pass --url, "
                          "or set TURNVISOR_URL, to name the server)") from None
    if record is None:
        raise ClientError(f"no running server found: there is no {where} (start `turnvisor "
                          "serve`, check --data-dir, or pass --url or set TURNVISOR_URL)")
    return record


def find_server(url: str | None, token: str | None, data_dir: Path) -> Endpoint:
    """``url`` and ``token``: the flags' (None when not given)."""
    url = url or os.environ.get("TURNVISOR_URL") or None
    if url is None:
        if token is not None:
            raise ClientError("--token goes only to a server you name: add --url or set "
                              "TURNVISOR_URL")
        # TURNVISOR_TOKEN is not sent here: the record's own token goes to its URL.
        record = _record(data_dir)
        return Endpoint(record.url, record.token)
    url = url.split("?", 1)[0].rstrip("/")
    token = token or os.environ.get("TURNVISOR_TOKEN") or None
    if token is None:
        try:
            known = read_trusted_record(data_dir)
        except UntrustedRecord:
            known = None  # its token is not used; the data dir's own token may be
        if known is not None and known.url == url:
            return Endpoint(url, known.token)
        try:
            token = (data_dir / "token").read_text().strip()
        except OSError:
            raise ClientError(f"no token: pass --token, set TURNVISOR_TOKEN, or run on the "
                              f"machine of the server whose data dir is {data_dir}") from None
    return Endpoint(url, token)


class Connection:
    """Requests answered by id; everything else is a notification."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._waiting: dict[str, trio.MemorySendChannel[dict[str, Any]]] = {}
        self._notes_in, self.notifications = trio.open_memory_channel[dict[str, Any]](1024)

    async def reader(self) -> None:
        try:
            while True:
                frame = json.loads(await self._ws.get_message())
                answer = self._waiting.pop(str(frame.get("id")), None)
                if answer is not None and frame.get("type") in ("response", "error"):
                    answer.send_nowait(frame)
                elif frame.get("type") == "notification":
                    await self._notes_in.send(frame)
        except ConnectionClosed:
            pass
        finally:
            self._notes_in.close()
            for answer in self._waiting.values():
                answer.close()

    async def request(self, action: str, payload: dict[str, Any] | None = None,
                      within: float = REQUEST_TIMEOUT_S) -> dict[str, Any]:
        """The response's payload; an error answer raises ``ClientError``."""
        rid = f"c{next(self._ids)}"
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[rid] = send
        await self._ws.send_message(json.dumps(
            {"id": rid, "type": "request", "action": action, "payload": payload or {}}))
        try:
            with trio.fail_after(within):
                frame = await receive.receive()
        except trio.EndOfChannel:
            raise ClientError("the server closed the connection") from None
        except trio.TooSlowError:
            raise ClientError(f"{action}: no answer within {within:.0f} s") from None
        finally:
            self._waiting.pop(rid, None)
        payload_out: dict[str, Any] = frame.get("payload") or {}
        if frame["type"] == "error":
            raise ClientError(f"{action}: {payload_out.get('code')}: "
                              f"{payload_out.get('message')}")
        return payload_out


@asynccontextmanager
async def connect(endpoint: Endpoint) -> AsyncIterator[Connection]:
    """One connection whose reader runs while the block runs.  What goes wrong
    comes out inside exception groups (trio's nurseries): ``client_error``
    finds the one line to say."""
    headers = [(b"Authorization", f"Bearer {endpoint.token}".encode())]
    try:
        async with open_websocket_url(endpoint.ws_url, extra_headers=headers) as ws, \
                trio.open_nursery() as nursery:
            conn = Connection(ws)
            nursery.start_soon(conn.reader)
            yield conn
            nursery.cancel_scope.cancel()
    except OSError as exc:
        raise ClientError(f"cannot reach {endpoint.url}: {exc.strerror or exc}") from None
    except ConnectionRejected as exc:
        why = "refused the token" if exc.status_code in (401, 403) else "refused the connection"
        raise ClientError(f"{endpoint.url} {why} ({exc.status_code})") from None
    except HandshakeError as exc:
        if isinstance(exc.__cause__, OSError):  # nothing listens there
            raise ClientError(f"cannot reach {endpoint.url}: {exc.__cause__}") from None
        raise ClientError(f"{endpoint.url}: WebSocket handshake failed ({exc})") from None


def client_error(exc: BaseException) -> ClientError | None:
    """The ``ClientError`` (or connection failure) at the bottom of ``exc``."""
    if isinstance(exc, ClientError):
        return exc
    if isinstance(exc, ConnectionRejected):
        why = "refused the token" if exc.status_code in (401, 403) else "refused the connection"
        return ClientError(f"the server {why} ({exc.status_code})")
    if isinstance(exc, OSError):
        return ClientError(f"cannot reach the server: {exc.strerror or exc}")
    if isinstance(exc, ConnectionClosed):
        return ClientError("the server closed the connection")
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = client_error(inner)
            if found is not None:
                return found
    return None
