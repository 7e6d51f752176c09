"""A profile's SSH keys: where the ssh executor (and a remote container engine) goes.

``[agents.NAME]`` keys (DESIGN.md §20, docs/deploy.md)::

    executor = "ssh"
    ssh = "user@host"                    # required for executor = "ssh"
    ssh_port = 2222                      # else ssh's own (22, or ~/.ssh/config)
    ssh_identity = "~/.ssh/id_ed25519"   # else ssh's own keys / agent
    ssh_known_hosts = "~/.ssh/tv_hosts"  # else ~/.ssh/known_hosts; keys always checked
    remote_turnvisor = "turnvisor"       # how Turnvisor runs on the host (may be words)

A container profile may name its engine ``docker_host = "ssh://user@host[:port][/sock]"``
(else ``DOCKER_HOST``); its ``ssh_identity`` and ``ssh_known_hosts`` apply to it.
Each key is checked here, at config load, with one line saying what is wrong.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = ["SSH_KEYS", "SshTarget", "parse_docker_host", "parse_ssh"]

SSH_KEYS: Final = ("ssh", "ssh_port", "ssh_identity", "ssh_known_hosts", "remote_turnvisor",
                   "docker_host")
#: ``[user@]host``: never an option (a leading ``-``), never a space or a shell character.
_DESTINATION: Final = re.compile(r"([A-Za-z0-9_][A-Za-z0-9._-]*@)?[A-Za-z0-9_][A-Za-z0-9._-]*")


@dataclass(frozen=True, slots=True, kw_only=True)
class SshTarget:
    #: ``user@host`` or ``host``, as ssh takes it.
    destination: str
    port: int | None = None
    identity: str | None = None
    known_hosts: str | None = None
    #: The command that runs Turnvisor on the host (split into words).
    remote_turnvisor: tuple[str, ...] = ("turnvisor",)

    @property
    def key(self) -> str:
        """One shared connection per (destination, port, identity, known hosts)."""
        return f"{self.destination}:{self.port or ''}:{self.identity or ''}:" \
               f"{self.known_hosts or ''}"

    def __str__(self) -> str:
        return self.destination + (f":{self.port}" if self.port else "")


def _file(name: str, key: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith(("/", "~/")):
        raise ValueError(f"[agents.{name}]: {key} must be an absolute path (or ~/...)")
    path = Path(value).expanduser()
    if not path.is_file():
        raise ValueError(f"[agents.{name}]: {key} {value} is not a file")
    return str(path)


def _port(name: str, key: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise ValueError(f"[agents.{name}]: {key} must be a port number (1-65535)")
    return value


def parse_ssh(name: str, raw: Mapping[str, Any], prev: SshTarget | None,
              executor: str) -> SshTarget | None:
    """The ``ssh*`` keys of one profile (``ValueError`` naming the key), merged
    over ``prev``; None unless the executor is ``ssh``.  ``ssh_identity`` and
    ``ssh_known_hosts`` (and ``ssh_port``) also serve a container profile's
    ``ssh://`` engine: they are checked here and kept for it."""
    given = [k for k in ("ssh", "remote_turnvisor") if k in raw]
    if executor not in ("ssh", "container"):
        given += [k for k in ("ssh_port", "ssh_identity", "ssh_known_hosts") if k in raw]
    if executor != "ssh" and given:
        verb = "applies" if len(given) == 1 else "apply"
        raise ValueError(f"[agents.{name}]: {', '.join(given)} only {verb} to executor = \"ssh\""
                         + (" (and ssh_* to a container's ssh:// engine)"
                            if executor != "container" else ""))
    destination = raw.get("ssh", prev.destination if prev else None)
    if executor == "ssh" and destination is None:
        raise ValueError(f"[agents.{name}]: executor = \"ssh\" needs ssh = \"user@host\"")
    if destination is not None and not (isinstance(destination, str)
                                        and _DESTINATION.fullmatch(destination)):
        raise ValueError(f"[agents.{name}]: ssh must be \"user@host\" or \"host\" (letters, "
                         "digits, '._-'; no options, no spaces)")
    remote = raw.get("remote_turnvisor", list(prev.remote_turnvisor) if prev else ["turnvisor"])
    if isinstance(remote, str):
        try:
            remote = shlex.split(remote)
        except ValueError as exc:
            raise ValueError(f"[agents.{name}]: remote_turnvisor: {exc}") from None
    if not isinstance(remote, list | tuple) or not remote or not all(
            isinstance(w, str) and w for w in remote) or remote[0].startswith("-"):
        raise ValueError(f"[agents.{name}]: remote_turnvisor must be a command (a string or "
                         "a list of words, e.g. \"/opt/venv/bin/turnvisor\")")
    target = SshTarget(
        destination=destination or "",
        port=_port(name, "ssh_port", raw.get("ssh_port", prev.port if prev else None)),
        identity=_file(name, "ssh_identity",
                       raw.get("ssh_identity", prev.identity if prev else None)),
        known_hosts=_file(name, "ssh_known_hosts",
                          raw.get("ssh_known_hosts", prev.known_hosts if prev else None)),
        remote_turnvisor=tuple(remote))
    if executor == "ssh":
        return target
    if executor == "container" and (target.identity or target.known_hosts or target.port):
        return target  # for an ssh:// engine (destination from docker_host)
    return None


def parse_docker_host(name: str, raw: Mapping[str, Any], prev: str | None,
                      executor: str) -> str | None:
    """``docker_host``: a container profile's engine (as ``DOCKER_HOST`` is)."""
    value = raw.get("docker_host", prev)
    if value is None:
        return None
    if executor != "container":
        raise ValueError(f"[agents.{name}]: docker_host only applies to executor = "
                         "\"container\"")
    if not isinstance(value, str) or not value.startswith(("unix://", "tcp://", "ssh://")):
        raise ValueError(f"[agents.{name}]: docker_host must be unix://PATH, tcp://HOST:PORT "
                         "or ssh://user@host[:port][/path/to/socket]")
    return value
