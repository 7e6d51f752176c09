"""The environment an agent gets: the backend's, minus Turnvisor's secrets.

An agent runs shell commands for a model provider; whatever is in its
environment is the provider's to read.  Every executor (local, agentctl, the
agentctl daemon's own agent) builds the agent's environment here, so the list
of secrets is written once.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable, Mapping

from protocols.agentctl_wire import TOKEN_ENV
from protocols.sandbox import HOME_VARIABLES, HomeBind

__all__ = ["PRIVATE_ENV", "agent_environment", "private_home", "private_home_environment"]

#: Variables of the backend's (or agentctl's) environment that agents never inherit.
PRIVATE_ENV = frozenset({"TURNVISOR_TOKEN", TOKEN_ENV})


def agent_environment(overrides: Mapping[str, str] = {},
                      base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without the private
    variables, with ``overrides`` (a profile's ``env``) merged over it."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if k not in PRIVATE_ENV}
    env.update(overrides)
    return env


#: Where each home variable points under the private home (None: unset; the
#: agent's default under ``HOME`` then applies, or its private /tmp).
_UNDER_HOME = {"XDG_CONFIG_HOME": ".config", "XDG_CACHE_HOME": ".cache",
               "XDG_DATA_HOME": ".local/share", "XDG_STATE_HOME": ".local/state"}


def private_home_environment(env: Mapping[str, str], explicit: Mapping[str, str],
                             home: str) -> dict[str, str]:
    """``env`` with every home variable the person did not set in the profile
    (``explicit``) pointed into ``home``, the agent's private one: the
    backend's own ``HOME``, ``CODEX_HOME``, ``XDG_RUNTIME_DIR`` ... name the
    person's real home and session, which an agent must not write."""
    out = dict(env)
    for name in HOME_VARIABLES:
        if name in explicit:
            continue
        if name == "HOME":
            out[name] = home
        elif name in _UNDER_HOME:
            out[name] = os.path.join(home, _UNDER_HOME[name])
        else:
            out.pop(name, None)
    return out


def private_home(env: Mapping[str, str], explicit: Mapping[str, str], home: str,
                 home_binds: Iterable[tuple[str, bool]]) -> tuple[dict[str, str], list[HomeBind]]:
    """A sandboxed agent's environment with its private ``home``
    (``private_home_environment``), and what it needs of the person's real home
    (``home_binds``: ``(path under ~, writable)``), bound over the same place in
    the private one.  A profile that names its own ``HOME`` keeps the agent's
    config there: no binds."""
    if "HOME" in explicit:
        return private_home_environment(env, explicit, home), []
    real_home = pwd.getpwuid(os.getuid()).pw_dir.rstrip("/")
    return (private_home_environment(env, explicit, home),
            [HomeBind(f"{real_home}/{rel}", rel, writable) for rel, writable in home_binds])
