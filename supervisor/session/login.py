"""An agent that needs a login before it opens a session (DESIGN.md §19).

Its start is not a failure: ``needed`` keeps the methods it offers (the
session DTO's ``auth``), puts the session back to waiting, and a message sent
meanwhile is refused at once (``check``: no agent is started only to be told
the same) with a sentence naming ``agent.login``.  The person chooses a method
(``login``): the session's agent is started again with it, ``log_in`` runs
between ``initialize`` and the session's opening, and the start goes on from
there; its success clears ``auth``, a refusal keeps it and says why.

Where a key goes (never the store, the log or an event: it lives in this
object only while that one start runs):

- an ``env_var`` method: the agent's environment for that start (``env``), as
  the ACP auth RFD documents; the agent keeps it in its own home if it wants;
- gemini's ``_meta["api-key"]`` method and Codex's ``apiKey``: the
  ``authenticate`` / ``account/login/start`` parameters.

A ``terminal`` method says what to run (the agent's command with the method's
arguments, with the agent's private home as ``HOME``); choosing it after
running that retries the start.  An ``agent`` method is the agent's own
doing (a browser it opens): choosing it sends ``authenticate`` and waits (the
adapter's ``session_s``) for the agent to report the outcome.
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from protocols.acp_auth import AuthMethod, AuthRequired
from protocols.adapters import AgentAdapter, AgentRequestError
from protocols.events import TurnEnded

from ..config import Config
from ..errors import AgentStartError, Conflict, InvalidRequest
from ..models import Session
from ..notify import Notifier
from ..storage.store import Store
from ..turn.execution_state import Execution
from ..workspace.sandboxing import agent_home
from . import states

__all__ = ["AgentLoginRequired", "Logins"]

log = logging.getLogger(__name__)


class Starts(Protocol):
    """What a login needs of ``Executions`` (supervisor/session/execution.py)."""

    async def stop_execution(self, session_id: str) -> None: ...
    async def ensure_execution(self, session: Session) -> Execution: ...


class AgentLoginRequired(AgentStartError):
    """The agent asked for a login before it opens a session."""

    def __init__(self, methods: tuple[AuthMethod, ...], detail: str = "") -> None:
        names = ", ".join(m.name for m in methods) or "none offered"
        super().__init__(f"the agent needs a login first ({detail or 'auth_required'}); "
                         f"log it in with agent.login (its methods: {names})")
        self.methods = methods
        self.detail = detail


@dataclass(frozen=True, slots=True)
class _Pending:
    method: AuthMethod
    key: str | None


class Logins:
    def __init__(self, config: Config, store: Store, notifier: Notifier) -> None:
        self.config = config
        self.store = store
        self.notify = notifier
        #: Sessions whose agent asked for a login: the methods it offers.
        self._required: dict[str, tuple[AuthMethod, ...]] = {}
        #: The login chosen for the start running now (its key only until then).
        self._pending: dict[str, _Pending] = {}
        #: A launch's first prompt, sent once the agent is logged in (memory only).
        self._prompts: dict[str, str] = {}

    def keep_prompt(self, session_id: str, prompt: str | None) -> None:
        if prompt:
            self._prompts[session_id] = prompt

    def take_prompt(self, session_id: str) -> str | None:
        """The launch's prompt kept for after the login (once)."""
        return self._prompts.pop(session_id, None)

    def required(self, session_id: str) -> tuple[AuthMethod, ...] | None:
        return self._required.get(session_id)

    def check(self, session_id: str) -> None:
        """Refuse to start an agent that asked for a login nobody has given yet."""
        methods = self._required.get(session_id)
        if methods is not None and session_id not in self._pending:
            raise AgentLoginRequired(methods, "it said so when it last started")

    def env(self, session_id: str, env: Mapping[str, str]) -> Mapping[str, str]:
        """The agent's environment for this start: an ``env_var`` key in its variable."""
        pending = self._pending.get(session_id)
        if pending is None or pending.method.var_name is None or not pending.key:
            return env
        return {**env, pending.method.var_name: pending.key}

    async def log_in(self, session_id: str, adapter: AgentAdapter) -> None:
        """Between ``initialize`` and the session's opening: the chosen login."""
        pending = self._pending.get(session_id)
        if pending is None:
            return
        try:
            await adapter.login(pending.method.id, pending.key)
        except (AgentRequestError, ValueError) as exc:
            said = str(exc.details or exc.message if isinstance(exc, AgentRequestError) else exc)
            if pending.key:  # an agent that quotes the key it refused: not passed on
                said = said.replace(pending.key, "[the key]")
            raise AgentLoginRequired(self._required.get(session_id, (pending.method,)),
                                     f"{pending.method.name}: {said}") from None

    async def asked_at_restore(self, session_id: str, exc: AuthRequired) -> TurnEnded:
        """A restored agent asked for a login (it was logged out since): its turn
        ends with that said, and the session waits for a login (the agent is
        replaced before the next start: the restore left it unknown)."""
        session = await self.store.get_session(session_id)
        if session is not None:
            await self.needed(session, AgentLoginRequired(exc.methods, str(exc)))
        return TurnEnded(stop_reason="error",
                         error=str(AgentLoginRequired(exc.methods, str(exc))))

    async def needed(self, session: Session, exc: AgentLoginRequired) -> AgentLoginRequired:
        """The agent asked for a login: the session waits for one (not failed)."""
        profile = self.config.profiles.get(session.agent)
        if exc.methods or session.id not in self._required:
            self._required[session.id] = exc.methods
        methods = self._required[session.id]
        log.info("session %s: agent %s needs a login (%s)", session.id, session.agent,
                 exc.detail)
        # Where a login done in a terminal lands for the agent: its private home, unless
        # it sees its login in yours (``home_binds``: then your home, as you run it).
        home = (None if profile is None or profile.home_binds else
                str(agent_home(self.config, session.workspace_id, session.agent)))
        self.notify.offers.set_auth(session.id, {"required": True, "methods": [
            m.dto() | {"command": _command(m, profile.command if profile else (),
                                            profile.protocol if profile else "acp", home)}
            for m in methods],
            # Why a login the person chose did not work (the agent's first ask is no error).
            "error": exc.detail if session.id in self._pending else None})
        changed = await states.login_needed(self.store, session.id)
        self.notify.state_changed(changed or session)
        return exc

    async def login(self, executions: Starts, session: Session, method_id: str,
                    key: str | None) -> None:
        """The person's login: the agent started again with it (bounded by the
        start's own bounds); ``Conflict`` saying why when it is still not in."""
        methods = self._required.get(session.id)
        if methods is None:
            raise Conflict("this session's agent has not asked for a login")
        method = next((m for m in methods if m.id == method_id), None)
        if method is None:
            raise InvalidRequest(f"the agent offers no login method {method_id!r} (its "
                                 f"methods: {', '.join(m.id for m in methods)})")
        if method.kind == "key" and not key:
            raise InvalidRequest(f"{method.name} needs a key")
        if method.kind != "key" and key:
            raise InvalidRequest(f"{method.name} takes no key")
        if session.id in self._pending:
            raise Conflict("a login of this session is already under way")
        self._pending[session.id] = _Pending(method, key)
        try:
            await executions.stop_execution(session.id)
            ex = await executions.ensure_execution(session)
        except AgentLoginRequired as exc:
            raise Conflict(f"not logged in: {exc.detail}") from None
        finally:
            del self._pending[session.id]  # the key with it
        if method.var_name is not None:
            # Its running agent's profile drops the key too (only that start needed it):
            # the variable as the profile itself sets it, if it does.
            env = {k: v for k, v in ex.profile.env.items() if k != method.var_name}
            configured = self.config.profiles.get(session.agent)
            if configured is not None and method.var_name in configured.env:
                env[method.var_name] = configured.env[method.var_name]
            ex.profile = dataclasses.replace(ex.profile, env=env)
        self._required.pop(session.id, None)
        self.notify.offers.set_auth(session.id, None)
        fresh = await self.store.get_session(session.id)
        self.notify.state_changed(fresh or session)


def _command(method: AuthMethod, command: tuple[str, ...] | list[str], protocol: str,
             home: str | None) -> str | None:
    """What the person runs for a ``terminal`` method: the agent's command with
    the method's arguments (Codex: its program with them, ``codex login``), in
    the agent's private ``home`` (None: the person's own)."""
    if method.kind != "terminal" or not command:
        return None
    argv: list[Any] = ([command[0]] if protocol == "codex" else list(command))
    env = [f"{k}={v}" for k, v in ((("HOME", home),) if home else ()) + method.env]
    return shlex.join([*(["env", *env] if env else []), *argv, *method.args])
