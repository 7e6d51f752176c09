"""A real OpenSSH server for the ssh executor's tests: Debian's ``sshd`` on a
free loopback port, its host key, client key, ``authorized_keys`` and
configuration in a temporary directory, logging in as the current user, or
as a throwaway user made for the run (tests/ssh/throwaway_user.py).

The "host" is this machine: ``remote_turnvisor`` is this venv's ``python -m
web``; the host's data dir (where its detached agentctls keep their run
directories) is the server's own temporary one, set for every login by the
server (``SetEnv TURNVISOR_DATA_DIR``), as a real host's environment would.
"""

from __future__ import annotations

import contextlib
import getpass
import io
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from protocols.process import kill_tree, process_tree
from supervisor.executors.ssh_host import far_control_dir
from tests.ssh.throwaway_user import HostUser
from tests.support.leaks import stop_process
from web.agentctl.detached import sweep_detached

__all__ = ["SSHD", "PortTaken", "Sshd", "running_sshd", "ssh_profile", "sweep_host"]

SSHD = "/usr/sbin/sshd"


@dataclass
class Sshd:
    port: int
    user: str
    dir: Path
    identity: Path
    known_hosts: Path
    #: The host's data dir (TURNVISOR_DATA_DIR of every login).
    remote_data: Path
    process: subprocess.Popen[bytes] | None = None
    #: The Python the login user runs Turnvisor with on the host.
    python: str = sys.executable
    #: The sessions' directory on the host, when the backend's own (under its
    #: 0700 data dir) is not the login user's to enter.
    work: Path | None = None

    @property
    def destination(self) -> str:
        return f"{self.user}@127.0.0.1"

    def log(self) -> str:
        return (self.dir / "sshd.log").read_text(errors="replace")

    def start(self) -> None:
        """The server up on its port (its host key and config unchanged).  Up
        is sshd's own word that it listens, not a connection to the port: one
        taken meanwhile by another run's server would answer too."""
        seen = len(self.log()) if (self.dir / "sshd.log").exists() else 0
        with (self.dir / "sshd.log").open("ab") as log:
            self.process = proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self.dir / "sshd_config")], stdout=log, stderr=log)
        listening = f"Server listening on 127.0.0.1 port {self.port}."
        deadline = time.monotonic() + 30
        while listening not in self.log()[seen:]:
            if proc.poll() is not None:
                self.process = None
                said = self.log()[seen:]
                if "Address already in use" in said:
                    raise PortTaken(said)
                _fail(f"sshd exited ({proc.returncode}): {said[-2000:]}")
            if time.monotonic() > deadline:
                _fail("sshd did not listen within 30s")
            time.sleep(0.05)

    def stop(self) -> None:
        """The server gone, its connections' processes too (each a child of the
        listener): every client's shared connection ends with them (a cut)."""
        proc, self.process = self.process, None
        if proc is None:
            return
        tree = process_tree(proc.pid)
        stop_process(proc)
        kill_tree(tree - {proc.pid})


class PortTaken(OSError):
    """sshd could not bind its port: another process has it."""


