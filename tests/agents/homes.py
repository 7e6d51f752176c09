"""Throw-away homes and configs that point each real agent at the fake provider.

``launch(name, provider_url, tmp)`` returns the command, environment and cwd
to start agent ``name`` with: the built-in profile's command with its program
replaced by the binary found in the cache, and a home made in ``tmp`` whose
config sends every model request to ``provider_url`` on 127.0.0.1 and turns off
the features that would reach the network at start.

For a ``turnvisor serve`` that runs the agent (the end-to-end tests, the
benchmark): ``server_environ(spec)`` is the environment to give the server (a
profile's ``env`` is merged over it, so what the agent must not see is left
out), ``profile_table`` the ``[agents.NAME]`` table and ``agents_toml`` the
``turnvisor.toml`` text.
"""

from __future__ import annotations

import json
import os
import platform
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocols.sandbox import HOME_VARIABLES
from supervisor.profiles import BUILTIN_PROFILES

from .cli import find_cli

__all__ = ["AGENT_NAMES", "MORE_AGENT_NAMES", "Launch", "agents_toml", "launch", "profile_table",
           "server_environ"]

AGENT_NAMES = ("codex", "auggie", "claude", "gemini")
#: The ACP agents added by issue 15 (tested end to end only: tests/agents/test_more_agents.py).
MORE_AGENT_NAMES = ("codex-acp", "qwen", "opencode")

#: Variables of the surrounding environment that would send an agent elsewhere.
_DROP_PREFIXES = ("ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_",
                  "AUGMENT_", "VERTEX", "QWEN_", "DASHSCOPE_", "OPENCODE_")
_DROP = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
         # claude-agent-acp offers its bypass mode to root when set, then the CLI refuses
         # to start as root unless it is exactly "1".
         "IS_SANDBOX",
         # Set inside a Claude Code session; the CLI then runs as a nested child session.
         "CLAUDECODE"}


@dataclass
class Launch:
    name: str
    command: list[str]
    env: dict[str, str]
    cwd: str
    thread_params: dict[str, Any] = field(default_factory=dict)
    #: The host loopback ports the agent must reach inside Turnvisor's fence
    #: (its own network namespace): the fake provider's.
    host_ports: tuple[int, ...] = ()


def _base_env(home: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items()
        if k not in _DROP and not k.startswith(_DROP_PREFIXES)
    }
    env.update(HOME=str(home), NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
               XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"),
               XDG_DATA_HOME=str(home / ".local/share"), XDG_STATE_HOME=str(home / ".local/state"))
    return env


def codex_config(provider_url: str, *, subagents: bool = False) -> str:
    """``subagents``: Codex's multi-agent tools (``spawn_agent`` and the others, offered
    to the model in the ``multi_agent_v1`` namespace) are switched on explicitly with
    ``[agents] enabled`` (0.171: on by default; ``[features] multi_agent`` still works
    but is deprecated: a ``configWarning`` and a ``warning`` per thread say so)."""
    agents = "[agents]\nenabled = true\n\n" if subagents else ""
    return f"""\
model = "fake-model"
model_provider = "fake"
check_for_update_on_startup = false

{agents}[features]
plugins = false
remote_plugin = false
apps = false
daemon_auto_start = false

[analytics]
enabled = false

[model_providers.fake]
name = "fake"
base_url = "{provider_url}/v1"
wire_api = "responses"
env_key = "FAKE_PROVIDER_KEY"
request_max_retries = 0
stream_max_retries = 0
"""


def qwen_settings() -> dict[str, Any]:
    return {
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": "fake-model"},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        # Else a memory-extraction model request follows every turn.
        "memory": {"enableManagedAutoMemory": False},
        # Else a "suggest the next prompt" model request does.
        "ui": {"enableFollowupSuggestions": False},
    }


def opencode_config(provider_url: str) -> dict[str, Any]:
    """A provider of the bundled OpenAI-compatible SDK at ``provider_url``; the shell
    tool asks first (opencode's default is to allow it)."""
    return {
        "provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "fake",
            "options": {"baseURL": f"{provider_url}/v1", "apiKey": "fake-key"},
            "models": {"fake-model": {"name": "fake-model"}},
        }},
        "model": "fake/fake-model",
        "small_model": "fake/fake-model",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"bash": "ask"},
    }


def claude_settings() -> dict[str, Any]:
    return {"permissions": {"defaultMode": "default"}}


def gemini_settings() -> dict[str, Any]:
    return {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "model": {"name": "gemini-2.5-flash"},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }


def _auggie_ripgrep_stub(home: Path) -> None:
    """Auggie 0.36 downloads ripgrep from the internet at start unless
    ``~/.augment/binaries/ripgrep/v14.1.1-<target>/rg`` exists.  Give it one that
    runs the system's ``rg`` (the tests never search), so it makes no such attempt."""
    target = {"x86_64": "linux-x64", "aarch64": "linux-arm64"}.get(platform.machine())
    if target is None:
        return
    rg = home / ".augment" / "binaries" / "ripgrep" / f"v14.1.1-{target}" / "rg"
    rg.parent.mkdir(parents=True, exist_ok=True)
    rg.write_text('#!/bin/sh\nexec rg "$@"\n')
    rg.chmod(0o755)


