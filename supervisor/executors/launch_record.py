"""What an agent that outlives the backend was started from, to tell a changed
profile when a later backend re-attaches to it (DESIGN.md §20).

A Pod (kubernetes) or a detached agentctl on an SSH host keeps running through
a backend restart, and the next backend re-attaches to it instead of starting
a new one: a running turn is never killed by a restart.  If the profile
changed meanwhile (its image, command, environment, resources ...), the
running agent is not what the profile now says.  So each such launch records,
per launch-relevant setting, a short hash of its value (``record``; never the
value: the environment holds keys), and a re-attach compares that record with
the profile as it is now (``changed``): the settings named there differ, and
apply only when the session's agent next starts.

Only settings that make a different agent count, per executor
(``KUBE_FIELDS``, ``SSH_FIELDS``): a changed timeout or title does not.

Where the record is kept: a Pod's annotation (kube_pod.py); for an SSH host's
agentctl, a file of the data dir per run (``RecordFiles``: written at a fresh
start, read at a re-attach, removed once the run is stopped).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..profiles import AgentProfile, KubeSettings
from .container import default_image

__all__ = ["KUBE_FIELDS", "SSH_FIELDS", "RecordFiles", "changed", "record"]


def _kube(profile: AgentProfile) -> KubeSettings:
    return profile.kube or KubeSettings()


def _volume(profile: AgentProfile) -> object:
    volume = _kube(profile).project_volume
    return None if volume is None else [volume.path, volume.host_path, volume.claim]


#: Each setting's value as the launch used it (JSON-able).
_VALUES: Final[Mapping[str, Callable[[AgentProfile], object]]] = {
    "command": lambda p: list(p.command),
    "protocol": lambda p: p.protocol,
    "env": lambda p: sorted(p.env.items()),
    "image": lambda p: p.image or default_image(),
    "resources": lambda p: {k: dict(v) for k, v in _kube(p).resources.items()},
    "service_account": lambda p: _kube(p).service_account,
    "node_selector": lambda p: dict(_kube(p).node_selector),
    "project_volume": _volume,
    "offline_cancel_s": lambda p: p.offline_cancel_s,
    "sandbox": lambda p: [p.sandbox, list(p.sandbox_writable)],
    "network": lambda p: [p.network, list(p.host_ports)],
    "home_binds": lambda p: [list(b) for b in p.home_binds],
}

#: What makes a different Pod (kube_pod.pod_manifest).
KUBE_FIELDS: Final = ("image", "command", "protocol", "env", "resources", "service_account",
                      "node_selector", "project_volume", "offline_cancel_s")
#: What makes a different agentctl on an SSH host (ssh._agentctl_args).
SSH_FIELDS: Final = ("command", "protocol", "env", "sandbox", "network", "home_binds")


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _digests(profile: AgentProfile, fields: Sequence[str]) -> dict[str, str]:
    return {name: _digest(_VALUES[name](profile)) for name in fields}


def record(profile: AgentProfile, fields: Sequence[str]) -> str:
    """The launch's record: ``{setting: hash of its value}`` as compact JSON."""
    return json.dumps(_digests(profile, fields), sort_keys=True, separators=(",", ":"))


def changed(recorded: str | None, profile: AgentProfile,
            fields: Sequence[str]) -> tuple[str, ...]:
    """The settings of ``fields`` whose value differs from the ``recorded``
    launch's, in ``fields``' order.  No record (an agent an older Turnvisor
    started), or one that is not a record: nothing is known to differ."""
    if not recorded:
        return ()
    try:
        then: Any = json.loads(recorded)
    except ValueError:
        return ()
    if not isinstance(then, dict):
        return ()
    now = _digests(profile, fields)
    # A setting the record lacks was not recorded then: not known to differ.
    return tuple(name for name in fields if name in then and then[name] != now[name])


@dataclass(frozen=True, slots=True)
class RecordFiles:
    """Launch records kept in a 0700 directory of the data dir, one per run
    name (blocking: call from a worker thread)."""

    directory: Path

    def _path(self, name: str) -> Path:
        return self.directory / f"{hashlib.sha256(name.encode()).hexdigest()[:32]}.json"

    def save(self, name: str, text: str) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self._path(name)
        part = path.with_suffix(".part")
        part.write_text(text)
        os.replace(part, path)

    def load(self, name: str) -> str | None:
        try:
            return self._path(name).read_text()
        except (FileNotFoundError, UnicodeDecodeError):
            return None

    def forget(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(name).unlink()
