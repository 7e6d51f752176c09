"""Where scripts/install_agents.sh put the agent CLIs (tests only)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["AGENTS_DIR", "find_cli"]

AGENTS_DIR = Path(
    os.environ.get("TURNVISOR_AGENTS_DIR") or Path.home() / ".cache" / "turnvisor" / "agents"
)

_CODEX_NATIVE = (
    "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
)
_BINS = {
    "codex": "codex",
    "auggie": "auggie",
    "claude": "claude-agent-acp",
    "gemini": "gemini",
    "codex-acp": "codex-acp",
    "qwen": "qwen",
    "opencode": "opencode",
}


def find_cli(name: str) -> str | None:
    """The agent's executable in the cache, or None when it is not installed.

    For Codex the native binary is preferred over the node launcher (one
    process fewer, faster to start); codex-acp 2.x is a node program (it runs
    the Codex app-server it depends on)."""
    prefix = AGENTS_DIR / name
    native = {"codex": _CODEX_NATIVE}.get(name)
    if native is not None and os.access(prefix / native, os.X_OK):
        return str(prefix / native)
    path = prefix / "node_modules" / ".bin" / _BINS[name]
    return str(path) if os.access(path, os.X_OK) else None
