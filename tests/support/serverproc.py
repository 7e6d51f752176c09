"""``turnvisor serve`` as a subprocess, started the way a person starts it.

``turnvisor serve --port 0 --data-dir DIR`` with ``TURNVISOR_TOKEN`` set; the
URL comes from the one line it prints once listening (docs/contract-notes.md):
``Turnvisor listening on http://HOST:PORT/?token=TOKEN`` to a terminal, else
(stdout a pipe, as here) ``Turnvisor listening on http://HOST:PORT (...)`` and
the token in ``DATA_DIR/server.json``; parsed here and nowhere else.  Two shapes of the same thing:

- ``server_process`` (trio): an async context manager, for the fault tests,
  the serve-process test and the benchmark (whose client work then does not
  run on the server's thread);
- ``start_blocking_server`` (threads): for the browser tests, which are plain
  sync tests under Playwright's sync API, with no trio loop.

On the way out the server is asked to stop (SIGTERM), killed if it does not
within ``stop_timeout``, and the process groups of the agents it still had
(its children lead their own groups) are killed as a backstop.
"""

from __future__ import annotations

import json
import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from .leaks import child_pids, kill_group

if TYPE_CHECKING:
    import psutil

__all__ = [
    "BlockingServerProcess",
    "ServerProcess",
    "parse_listening",
    "server_process",
    "start_blocking_server",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
_LISTENING = re.compile(r"Turnvisor listening on (http://[^\s/]+)(?:/\?token=(\S+))?")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


def parse_listening(text: str, data_dir: Path | None = None) -> tuple[str, str] | None:
    """``(http://HOST:PORT, token)`` from the "listening" line, if ``text`` holds it.
    The token URL is printed only to a terminal; otherwise (a pipe, here) the
    token is read from ``data_dir/server.json``, as the line says."""
    match = _LISTENING.search(text)
    if match is None:
        return None
    if match.group(2) is not None:
        return match.group(1), match.group(2)
    if data_dir is None:
        return None
    found = json.loads((data_dir / "server.json").read_text())
    assert found["url"] == match.group(1), (found, match.group(1))
    return match.group(1), found["token"]


@dataclass
class _Endpoint:
    """What both shapes share: where the server listens, with which token, its files."""

    url: str
    """``http://HOST:PORT``"""
    token: str
    data_dir: Path
    log_path: Path

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/ws"

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def url_for(self, path: str = "/") -> str:
        return self.url + path

    def login_url(self, path: str = "/") -> str:
        """A page URL carrying the token (the page's script stores it and drops it from the URL)."""
        sep = "&" if "?" in path else "?"
        return f"{self.url}{path}{sep}token={self.token}"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])


def _command(data_dir: Path, port: int, agent: str | None) -> list[str]:
    """``turnvisor serve`` of this interpreter's environment (the venv's console script)."""
    script = Path(sys.executable).with_name("turnvisor")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "web"]
    cmd += ["serve", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data_dir)]
    if agent is not None:
        cmd += ["--agent", agent]
    return cmd


def _environ(token: str, base_env: Mapping[str, str] | None,
             log_level: str | None) -> dict[str, str]:
    env = {**(os.environ if base_env is None else base_env), "TURNVISOR_TOKEN": token,
           "PYTHONUNBUFFERED": "1"}
    env.pop("TURNVISOR_DATA_DIR", None)  # --data-dir says it
    if log_level is not None:
        env["TURNVISOR_LOG"] = log_level
    else:
        env.setdefault("TURNVISOR_LOG", "WARNING")
    return env


#: The suite's servers run without turn checkpoints unless a test names ``[projects]`` or
#: asks for them (``checkpoints=True``): the product has them in every session, and a cancel
#: during the snapshot before a prompt withholds the prompt, while most tests race a cancel
#: against the agent itself (tests/web/test_revert_rules.py, tests/browser/test_undo_trust.py
#: and the other undo tests run with them).
NO_CHECKPOINTS = "\n[projects]\ncheckpoints = false\n"


def suite_toml(toml: str | None, *, checkpoints: bool = False) -> str | None:
    """``toml`` as the suite's servers get it (``NO_CHECKPOINTS``, above)."""
    if checkpoints or (toml is not None and "[projects]" in toml):
        return toml
    return (toml or "") + NO_CHECKPOINTS


def _prepare(data_dir: Path, toml: str | None, log_path: Path | None,
             checkpoints: bool = False) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "turnvisor.toml"
    if toml is not None or not config.exists():  # (a test's own file is left as it is)
        text = suite_toml(toml, checkpoints=checkpoints)
        if text is not None:
            config.write_text(text)
    return log_path or data_dir / f"server-{int(time.time() * 1000)}.log"


def _start_failed(why: str, returncode: int | None, log_path: Path) -> RuntimeError:
    try:
        log = log_path.read_text(errors="replace")[-4000:]
    except OSError:
        log = "(no log)"
    return RuntimeError(f"turnvisor serve {why} (rc={returncode}); its log:\n{log}")


def _check_token(printed: str, token: str) -> None:
    if printed != token:
        raise RuntimeError("turnvisor serve did not use TURNVISOR_TOKEN")


# -- trio -----------------------------------------------------------------------------


