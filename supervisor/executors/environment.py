"""The environment an agent gets: the backend's, minus Turnvisor's secrets.

An agent runs shell commands for a model provider; whatever is in its
environment is the provider's to read.  Every executor (local, agentctl, the
agentctl daemon's own agent) builds the agent's environment here, so the list
of secrets is written once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from protocols.agentctl_wire import TOKEN_ENV

__all__ = ["PRIVATE_ENV", "agent_environment"]

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
