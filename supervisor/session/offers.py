"""What an agent offers beyond a turn, taken in and used (DESIGN.md §19).

The event pump hands over the agent's options, slash commands, context usage
and title (``take``); the person sets an option (``choose``), which reaches
the agent at once where it allows that (ACP's ``session/set_config_option``,
``set_mode``, ``set_model``) or with the next turn (Codex's ``turn/start``),
and is kept with the session so that every agent the session starts later
gets it again (``reapply``, after its start or its restore).  An agent's title
names the session unless the person named it.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import trio

from protocols.adapters import AgentClosed, AgentRequestError, AgentTimeout
from protocols.events import CommandsChanged, OptionsChanged, TitleChanged, UsageUpdated

from ..agent_offers import with_choices
from ..config import Timeouts
from ..errors import Conflict, InvalidRequest
from ..models import Session
from ..notify import Notifier
from ..storage.db import StoreError
from ..storage.store import Store
from ..turn.execution_state import Execution

__all__ = ["OFFER_EVENTS", "Offers"]

log = logging.getLogger(__name__)

#: The agent events this module takes from the pump.
OFFER_EVENTS: Final = (OptionsChanged, CommandsChanged, UsageUpdated, TitleChanged)
#: An agent's title, at most (one line).
TITLE_CHARS: Final = 200


class Offers:
    def __init__(self, timeouts: Timeouts, store: Store, notifier: Notifier) -> None:
        self.timeouts = timeouts
        self.store = store
        self.notify = notifier
        self.offers = notifier.offers

    async def take(self, ex: Execution, event: object) -> None:
        """One of ``OFFER_EVENTS`` from the session's agent."""
        sid = ex.session_id
        match event:
            case OptionsChanged(options=options):
                self.offers.set_options(sid, [dict(o) for o in options])
                self.notify.options_changed(sid, self.offers.options(sid))
            case CommandsChanged(commands=commands):
                self.offers.set_commands(sid, [dict(c) for c in commands])
                self.notify.commands_changed(sid)
            case UsageUpdated(usage=usage):
                self.offers.set_usage(sid, dict(usage))
                turn_id = ex.turn.id if ex.turn is not None and ex.turn.id else None
                if turn_id is not None:
                    try:
                        await self.store.set_turn_usage(turn_id, dict(usage))
                    except StoreError as exc:  # the DTO has it; the turn's record waits
                        log.warning("session %s: turn %s's usage not kept: %s", sid, turn_id,
                                    exc)
                self.notify.usage_changed(sid, turn_id)
            case TitleChanged(title=title):
                said = " ".join(title.split())[:TITLE_CHARS]
                if said:
                    try:
                        await self.store.set_agent_title(sid, said)
                    except StoreError as exc:
                        log.warning("session %s: the agent's title not kept: %s", sid, exc)

    async def choose(self, ex: Execution | None, session: Session, option_id: str,
                     value: str) -> str:
        """The person's choice: ``"now"`` (the agent took it) or ``"next_turn"``
        (its next turn runs with it: no agent runs now, or the agent takes it
        with its next turn).  Refused before anything is sent when the agent
        does not offer that option or value."""
        sid = session.id
        offered = self.offers.option(sid, option_id)
        if offered is None:
            known = ", ".join(str(o.get("id")) for o in self.offers.options(sid)) or "none yet"
            raise InvalidRequest(f"the agent offers no option {option_id!r} (its options: "
                                 f"{known}; an agent says them when it starts)")
        values = [str(c.get("value")) for c in offered.get("choices", ())]
        if value not in values:
            raise InvalidRequest(f"{value!r} is not a choice of {option_id!r}: "
                                 f"{', '.join(values)}")
        applied = "next_turn"
        if ex is not None and not ex.stopped.is_set():
            try:
                with trio.fail_after(self.timeouts.agent_request_s):
                    applied = await ex.adapter.set_option(option_id, value)
            except ValueError as exc:
                raise InvalidRequest(str(exc)) from None
            except (AgentClosed, AgentTimeout, AgentRequestError, trio.TooSlowError) as exc:
                raise Conflict(f"the agent did not take {option_id} = {value}: "
                               f"{exc or 'no answer in time'}") from None
        await self.store.choose_option(sid, option_id, value)
        if ex is None or ex.stopped.is_set():
            # No agent to say it: the options as the next one will get them.
            options = with_choices(self.offers.options(sid), {option_id: value})
            self.offers.set_options(sid, options)
            self.notify.options_changed(sid, options)
        return applied

    async def reapply(self, ex: Execution, chosen: dict[str, Any]) -> None:
        """The person's choices, to a freshly started (or restored) agent; one
        the agent no longer offers is left out, with a line in the log."""
        for option_id, value in chosen.items():
            try:
                with trio.fail_after(self.timeouts.agent_request_s):
                    await ex.adapter.set_option(str(option_id), str(value))
            except (ValueError, AgentClosed, AgentTimeout, AgentRequestError,
                    trio.TooSlowError) as exc:
                log.warning("session %s: its choice %s = %s was not applied: %s",
                            ex.session_id, option_id, value, exc or "no answer in time")