def launch(name: str, provider_url: str, tmp: Path, *, persist: bool = False) -> Launch | None:
    """None when the agent's CLI is not installed.  ``persist``: the agent keeps
    its sessions (Codex rollouts, Auggie's saved sessions) so a later process
    can restore them; by default they are throw-away."""
    binary = find_cli(name)
    if binary is None:
        return None
    profile = BUILTIN_PROFILES[name]
    home = tmp / f"{name}-home"
    work = tmp / f"{name}-work"
    home.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    env = _base_env(home)
    env.update(profile.env)
    command = [binary, *profile.command[1:]]
    thread_params: dict[str, Any] = dict(profile.thread_params)

    if name in ("codex", "codex-acp"):
        codex_home = home / ".codex"
        codex_home.mkdir(exist_ok=True)
        # codex-acp bundles its own Codex; only the pinned CLI is known to take [agents].
        config = codex_config(provider_url, subagents=name == "codex")
        if name == "codex-acp":
            # codex-acp 2.x sets Codex's approval policy from its session mode; the
            # default ("agent") sends approvals to Codex's own reviewer model, and its
            # config no longer takes "untrusted".  "workspace-write" asks the user
            # before anything outside the workspace sandbox, which the fake model's
            # command asks for (exec_command's sandbox_permissions: fake_provider).
            env["INITIAL_AGENT_MODE"] = "workspace-write"
        (codex_home / "config.toml").write_text(config)
        env.update(CODEX_HOME=str(codex_home), FAKE_PROVIDER_KEY="fake-key")
        if name == "codex" and not persist:
            thread_params["ephemeral"] = True
    elif name == "qwen":
        qwen_dir = home / ".qwen"
        qwen_dir.mkdir(exist_ok=True)
        (qwen_dir / "settings.json").write_text(json.dumps(qwen_settings()))
        env.update(OPENAI_API_KEY="fake-key", OPENAI_BASE_URL=f"{provider_url}/v1",
                   OPENAI_MODEL="fake-model", QWEN_CODE_NO_RELAUNCH="true")
    elif name == "opencode":
        config_dir = home / ".config" / "opencode"
        config_dir.mkdir(parents=True, exist_ok=True)
        (config_dir / "opencode.json").write_text(json.dumps(opencode_config(provider_url)))
        # Each of these would otherwise reach the network at start (model catalogue,
        # updates, default plugins from npm, language servers, sharing).
        env.update({f"OPENCODE_DISABLE_{what}": "1" for what in (
            "MODELS_FETCH", "AUTOUPDATE", "DEFAULT_PLUGINS", "LSP_DOWNLOAD", "SHARE",
            "CLAUDE_CODE", "EXTERNAL_SKILLS")})
    elif name == "claude":
        config_dir = home / ".claude"
        config_dir.mkdir(exist_ok=True)
        # The built-in default mode is "auto" (a model classifier approves tools);
        # "default" asks the client, which is what a supervisor with a person wants.
        (config_dir / "settings.json").write_text(json.dumps(claude_settings()))
        env.update(
            ANTHROPIC_BASE_URL=provider_url,
            ANTHROPIC_API_KEY="fake-key",
            CLAUDE_CONFIG_DIR=str(config_dir),
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_TELEMETRY="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_ERROR_REPORTING="1",
        )
    elif name == "gemini":
        gemini_dir = home / ".gemini"
        gemini_dir.mkdir(exist_ok=True)
        (gemini_dir / "settings.json").write_text(json.dumps(gemini_settings()))
        env.update(
            GEMINI_API_KEY="fake-key",
            GOOGLE_GEMINI_BASE_URL=provider_url,
            GEMINI_CLI_NO_RELAUNCH="true",
        )
    elif name == "auggie":
        session = {"accessToken": "fake-token", "tenantURL": f"{provider_url}/",
                   "scopes": ["read", "write"]}
        command += ["--augment-session-json", json.dumps(session)]
        if not persist:
            command.append("--dont-save-session")
        env.update(AUGMENT_DISABLE_AUTO_UPDATE="1")
        _auggie_ripgrep_stub(home)
    return Launch(name=name, command=command, env=env, cwd=str(work),
                  thread_params=thread_params,
                  host_ports=(urllib.parse.urlsplit(provider_url).port or 80,))


def server_environ(spec: Launch) -> dict[str, str]:
    """The environment of a server that runs ``spec``'s agent: the current one without
    the variables the agent must not inherit (the profile's env is merged over it)."""
    return {k: v for k, v in os.environ.items() if k in spec.env}


def profile_table(spec: Launch, server_env: Mapping[str, str],
                  thread_params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``[agents.NAME]`` table that overrides the built-in profile with ``spec``."""
    table: dict[str, Any] = {
        "command": list(spec.command),
        # The homes always named: a home the server merely inherits is the
        # person's, which Turnvisor never gives an agent (DESIGN.md §17).
        "env": {k: v for k, v in spec.env.items()
                if server_env.get(k) != v or k in HOME_VARIABLES},
        "cwd": spec.cwd,
        "host_ports": list(spec.host_ports),
    }
    params = {**spec.thread_params, **(thread_params or {})}
    if params:
        table["thread_params"] = params
    return table


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        # A JSON string is a valid TOML basic string (UTF-8 kept as is).
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}"
                                for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def agents_toml(tables: Mapping[str, Mapping[str, Any]]) -> str:
    """``turnvisor.toml`` text with one ``[agents.NAME]`` table each."""
    lines: list[str] = []
    for name, table in tables.items():
        lines.append(f"[agents.{name}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in table.items()]
        lines.append("")
    return "\n".join(lines)
