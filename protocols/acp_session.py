"""What an ACP session offers and says of itself, kept for ``AcpClient`` (protocols/acp.py).

Options (DESIGN.md §19): the ones a ``session/new``/``load``/``resume`` answer
offers (``configOptions``, else the legacy ``modes``/``models``: the mapping is
protocols/session_options.py), replaced whole by the agent's
``config_option_update``, moved by its ``current_mode_update`` (and a
``current_model_update``, should an agent send one), and set by us:
``session/set_config_option {sessionId, configId, value}`` (v2 adds ``type:
"id"``), answered with every option as it now is; for the legacy shapes
``session/set_mode {sessionId, modeId}`` / ``session/set_model {sessionId,
modelId}``, answered ``{}``, after which the option's current value is the one
set.  A value that is not among the option's choices is refused before
anything is sent.  Each change is one ``OptionsChanged`` with every option;
an update that changes nothing emits none.

Also read here: ``available_commands_update`` → ``CommandsChanged``,
``usage_update`` → ``UsageUpdated``, ``session_info_update`` with a title →
``TitleChanged``.
"""

from __future__ import annotations

from typing import Any, Final

from . import session_options as so
from .events import (
    AgentEvent,
    AgentNotice,
    CommandsChanged,
    OptionsChanged,
    OtherUpdate,
    TitleChanged,
    UsageUpdated,
)
from .jsonrpc import ErrorResponse, LocalProtocolError, RequestId, Response, RpcConnection

__all__ = ["SESSION_KINDS", "SessionState"]

#: The ``session/update`` kinds this module reads.
SESSION_KINDS: Final = frozenset({
    "config_option_update", "current_mode_update", "current_model_update",
    "available_commands_update", "usage_update", "session_info_update",
})
#: Legacy option id → (method, the param naming the value).
_LEGACY_SET: Final = {"mode": ("session/set_mode", "modeId"),
                      "model": ("session/set_model", "modelId")}


class SessionState:
    def __init__(self) -> None:
        #: The options as last offered or changed (empty: none offered).
        self.options: tuple[so.Option, ...] = ()
        #: They came as the legacy ``modes``/``models`` (set with set_mode/set_model).
        self.legacy = False
        #: Our pending sets: rpc id → (option id, value).
        self.pending: dict[RequestId, tuple[str, str]] = {}

    def _replace(self, options: tuple[so.Option, ...]) -> list[AgentEvent]:
        if options == self.options:
            return []
        self.options = options
        return [OptionsChanged(options=options)]

    def offered(self, result: Any) -> list[AgentEvent]:
        """A session answer's options (none if it offers none: the last ones stay)."""
        found = so.from_session_result(result)
        if found is None:
            return []
        self.legacy = found[1]
        if found[0] == self.options:
            # A restore offers again what is known: the caller still learns them.
            return [OptionsChanged(options=found[0])] if found[0] else []
        return self._replace(found[0])

    def set_request(self, rpc: RpcConnection, session_id: str | None, option_id: str,
                    value: str, version: int) -> tuple[int, bytes]:
        """The request setting ``option_id`` to ``value``; ValueError (nothing
        sent) for an option or value the agent did not offer."""
        if session_id is None:
            raise LocalProtocolError("set_option before a session is open")
        so.check_choice(self.options, option_id, value)
        if self.legacy:
            method, key = _LEGACY_SET[option_id]
            params: dict[str, Any] = {"sessionId": session_id, key: value}
        else:
            method = "session/set_config_option"
            params = {"sessionId": session_id, "configId": option_id, "value": value}
            if version == 2:
                params["type"] = "id"
        rid, data = rpc.send_request(method, params)
        self.pending[rid] = (option_id, value)
        return rid, data

    def answered(self, ev: Response | ErrorResponse) -> list[AgentEvent]:
        """Our set's answer: the options as they now are (nothing for an error)."""
        option_id, value = self.pending.pop(ev.id)
        if isinstance(ev, ErrorResponse):
            return []
        listed = ev.result.get("configOptions") if isinstance(ev.result, dict) else None
        if isinstance(listed, list):
            return self._replace(so.from_config_options(listed))
        return self._replace(so.with_current(self.options, option_id, value))

    def read(self, kind: str, update: dict[str, Any]) -> list[AgentEvent]:
        """One of ``SESSION_KINDS`` as our events."""
        match kind:
            case "config_option_update" if isinstance(update.get("configOptions"), list):
                return self._replace(so.from_config_options(update["configOptions"]))
            case "current_mode_update" | "current_model_update":
                category = "mode" if kind == "current_mode_update" else "model"
                key = "currentModeId" if category == "mode" else "currentModelId"
                value = update.get(key)
                option = next((o for o in self.options if o["category"] == category), None)
                if isinstance(value, str) and option is not None:
                    return self._replace(so.with_current(self.options, option["id"], value))
            case "available_commands_update":
                commands = so.acp_commands(update)
                if commands is not None:
                    return [CommandsChanged(commands=commands)]
            case "usage_update":
                usage = so.acp_usage(update)
                if usage is not None:
                    return [UsageUpdated(usage=usage)]
            case "session_info_update":
                title = so.acp_title(update)
                return [TitleChanged(title=title)] if title else [
                    OtherUpdate(kind=kind, payload=update)]
        return [OtherUpdate(kind=kind, payload=update),
                AgentNotice(message=f"{kind} of an unexpected shape", level="info")]