@dataclass
class ServerProcess(_Endpoint):
    proc: trio.Process = field(repr=False, kw_only=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def ps(self) -> psutil.Process:
        # psutil is a benchmark dependency; only the benchmark asks for it.
        import psutil
        return psutil.Process(self.proc.pid)

    def agents(self) -> list[psutil.Process]:
        """The server's agent processes (its descendants)."""
        import psutil
        try:
            return self.ps().children(recursive=True)
        except psutil.NoSuchProcess:
            return []


@asynccontextmanager
async def server_process(data_dir: Path | None = None, *, toml: str | None = None,
                         token: str | None = None, port: int = 0, agent: str | None = None,
                         base_env: Mapping[str, str] | None = None,
                         log_level: str | None = None, log_path: Path | None = None,
                         start_timeout: float = START_TIMEOUT_S,
                         stop_timeout: float = STOP_TIMEOUT_S, checkpoints: bool = False,
                         ) -> AsyncIterator[ServerProcess]:
    """``data_dir`` None: a temporary one, removed afterwards; ``toml``: its
    ``turnvisor.toml``; ``base_env``: the server's environment instead of this
    process's (agents inherit it under their profile's); ``log_level``: its
    ``TURNVISOR_LOG`` (default: inherited, else WARNING); ``log_path``: where its
    stderr goes (appended; default: a new file in the data dir); ``checkpoints``: the
    product's turn checkpoints (``NO_CHECKPOINTS``)."""
    temporary = data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="turnvisor-serve-")) if data_dir is None else data_dir
    log_path = _prepare(data_dir, toml, log_path, checkpoints)
    token = token or secrets.token_urlsafe(24)
    with log_path.open("ab") as log:
        proc = await trio.lowlevel.open_process(
            _command(data_dir, port, agent), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=log, env=_environ(token, base_env, log_level), cwd=REPO_ROOT)
    assert proc.stdout is not None
    agents: set[int] = set()
    try:
        buf = b""
        with trio.move_on_after(start_timeout):
            while (found := parse_listening(buf.decode(errors="replace"), data_dir)) is None:
                chunk = await proc.stdout.receive_some(4096)
                if not chunk:
                    raise _start_failed("exited", await proc.wait(), log_path)
                buf += chunk
        if found is None:
            raise _start_failed(f"printed no URL within {start_timeout:g}s", proc.returncode,
                                log_path)
        _check_token(found[1], token)
        server = ServerProcess(found[0], token, data_dir, log_path, proc=proc)
        try:
            yield server
        finally:
            if proc.returncode is None:
                agents = child_pids(proc.pid)
    finally:
        with trio.CancelScope(shield=True):
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                with trio.move_on_after(stop_timeout):
                    await proc.wait()
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            for pid in agents:
                kill_group(pid)
            await proc.stdout.aclose()
            if temporary:
                shutil.rmtree(data_dir, ignore_errors=True)


# -- threads ----------------------------------------------------------------------------


@dataclass
class BlockingServerProcess(_Endpoint):
    proc: subprocess.Popen[str] = field(repr=False, kw_only=True)
    stdout_pump: threading.Thread = field(repr=False, kw_only=True)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> None:
        agents: set[int] = set()
        if self.proc.poll() is None:
            agents = child_pids(self.proc.pid)
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        for pid in agents:
            kill_group(pid)
        # The pump ends at EOF; then the pipe can be closed (an open one is a ResourceWarning,
        # which this project's pytest settings turn into an error).
        self.stdout_pump.join(timeout=timeout)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def start_blocking_server(data_dir: Path, *, toml: str | None = None, port: int = 0,
                          token: str | None = None, log_level: str | None = None,
                          start_timeout: float = START_TIMEOUT_S,
                          checkpoints: bool = False) -> BlockingServerProcess:
    """Starts ``turnvisor serve`` and waits for its "listening" line; ``stop()`` ends it.
    ``checkpoints``: the product's turn checkpoints (``NO_CHECKPOINTS``)."""
    log_path = _prepare(data_dir, toml, None, checkpoints)
    token = token or secrets.token_urlsafe(24)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            _command(data_dir, port, None), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=log, text=True, env=_environ(token, None, log_level), cwd=REPO_ROOT)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        # Keep draining stdout for the server's whole life so it can never block on a full pipe.
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    pump_thread = threading.Thread(target=pump, name="turnvisor-stdout", daemon=True)
    pump_thread.start()
    deadline = time.monotonic() + start_timeout
    while True:
        left = deadline - time.monotonic()
        try:
            line = lines.get(timeout=max(left, 0.01))
        except queue.Empty:
            line = ""
        found = parse_listening(line, data_dir) if line else None
        if found is not None:
            _check_token(found[1], token)
            return BlockingServerProcess(found[0], token, data_dir, log_path, proc=proc,
                                         stdout_pump=pump_thread)
        if line is None or left <= 0:
            proc.kill()
            proc.wait()
            pump_thread.join(timeout=STOP_TIMEOUT_S)
            if proc.stdout is not None:
                proc.stdout.close()
            why = "exited" if line is None else f"printed no URL within {start_timeout:g}s"
            raise _start_failed(why, proc.returncode, log_path)
