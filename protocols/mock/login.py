"""The mock agent's login (``--login``, the ``mock-login`` profile; DESIGN.md §19).

Logged out, it answers every ``session/new``/``load``/``resume`` with ACP's
``auth_required`` (-32000), and offers two methods in ``initialize``'s
``authMethods``:

- ``mock-key`` (``type: "env_var"``, ``varName: MOCK_AGENT_API_KEY``): the key is
  read from its environment at ``authenticate``; a key not starting ``mk-`` is
  refused (a wrong key).
- ``mock-terminal`` (``type: "terminal"``, ``args: ["--sign-in"]``): the person
  runs the agent's command with ``--sign-in``, which signs in and exits;
  ``authenticate`` then succeeds (and fails before it).

Codex: ``account/read`` says logged out (``account: null``,
``requiresOpenaiAuth: true``); ``account/login/start {type: "apiKey", apiKey}``
signs in with the same rule, then ``account/login/completed``.

Signed in is a file in the agent's own home (``~/.turnvisor-mock-login``),
holding the method and, for a key, its SHA-256 (never the key): every later
process of that home is signed in, as a real agent's stored login is.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Final

from .base import Agent

__all__ = ["KEY_VARIABLE", "MARKER", "acp_methods", "intercept", "sign_in", "signed_in"]

KEY_VARIABLE: Final = "MOCK_AGENT_API_KEY"
MARKER: Final = ".turnvisor-mock-login"
AUTH_REQUIRED: Final = -32000
_OPENING: Final = frozenset({"session/new", "session/load", "session/resume"})


def _marker() -> Path:
    return Path.home() / MARKER


def signed_in() -> dict[str, Any] | None:
    """What the home's sign-in says (None: signed out)."""
    try:
        said = json.loads(_marker().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return said if isinstance(said, dict) else None


def sign_in(method: str, key: str | None = None) -> None:
    """Signed in, in the agent's home (0600; the key's hash, never the key)."""
    said: dict[str, Any] = {"method": method}
    if key is not None:
        said["key_sha256"] = hashlib.sha256(key.encode()).hexdigest()
    path = _marker()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(said, out)


def acp_methods(agent: Agent) -> list[dict[str, Any]]:
    if not agent.login:
        return []
    return [
        {"id": "mock-key", "name": "Mock API key", "type": "env_var",
         "description": "A key starting mk-", "varName": KEY_VARIABLE},
        {"id": "mock-terminal", "name": "Sign in from a terminal", "type": "terminal",
         "description": "Run the mock agent with --sign-in", "args": ["--sign-in"]},
    ]


def _key_refusal(key: str | None) -> str | None:
    if not key:
        return "no key given"
    if not key.startswith("mk-"):
        # Quoted, as some agents do: a client must not pass it on.
        return f"the key {key!r} is not valid (a mock key starts mk-)"
    return None


def intercept(agent: Agent, rid: int | str, method: str, params: dict[str, Any]) -> bool:
    """Answer ``method`` as the login has it; False: not a login matter."""
    if not agent.login:
        return False
    if method in _OPENING and agent.wire.protocol == "acp" and signed_in() is None:
        agent.error(rid, AUTH_REQUIRED, "Authentication required")
        return True
    match method:
        case "authenticate":
            _authenticate(agent, rid, params.get("methodId"))
        case "account/read":
            agent.respond(rid, {"account": {"type": "apiKey"} if signed_in() else None,
                                "requiresOpenaiAuth": True})
        case "account/login/start":
            _codex_login(agent, rid, params)
        case _:
            return False
    return True


def _authenticate(agent: Agent, rid: int | str, method: object) -> None:
    if method == "mock-key":
        key = os.environ.get(KEY_VARIABLE)
        refusal = _key_refusal(key)
        if refusal is not None:
            agent.error(rid, -32602, f"mock-key: {refusal}")
            return
        sign_in("mock-key", key)
        agent.respond(rid, {})
    elif method == "mock-terminal":
        if signed_in() is None:
            agent.error(rid, -32603, "not signed in: run the agent with --sign-in first")
            return
        agent.respond(rid, {})
    else:
        agent.error(rid, -32602, f"unknown auth method {method!r}")


def _codex_login(agent: Agent, rid: int | str, params: dict[str, Any]) -> None:
    if params.get("type") != "apiKey":
        agent.error(rid, -32602, "the mock signs in with an API key only")
        return
    key = params.get("apiKey")
    refusal = _key_refusal(key if isinstance(key, str) else None)
    if refusal is not None:
        agent.error(rid, -32602, refusal)
        return
    sign_in("apiKey", str(key))
    agent.respond(rid, {"type": "apiKey"})
    agent.notify("account/login/completed", {"loginId": None, "success": True, "error": None})
