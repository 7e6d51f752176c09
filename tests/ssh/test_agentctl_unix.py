"""``turnvisor agentctl --listen unix:PATH``: agentctl on a unix socket (what the
ssh executor forwards to), only its owner may connect."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from functools import partial
from pathlib import Path

import httpx
import trio

from protocols.agentctl_wire import TOKEN_ENV

TOKEN = "unix-socket-token-0123456789abcdef"


async def test_agentctl_serves_its_api_on_a_unix_socket(tmp_path: Path) -> None:
    sock = tmp_path / "agentctl.sock"
    env = {**os.environ, TOKEN_ENV: TOKEN}
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(partial(
                trio.run_process,
                [sys.executable, "-m", "web", "agentctl", "--listen", f"unix:{sock}",
                 "--sandbox", "none", "--data-dir", str(tmp_path / "data"), "--",
                 sys.executable, "-m", "protocols.mock_agent"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False))
            while not await trio.Path(sock).is_socket():
                await trio.sleep(0.05)
            mode = stat.S_IMODE((await trio.Path(sock).stat()).st_mode)
            assert mode & 0o077 == 0, oct(mode)
            transport = httpx.AsyncHTTPTransport(uds=str(sock))
            async with httpx.AsyncClient(transport=transport, base_url="http://agentctl",
                                         timeout=10) as http:
                assert (await http.get("/api/v1/health")).status_code == 200
                refused = await http.get("/api/v1/status",
                                         headers={"Authorization": "Bearer wrong-token-000000"})
                assert refused.status_code == 401
                status = await http.get("/api/v1/status",
                                        headers={"Authorization": f"Bearer {TOKEN}"})
                assert status.status_code == 200, status.text
            proc.terminate()
    assert proc.returncode == 0


async def test_a_relative_unix_path_is_refused() -> None:
    done = await trio.run_process(
        [sys.executable, "-m", "web", "agentctl", "--listen", "unix:agentctl.sock", "--",
         "true"], capture_stderr=True, check=False, env={**os.environ, TOKEN_ENV: TOKEN})
    assert done.returncode == 2
    assert b"--listen unix:PATH wants an absolute path" in done.stderr