def _fail(reason: str) -> None:
    pytest.fail(f"ssh tests cannot run: {reason} (scripts/install_ssh.sh installs "
                "openssh-server)", pytrace=False)


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, timeout=30)
    return path.with_suffix(".pub").read_text().strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def running_sshd(tmp: Path, env: dict[str, str] | None = None,
                 user: HostUser | None = None) -> Iterator[Sshd]:
    """``env``: more variables the server sets for every login (``SetEnv``);
    ``user``: the login (its home holds its key and the host's data dir),
    else the current user."""
    if not os.access(SSHD, os.X_OK):
        _fail(f"{SSHD} is not installed")
    # sshd insists on its privilege separation directory.
    if not os.path.isdir("/run/sshd"):
        try:
            os.makedirs("/run/sshd", mode=0o755)
        except OSError as exc:
            _fail(f"/run/sshd is missing and cannot be made: {exc}")
    tmp.mkdir(parents=True, exist_ok=True)
    before = _socket_dirs()
    host_pub = _keygen(tmp / "host_key")
    client_pub = _keygen(tmp / "id_client")
    keys = tmp / "authorized_keys"
    remote_data = tmp / "host-data"
    if user is not None:
        (user.home / ".ssh").mkdir(exist_ok=True)
        user.own(user.home / ".ssh", 0o700)
        keys, remote_data = user.home / ".ssh" / "authorized_keys", user.home / "host-data"
        env = {**user.env, **(env or {})}
    keys.write_text(client_pub + "\n")
    remote_data.mkdir(mode=0o700)
    if user is not None:
        user.own(keys, 0o600)
        user.own(remote_data, 0o700)
        (user.home / "work").mkdir()
        user.own(user.home / "work", 0o700)

    def configure(port: int) -> None:
        (tmp / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub}\n")
        (tmp / "sshd_config").write_text(f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {tmp / "host_key"}
PidFile {tmp / "sshd.pid"}
AuthorizedKeysFile {keys}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowTcpForwarding yes
AllowStreamLocalForwarding yes
X11Forwarding no
MaxSessions 200
MaxStartups 200
SetEnv TURNVISOR_DATA_DIR={remote_data} {" ".join(f"{k}={v}" for k, v in (env or {}).items())}
LogLevel VERBOSE
""")
    server = Sshd(port=0, user=user.name if user else getpass.getuser(), dir=tmp,
                  identity=tmp / "id_client", known_hosts=tmp / "known_hosts",
                  remote_data=remote_data, python=user.python if user else sys.executable,
                  work=user.home / "work" if user else None)
    try:
        # A port found free may be taken before sshd binds it (other runs share
        # the machine): then another one, with the config and known_hosts for it.
        for attempt in range(3):
            server.port = _free_port()
            configure(server.port)
            try:
                server.start()
                break
            except PortTaken:
                if attempt == 2:
                    _fail("three free ports were taken before sshd could bind one")
        yield server
    finally:
        server.stop()
        sweep_host(remote_data)
        for made in _own_socket_dirs(tmp.parent, _socket_dirs() - before):
            shutil.rmtree(made, ignore_errors=True)


def _socket_dirs() -> set[Path]:
    """This user's ssh socket directories under the temporary directory (made
    by ``control_dir`` for a data dir too deep for a socket path)."""
    return set(Path(tempfile.gettempdir()).glob(f"turnvisor-ssh-{os.getuid()}-*"))


def _own_socket_dirs(tree: Path, made: set[Path]) -> list[Path]:
    """Those of ``made`` named for a data dir under ``tree`` (the test's own
    temporary tree: every caller's ``tmp`` is ``tmp_path / "sshd"``), which
    must still be there (a name is a hash: a data dir never made is not found).
    Another run at the same moment makes its own in the same place, named for
    its own data dirs: those stay, whatever their age."""
    if not made:
        return []
    wanted = {path.name: path for path in made}
    root = tree.resolve()
    found: list[Path] = []
    for top, _dirs, _files in os.walk(root):
        name = far_control_dir(Path(top)).name
        if name in wanted:
            found.append(wanted.pop(name))
            if not wanted:
                break
    return found


def sweep_host(remote_data: Path) -> None:
    """Every detached agentctl still on the host stopped: a backend hands a
    running turn's agentctl over to its next start, which a test may not have."""
    runs = remote_data / "agentctl"
    if runs.is_dir():
        for instance in runs.iterdir():
            with contextlib.redirect_stdout(io.StringIO()):
                sweep_detached(remote_data, instance.name, [])


def ssh_profile(sshd: Sshd, **extra: Any) -> dict[str, Any]:
    """The keys of an ``executor = "ssh"`` profile on this server."""
    # The mock agent too is started with the login user's Python.
    command: dict[str, Any] = ({} if sshd.python == sys.executable else
               {"command": [sshd.python, "-m", "protocols.mock_agent", "--protocol", "acp"]})
    if sshd.work is not None:
        command["cwd"] = str(sshd.work)
    return {"executor": "ssh", "ssh": sshd.destination, "ssh_port": sshd.port,
            "ssh_identity": str(sshd.identity), "ssh_known_hosts": str(sshd.known_hosts),
            "remote_turnvisor": [sshd.python, "-m", "web"], **command, **extra}
