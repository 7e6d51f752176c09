"""A re-attached agent whose profile changed since it was started, told to the
session (DESIGN.md §20).

After a backend restart the ssh and kubernetes executors re-attach to the
agent a previous backend started (its turn runs on: a restart never kills
it).  When the profile's launch settings changed meanwhile
(``LaunchedAgent.profile_changed``, executors/launch_record.py), the person
would otherwise be running something else than the profile says, silently:
the session's DTO names the settings (``profile_changed``) for as long as
that agent runs, and its transcript gets a warning notice saying so and when
the change applies.
"""

from __future__ import annotations

import logging
from typing import Final

from ..agent_status import AgentStatus
from ..storage.store import Store

__all__ = ["PROFILE_CHANGED_META", "tell_profile_changed"]

log = logging.getLogger(__name__)

#: The notice's metadata (besides ``profile_changed``: the settings).
PROFILE_CHANGED_META: Final = {"variant": "warning"}


async def tell_profile_changed(store: Store, status: AgentStatus, session_id: str,
                               profile: str, changed: tuple[str, ...],
                               idle_agent_s: float) -> None:
    """Say that the running agent predates a change of ``changed`` settings of
    ``profile`` (nothing when none changed)."""
    if not changed:
        return
    status.profile_changed(session_id, changed)
    names = ", ".join(changed)
    log.warning("session %s: its agent was started before profile %r changed (%s)",
                session_id, profile, names)
    idle = f"{idle_agent_s / 60:g} min" if idle_agent_s >= 60 else f"{idle_agent_s:g} s"
    await store.add_message(
        session_id, None, "system", "status",
        f"Profile {profile!r} changed since this agent started ({names}): it runs on as "
        "started; the change applies when the session's agent restarts (after "
        f"{idle} without a turn, or when the backend stops with no turn running).",
        {**PROFILE_CHANGED_META, "profile_changed": list(changed)})
