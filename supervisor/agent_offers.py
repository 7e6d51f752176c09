"""What each session's agent offers beyond a turn (DESIGN.md §19): its options
(model, mode, effort, ...), its slash commands, its context usage and the login
it asked for (``auth``: supervisor/session/login.py), as the
agent last said them.  Memory, written by the event pump, read by the session
DTO: an agent says them again when it starts.  What the person chose is the
store's (``Session.options``), re-applied to every agent the session starts.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AgentOffers", "with_choices"]


def with_choices(options: list[dict[str, Any]],
                 chosen: dict[str, str]) -> list[dict[str, Any]]:
    """``options`` with ``current`` set to what the person chose (when the
    agent offers that value): what the next turn runs with."""
    out = []
    for option in options:
        value = chosen.get(str(option.get("id")))
        if value is not None and value != option.get("current") and any(
                c.get("value") == value for c in option.get("choices", ())):
            option = option | {"current": value}
        out.append(option)
    return out


class AgentOffers:
    def __init__(self) -> None:
        self._options: dict[str, list[dict[str, Any]]] = {}
        self._commands: dict[str, list[dict[str, Any]]] = {}
        self._usage: dict[str, dict[str, Any]] = {}
        #: The login the agent asked for (supervisor/session/login.py), else absent.
        self._auth: dict[str, dict[str, Any]] = {}

    def options(self, session_id: str) -> list[dict[str, Any]]:
        return self._options.get(session_id, [])

    def option(self, session_id: str, option_id: str) -> dict[str, Any] | None:
        return next((o for o in self.options(session_id) if o.get("id") == option_id), None)

    def commands(self, session_id: str) -> list[dict[str, Any]]:
        return self._commands.get(session_id, [])

    def usage(self, session_id: str) -> dict[str, Any] | None:
        return self._usage.get(session_id)

    def set_options(self, session_id: str, options: list[dict[str, Any]]) -> None:
        self._options[session_id] = options

    def set_commands(self, session_id: str, commands: list[dict[str, Any]]) -> None:
        self._commands[session_id] = commands

    def set_usage(self, session_id: str, usage: dict[str, Any]) -> None:
        self._usage[session_id] = usage

    def set_auth(self, session_id: str, auth: dict[str, Any] | None) -> None:
        if auth is None:
            self._auth.pop(session_id, None)
        else:
            self._auth[session_id] = auth

    def dto(self, session_id: str, chosen: dict[str, str], live: bool) -> dict[str, Any]:
        """The session DTO's part of it (one call: it is built on every state
        change).  With its agent ``live`` the options are the agent's own (it was
        given the person's choices, and may have changed one itself since);
        without, the person's ``chosen`` values are what the next agent gets."""
        options = self.options(session_id)
        return {"options": options if live else with_choices(options, chosen),
                "commands": self.commands(session_id), "usage": self.usage(session_id),
                "auth": self._auth.get(session_id)}

    def forget(self, session_id: str) -> None:
        """The session was deleted."""
        for kept in (self._options, self._commands, self._usage, self._auth):
            kept.pop(session_id, None)
