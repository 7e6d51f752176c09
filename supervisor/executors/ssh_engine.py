"""A container engine on another host, reached over SSH (``ssh://`` engines).

``reach_engine`` gives the container executor an engine address it can use
unchanged (engine_api.EngineClient): for ``unix://`` and ``tcp://`` the
address itself; for ``ssh://user@host[:port][/socket]`` a local unix socket
forwarded to the engine's socket on that host over the host's shared
connection (ssh_host.SshHost: host key checked, ``BatchMode``), the profile's
``ssh_identity`` and ``ssh_known_hosts`` applied.  ``Reached.forward_port``
forwards another local socket to a port of the engine host's loopback (where
the container's agentctl is published), over the same connection.  Every
forward is cancelled when the context ends.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import trio

from ..config import Config
from ..profiles import AgentProfile
from ..ssh_target import SshTarget
from .engine_api import EngineAddress, EngineError, engine_address
from .ssh_host import SshHost, control_dir, reforward

__all__ = ["Reached", "profile_engine", "reach_engine"]

log = logging.getLogger(__name__)

#: Where an engine's socket usually is, in the order the docker CLI and Podman look.
_REMOTE_SOCKETS = ("/var/run/docker.sock", "/run/podman/podman.sock")


def profile_engine(profile: AgentProfile | None) -> EngineAddress:
    """The profile's ``docker_host``, else ``DOCKER_HOST`` (``EngineError`` if bad)."""
    if profile is not None and profile.docker_host:
        return engine_address({**os.environ, "DOCKER_HOST": profile.docker_host})
    return engine_address()


@dataclass(eq=False)
class Reached:
    """An engine as this process reaches it (``address``: never ``ssh``)."""

    address: EngineAddress
    #: The SSH host behind an ``ssh://`` engine (None: a local or TCP engine).
    host: SshHost | None = None
    _forwards: list[tuple[Path, str]] = field(default_factory=list)
    #: The engine as named (``ssh://...``; else ``address``), for messages.
    named: EngineAddress | None = None

    @property
    def wanted(self) -> EngineAddress:
        return self.named or self.address

    @property
    def remote(self) -> bool:
        return self.host is not None

    @property
    def forwards(self) -> list[tuple[Path, str]]:
        """(local socket, what it reaches on the host), the engine's first."""
        return self._forwards

    async def refresh(self) -> None:
        """Every forward working again (a shared connection that died took
        them): before the teardown's engine calls.  Quiet when the host does
        not answer (those calls then say so)."""
        if self.host is not None:
            try:
                await reforward(self.host, self._forwards)
            except OSError as exc:
                log.info("%s", exc)

    async def forward_port(self, port: int) -> Path:
        """A local unix socket that reaches ``127.0.0.1:port`` on the engine's host."""
        assert self.host is not None
        local = self.host.sockets / f"p-{secrets.token_hex(6)}.sock"
        remote = f"127.0.0.1:{port}"
        await self.host.forward(local, remote)
        self._forwards.append((local, remote))
        return local


async def _remote_socket(host: SshHost) -> str:
    script = ("for s in " + " ".join(_REMOTE_SOCKETS) + "; do "
              "if [ -S \"$s\" ]; then echo \"$s\"; exit 0; fi; done; exit 1")
    done = await host.run(["sh", "-c", script], timeout_s=host.connect_s + 10)
    if done.returncode != 0 or not done.stdout.strip():
        raise EngineError(f"{host.target}: no engine socket found there (looked for "
                          f"{', '.join(_REMOTE_SOCKETS)}); name it: ssh://HOST/path/to/socket")
    return done.stdout.decode().strip().splitlines()[0]


@asynccontextmanager
async def reach_engine(config: Config, profile: AgentProfile | None = None,
                       address: EngineAddress | None = None, *,
                       keys: SshTarget | None = None) -> AsyncIterator[Reached]:
    """The engine of ``profile`` (or ``address``) made reachable here (module doc),
    over ssh with the profile's keys (or ``keys``: identity, known hosts, port);
    ``EngineError`` when it cannot be."""
    address = address or profile_engine(profile)
    if address.kind != "ssh" or address.ssh is None:
        yield Reached(address)
        return
    if profile is not None and profile.ssh is not None:
        keys = profile.ssh
    target = SshTarget(destination=address.ssh.destination,
                       port=address.ssh.port or (keys.port if keys else None),
                       identity=keys.identity if keys else None,
                       known_hosts=keys.known_hosts if keys else None)
    host = SshHost(target, control_dir(config.data_dir),
                   connect_s=config.timeouts.agentctl_connect_s)
    reached: Reached | None = None
    try:
        await host.ensure_master()
        socket = address.ssh.socket or await _remote_socket(host)
        local = host.sockets / f"e-{secrets.token_hex(6)}.sock"
        await host.forward(local, socket)
        reached = Reached(EngineAddress("unix", str(local)), host, [(local, socket)],
                          named=address)
    except OSError as exc:
        raise EngineError(str(exc)) from None
    try:
        yield reached
    finally:
        with trio.CancelScope(shield=True), \
                trio.move_on_after(config.timeouts.agentctl_connect_s):
            for local, remote in reversed(reached._forwards):
                await host.cancel_forward(local, remote)
