"""A real ``turnvisor serve`` as a subprocess, started the way a person starts it.

``turnvisor serve --port 0 --data-dir DIR`` with ``TURNVISOR_TOKEN`` set; the URL comes from the
one line it prints once listening: ``Turnvisor listening on http://HOST:PORT/?token=TOKEN``
(docs/contract-notes.md).
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

TOKEN = "browser-test-token-0123456789"
LISTENING = re.compile(r"Turnvisor listening on (http://\S+?)/\?token=(\S+)")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0

#: Timeouts of the default test server. A `/hang` turn ignores the cancel, so the backend's
#: operation stays pending until escalation (`cancel_escalate_s`): long enough to navigate,
#: reload and open tabs while it lives, short enough that it settles within a test.
LONG_PENDING_TOML = """\
[timeouts]
cancel_join_s = 1.0
cancel_escalate_s = 10.0
cancel_operation_s = 30.0
"""

#: A server whose cancel of a `/hang` turn fails: the operation's own bound passes before
#: escalation, so the backend answers CONFLICT, clears pending, and the session stays RUNNING.
FAILING_CANCEL_TOML = """\
[timeouts]
cancel_join_s = 0.5
cancel_escalate_s = 120.0
cancel_operation_s = 2.0
"""


def _turnvisor_command() -> list[str]:
    """The ``turnvisor`` console script of this interpreter's environment (the venv)."""
    script = Path(sys.executable).with_name("turnvisor")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "web"]


@dataclass
class ServerProcess:
    """One running ``turnvisor serve``; ``base_url`` is ``http://HOST:PORT``."""

    data_dir: Path
    token: str
    proc: subprocess.Popen[str]
    base_url: str
    port: int
    stderr_path: Path
    stdout_pump: threading.Thread
    stdout_lines: list[str] = field(default_factory=list)

    def url(self, path: str = "/") -> str:
        return self.base_url + path

    def login_url(self, path: str = "/") -> str:
        """A page URL carrying the one-time token; the response sets the auth cookie."""
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}{path}{sep}token={self.token}"

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT_S)
        # The pump ends at EOF; then the pipe can be closed (an open one is a ResourceWarning,
        # which this project's pytest settings turn into an error).
        self.stdout_pump.join(timeout=STOP_TIMEOUT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def start_server(
    data_dir: Path, *, toml: str | None = None, port: int = 0, token: str = TOKEN
) -> ServerProcess:
    """Starts ``turnvisor serve`` and waits for its "listening" line."""
    data_dir.mkdir(parents=True, exist_ok=True)
    if toml is not None:
        (data_dir / "turnvisor.toml").write_text(toml)
    stderr_path = data_dir / f"server-{int(time.time() * 1000)}.log"
    env = {**os.environ, "TURNVISOR_TOKEN": token, "PYTHONUNBUFFERED": "1"}
    env.setdefault("TURNVISOR_LOG", "WARNING")
    with stderr_path.open("w") as stderr:
        proc = subprocess.Popen(
            [*_turnvisor_command(), "serve", "--port", str(port), "--data-dir", str(data_dir)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
        )
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []

    def pump() -> None:
        # Keep draining stdout for the server's whole life so it can never block on a full pipe.
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            lines.put(line)
        lines.put(None)

    pump_thread = threading.Thread(target=pump, name="turnvisor-stdout", daemon=True)
    pump_thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        left = deadline - time.monotonic()
        try:
            line = lines.get(timeout=max(left, 0.01))
        except queue.Empty:
            line = ""
        if line is None or left <= 0:
            proc.kill()
            proc.wait()
            pump_thread.join(timeout=STOP_TIMEOUT_S)
            if proc.stdout is not None:
                proc.stdout.close()
            log = stderr_path.read_text(errors="replace")[-4000:]
            why = "exited" if line is None else f"printed no URL within {START_TIMEOUT_S:g}s"
            raise RuntimeError(f"turnvisor serve {why} (rc={proc.returncode}); stderr:\n{log}")
        match = LISTENING.search(line)
        if match:
            base_url, printed_token = match.group(1), match.group(2)
            assert printed_token == token, "the server must use TURNVISOR_TOKEN"
            port_found = int(base_url.rsplit(":", 1)[1])
            return ServerProcess(
                data_dir, token, proc, base_url, port_found, stderr_path, pump_thread, seen
            )
