"""Where the mock agent keeps its sessions, so that a new mock process can restore them.

A session is ``{"id", "protocol", "cwd", "messages": [{"role": "user"|"agent", "text"}],
"options": {"mode", "model"}}`` (the option values, protocols/mock/options.py).
``SessionStore`` keeps one JSON file per session in the state directory (what
``python -m protocols.mock_agent`` uses); ``MemoryStore`` keeps them in a dict (the
in-process twin of the tests, whose agents share one store as processes share a directory).
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Protocol

__all__ = ["STATE_DIR_ENV", "MemoryStore", "SessionStore", "Store"]

STATE_DIR_ENV = "MOCK_AGENT_STATE_DIR"
#: What a session id must look like to name a file (ours are UUIDs).
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
#: Temporary file names unique within this process (one writer at a time, but say so).
_TMP_SEQ = itertools.count()


class Store(Protocol):
    def load(self, session_id: str) -> dict[str, Any] | None: ...

    def save(self, session: dict[str, Any]) -> None: ...


class SessionStore:
    """The state directory: one JSON file per agent session.

    Each write goes to a temporary file that replaces the old one, so a reader
    (a new mock process) sees the previous or the next version, never half of
    one.  A directory we cannot write is reported on stderr and otherwise
    ignored: persistence must not break the agent."""

    @classmethod
    def from_environment(cls) -> SessionStore:
        """``$MOCK_AGENT_STATE_DIR``, else ``turnvisor-mock-agent/`` in the
        user's state directory (``$XDG_STATE_HOME``, ``~/.local/state``), as
        real agents keep theirs in their home: never in the working directory,
        which is the user's project (its files are the turn's changes)."""
        explicit = os.environ.get(STATE_DIR_ENV)
        if explicit:
            return cls(Path(explicit))
        base = os.environ.get("XDG_STATE_HOME") or (
            os.path.join(os.environ["HOME"], ".local", "state") if os.environ.get("HOME")
            else os.path.join(os.getcwd(), ".mock-agent-state"))
        return cls(Path(base) / "turnvisor-mock-agent")

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, session_id: str) -> Path | None:
        if not _SAFE_ID.fullmatch(session_id):
            return None
        return self.directory / f"{session_id}.json"

    def load(self, session_id: str) -> dict[str, Any] | None:
        path = self.path(session_id)
        if path is None:
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("messages"), list) else None

    def save(self, session: dict[str, Any]) -> None:
        path = self.path(str(session["id"]))
        if path is None:
            return
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{next(_TMP_SEQ)}.tmp")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(session), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            sys.stderr.write(f"mock agent: cannot save session {session['id']}: {exc}\n")
            sys.stderr.flush()


class MemoryStore:
    """Sessions in a dict; copies go in and out, as a file would give them."""

    def __init__(self) -> None:
        self.sessions: dict[str, dict[str, Any]] = {}

    def load(self, session_id: str) -> dict[str, Any] | None:
        found = self.sessions.get(session_id)
        return copy.deepcopy(found) if found is not None else None

    def save(self, session: dict[str, Any]) -> None:
        self.sessions[str(session["id"])] = copy.deepcopy(session)
