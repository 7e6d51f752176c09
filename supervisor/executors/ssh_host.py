"""One SSH host as the system's OpenSSH client reaches it: a shared connection,
remote commands over it, and unix sockets forwarded through it.

``ssh`` is the one resolved at start from directories no agent can write
(protocols/tools.py, DESIGN.md §17).  Every ``ssh`` run here checks the
host's key (``StrictHostKeyChecking=yes``, against the profile's
``ssh_known_hosts`` when given, else the user's ``known_hosts``) and never
asks anything (``BatchMode=yes``).  The shared
connection is a ControlMaster, its socket in a 0700 directory under the data
dir (``control_dir``); it is started with one session (``true``: what makes
sshd set TCP_NODELAY on its side) and then detaches (``ControlPersist``: it
outlives nothing of ours and is found again by a later backend) and persists
``PERSIST_S`` after its last use.  Its start is single-flight: sessions starting together wait for
one master (no lock is held while ssh runs).

Errors are ``OSError`` with one line saying what ssh said (a host key that
does not match reads as such).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trio

from protocols.fence_paths import PathRefused, open_by_identity
from protocols.tools import ToolsError
from protocols.tools import current as current_tools

from ..ssh_target import SshTarget
from .agentctl_link import AgentctlLink

__all__ = ["PERSIST_S", "RETRY_S", "RemoteResult", "SshHost", "control_dir", "far_control_dir",
           "keep_forwarded", "reforward", "ssh_error"]

log = logging.getLogger(__name__)

#: How long the shared connection stays up with nothing using it.
PERSIST_S: Final = 300
#: How often a host that does not answer is tried again (and how long a
#: forwarded socket may take to accept).
RETRY_S: Final = 1.0
#: ssh's bound on a unix socket path (sun_path), with room for its own suffix.
_MAX_SOCKET_PATH: Final = 100


def far_control_dir(data_dir: Path) -> Path:
    """The name ``control_dir`` gives a data dir too deep for a socket path (it
    is not made here): one of this user's under the temporary directory, named
    by a hash of the data dir's resolved path."""
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"turnvisor-ssh-{os.getuid()}-{digest}"


def control_dir(data_dir: Path) -> Path:
    """The 0700 directory of the shared connections' and forwards' sockets:
    ``DATA_DIR/ssh``, or (a data dir too deep for a unix socket path) a
    directory of this user's under the temporary directory, named for it.
    Made, or found, by the fence's one way (``open_by_identity``): a symlink
    or a directory another user planted there first, or one open to others,
    is refused (``PathRefused``, an ``OSError``, naming why)."""
    wanted = data_dir / "ssh"
    if len(str(wanted)) + 30 > _MAX_SOCKET_PATH:
        wanted = far_control_dir(data_dir)
    wanted = wanted.absolute()
    try:
        opened = open_by_identity(str(wanted), create=True, mode=0o700,
                                  private_below=os.path.realpath(wanted.parent))
    except PathRefused as exc:
        raise PathRefused(f"ssh sockets: {exc}") from None
    os.close(opened.fd)
    return wanted


def ssh_error(target: SshTarget, stderr: bytes, returncode: int | None) -> str:
    """ssh's failure in one line."""
    lines = [ln.strip() for ln in stderr.decode(errors="replace").splitlines() if ln.strip()]
    text = " ".join(lines)
    if "Host key verification failed" in text or "HOST IDENTIFICATION HAS CHANGED" in text \
            or "No ED25519 host key is known" in text or "host key is known" in text:
        where = target.known_hosts or "~/.ssh/known_hosts"
        return (f"ssh to {target}: host key verification failed (the host's key is not the "
                f"one {where} holds for it): refused")
    interesting = [ln for ln in lines if not ln.startswith(("Warning:", "@", "Please contact",
                                                            "It is also possible",
                                                            "Someone could be"))]
    detail = interesting[-1] if interesting else f"exit status {returncode}"
    return f"ssh to {target}: {detail}"


@dataclass(frozen=True, slots=True)
class RemoteResult:
    returncode: int
    stdout: bytes
    stderr: bytes


