"""agentctl takes its token in X-Turnvisor-Agentctl-Token too (the API server's
Pod proxy consumes Authorization): the same constant-time check, on HTTP and on
the event stream, and a wrong token is refused in either header."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import trio
from trio_websocket import open_websocket_url

from protocols.agentctl_wire import TOKEN_HEADER
from supervisor.executors.agentctl import spawn_agentctl
from supervisor.profiles import AgentProfile

TOKEN = "kube-header-token-0123456789abcdef"
MOCK = AgentProfile(name="mock", protocol="acp",
                    command=(sys.executable, "-m", "protocols.mock_agent", "--protocol", "acp"))


async def test_the_token_header_is_checked_like_authorization(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with spawn_agentctl(MOCK, str(tmp_path), TOKEN, start_s=30,
                                  term_grace_s=2) as (proc, url):
            assert proc.stderr is not None
            async with httpx.AsyncClient(base_url=url, timeout=15) as http:
                async def status(headers: dict[str, str]) -> int:
                    return (await http.get("/api/v1/status", headers=headers)).status_code

                right, wrong = f"Bearer {TOKEN}", "Bearer not-the-token-0123456789"
                assert await status({TOKEN_HEADER: right}) == 200
                # A relay's own credential in Authorization does not get in the way.
                assert await status({"Authorization": "Bearer cluster-token",
                                     TOKEN_HEADER: right}) == 200
                assert await status({TOKEN_HEADER: wrong}) == 401
                assert await status({TOKEN_HEADER: TOKEN}) == 401  # not "Bearer ..."
                assert await status({"Authorization": wrong, TOKEN_HEADER: wrong}) == 401
                assert await status({}) == 401
            ws_url = url.replace("http://", "ws://") + "/api/v1/events"
            async with open_websocket_url(ws_url, extra_headers=[
                    (TOKEN_HEADER.lower().encode(), right.encode())]) as ws:
                assert '"Hello"' in await ws.get_message()
            # Refused at the handshake, with a status (the upgrade request by hand).
            host, port = url.removeprefix("http://").rsplit(":", 1)
            for header, answer in ((right, b"HTTP/1.1 101"), (wrong, b"HTTP/1.1 401")):
                stream = await trio.open_tcp_stream(host, int(port))
                try:
                    await stream.send_all(
                        f"GET /api/v1/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
                        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                        f"Sec-WebSocket-Version: 13\r\n{TOKEN_HEADER}: {header}\r\n\r\n"
                        .encode())
                    reply = await stream.receive_some(4096)
                    assert reply.startswith(answer), reply
                finally:
                    await stream.aclose()
