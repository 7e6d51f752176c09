"""``--executor``: the mock profiles on another executor, as the served
backend's ``turnvisor.toml`` (bench.cancel_latency).

- ``local``: the built-in profiles (the agent is the server's child);
- ``agentctl``: a local ``turnvisor agentctl`` spawned per session;
- ``container``: an agentctl in a container per session (``executor =
  "container"``), of ``image`` (default: the tag scripts/build_agent_image.sh
  builds for this checkout), on the engine ``DOCKER_HOST`` names.
"""

from __future__ import annotations

import subprocess

from .floors import REPO_ROOT

__all__ = ["EXECUTORS", "executor_toml", "image_tag"]

EXECUTORS = ("local", "agentctl", "container")
#: The mock profiles and their mock agent's arguments.
_MOCKS = {"mock": ("--protocol", "acp"), "mock-codex": ("--protocol", "codex"),
          "mock-acp2": ("--protocol", "acp", "--acp-version", "2")}


def image_tag() -> str:
    out = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "build_agent_image.sh"),
                          "--print-tag"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def executor_toml(executor: str, image: str | None = None) -> str | None:
    if executor == "local":
        return None
    lines: list[str] = []
    for name, args in _MOCKS.items():
        lines += [f"[agents.{name}]", f'executor = "{executor}"']
        if executor == "container":
            argv = ", ".join(f'"{a}"' for a in ("python", "-m", "protocols.mock_agent", *args))
            lines += [f'image = "{image or image_tag()}"', f"command = [{argv}]"]
    return "\n".join(lines) + "\n"