class SshHost:
    """One target's shared connection and what runs over it (module doc)."""

    def __init__(self, target: SshTarget, sockets: Path, *, connect_s: float) -> None:
        self.target = target
        self.sockets = sockets
        self.connect_s = connect_s
        digest = hashlib.sha256(target.key.encode()).hexdigest()[:12]
        self.control_path = sockets / f"m-{digest}"
        self._starting: trio.Event | None = None
        self._start_error: str | None = None

    def options(self) -> list[str]:
        t = self.target
        opts = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                "-o", f"ControlPath={self.control_path}",
                "-o", f"ConnectTimeout={max(1, int(self.connect_s))}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                "-o", "LogLevel=ERROR"]
        if t.known_hosts:
            opts += ["-o", f"UserKnownHostsFile={t.known_hosts}",
                     "-o", "GlobalKnownHostsFile=/dev/null"]
        if t.identity:
            opts += ["-i", t.identity, "-o", "IdentitiesOnly=yes"]
        if t.port:
            opts += ["-p", str(t.port)]
        return opts

    async def _ssh(self, args: Sequence[str], *, stdin: bytes = b"",
                   timeout_s: float) -> RemoteResult:
        """``ssh OPTIONS ARGS``, bounded; never raises for a non-zero exit."""
        try:
            # Resolved once, from directories no agent can write (§17).
            ssh = current_tools().need("ssh")
        except ToolsError as exc:
            raise OSError(f"ssh to {self.target}: {exc} (apt-get install openssh-client)"
                          ) from None
        command = [ssh, *self.options(), *args]
        with trio.move_on_after(timeout_s) as scope:
            done = await trio.run_process(command, stdin=stdin, capture_stdout=True,
                                          capture_stderr=True, check=False)
            return RemoteResult(done.returncode, done.stdout, done.stderr)
        assert scope.cancelled_caught
        raise OSError(f"ssh to {self.target}: no answer within {timeout_s:g}s")

    async def master_running(self) -> bool:
        if not self.control_path.exists():
            return False
        done = await self._ssh(["-O", "check", self.target.destination],
                               timeout_s=self.connect_s)
        return done.returncode == 0

    async def master_pid(self) -> int | None:
        """The shared connection's process (``ssh -O check`` says it), if it runs."""
        done = await self._ssh(["-O", "check", self.target.destination],
                               timeout_s=self.connect_s)
        text = done.stderr.decode(errors="replace")
        if done.returncode != 0 or "pid=" not in text:
            return None
        return int(text.split("pid=", 1)[1].split(")", 1)[0])

    async def ensure_master(self) -> None:
        """The shared connection is up (started if need be; single-flight: a
        caller that finds a start under way waits for its outcome)."""
        starting = self._starting
        if starting is not None:
            await starting.wait()
            if self._start_error is not None:
                raise OSError(self._start_error)
            return
        self._starting, self._start_error = trio.Event(), None
        try:
            if await self.master_running():
                return
            # A socket left by a master that died would stop a new one binding.
            _unlink(self.control_path)
            # Started with a session (``true``, then the master persists on its
            # own), not ``-N``: sshd turns Nagle's algorithm off (TCP_NODELAY) on a
            # connection only when a session on it executes something, and with
            # it on, the second of two small writes back (agentctl's
            # CancelWritten, then the turn's end) waits for the first one's
            # delayed ACK: 40 ms on Linux (docs/performance.md, "the ssh hop").
            done = await self._ssh(
                ["-o", "ControlMaster=yes", "-o", f"ControlPersist={PERSIST_S}",
                 "-o", "StreamLocalBindUnlink=yes", "-o", "StreamLocalBindMask=0177",
                 self.target.destination, "--", "true"], timeout_s=self.connect_s + 5)
            if done.returncode not in (0, 255) and await self.master_running():
                # Up, but the login ran no command (a nologin shell, a ForceCommand):
                # forwards work all the same, with Nagle's algorithm on at sshd.
                log.warning("ssh: %s: the login refused a command (%s); the shared "
                            "connection is up, but small answers over it may wait ~40 ms "
                            "for a delayed ACK", self.target,
                            ssh_error(self.target, done.stderr, done.returncode))
            elif done.returncode != 0:
                self._start_error = ssh_error(self.target, done.stderr, done.returncode)
                raise OSError(self._start_error)
            log.info("ssh: shared connection to %s up", self.target)
        finally:
            started, self._starting = self._starting, None
            started.set()

    async def run(self, argv: Sequence[str], *, stdin: bytes = b"",
                  timeout_s: float) -> RemoteResult:
        """``argv`` on the host, over the shared connection (quoted for the
        remote shell: each word stays one word)."""
        return await self._ssh(["-o", "ControlMaster=no", self.target.destination, "--",
                                shlex.join(argv)], stdin=stdin, timeout_s=timeout_s)

    async def forward(self, local: Path, remote: str) -> None:
        """``local`` (a unix socket here) reaches ``remote`` (one on the host)."""
        _unlink(local)  # one left by a forward of a master that died
        done = await self._ssh(["-O", "forward", "-L", f"{local}:{remote}",
                                self.target.destination], timeout_s=self.connect_s)
        if done.returncode != 0:
            raise OSError(ssh_error(self.target, done.stderr, done.returncode))

    async def cancel_forward(self, local: Path, remote: str) -> None:
        """Undo ``forward`` (quietly: the master may be gone with it)."""
        try:
            await self._ssh(["-O", "cancel", "-L", f"{local}:{remote}",
                             self.target.destination], timeout_s=self.connect_s)
        except OSError as exc:
            log.info("%s", exc)
        _unlink(local)


def _unlink(path: Path) -> None:
    """A socket file of ours, gone (a quick local call: no thread needed)."""
    path.unlink(missing_ok=True)


async def keep_forwarded(host: SshHost, forwards: Sequence[tuple[Path, str]],
                         link: AgentctlLink) -> None:
    """While ``link`` is down: the shared connection up again and each of
    ``forwards`` (local socket, what it reaches on the host) forwarded again
    over it (a new master has none of the old one's forwards).  The link
    re-opens its stream through the socket by itself.  Never raises: a host
    that still does not answer is tried again every ``RETRY_S``."""
    while not link.closed.is_set():
        if link.reachable:
            await link.until_changed()
            continue
        try:
            await reforward(host, forwards)
        except OSError as exc:
            log.info("ssh: %s does not answer yet: %s", host.target, exc)
        with trio.move_on_after(RETRY_S):
            await link.until_changed()


async def reforward(host: SshHost, forwards: Sequence[tuple[Path, str]]) -> None:
    """The shared connection up, and each of ``forwards`` that no longer takes
    a connection forwarded again (``OSError`` if the host does not answer)."""
    await host.ensure_master()
    for local, remote in forwards:
        if not await _connects(local):
            await host.cancel_forward(local, remote)
            await host.forward(local, remote)
            log.info("ssh: %s forwarded again to %s", local.name, host.target)


async def _connects(path: Path) -> bool:
    """Whether a forwarded socket takes a connection (its master forwards it)."""
    try:
        with trio.fail_after(RETRY_S):
            stream = await trio.open_unix_socket(str(path))
    except (OSError, trio.TooSlowError):
        return False
    await stream.aclose()
    return True
