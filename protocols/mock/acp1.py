"""The mock agent's ACP v1: a prompt is answered when its turn ends, with its stop reason."""

from __future__ import annotations

from typing import Any

from .. import mock_edits
from ..mock_edits import Edit
from . import attachments, login, options
from .base import SESSION_NOT_FOUND, Child, Turn, Wire, prompt_text
from .commands import available_commands
from .mcp import ACP1_CAPABILITIES

__all__ = ["Acp1Wire"]

AGENT_INFO = {"name": "turnvisor-mock", "version": "0.1.0"}
PERMISSION_TOOL = {"toolCallId": "perm-tool", "title": "Write to disk", "kind": "execute",
                   "status": "pending", "rawInput": {"command": "touch file.txt"}}
PERMISSION_OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]


class Acp1Wire(Wire):
    protocol = "acp"

    def on_request(self, rid: int | str, method: str, params: dict[str, Any]) -> bool:
        agent = self.agent
        match method:
            case "initialize":
                caps = params.get("clientCapabilities")
                # v1: child sessions only for a client that opted in (the RFD's MUST NOT).
                self.subagents = type(self).subagents or (
                    isinstance(caps, dict) and isinstance(caps.get("subagents"), dict))
                agent.respond(rid, self.initialized())
            case "session/new":
                agent.session_id = agent.new_id()
                agent.open_session(agent.session_id, params.get("cwd"))
                agent.respond(rid, {"sessionId": agent.session_id} | self.offer())
                # As claude-agent-acp and gemini do, right after the session's answer.
                if agent.offers:
                    self.update({"sessionUpdate": "available_commands_update",
                                 "availableCommands": available_commands()})
            case "session/set_config_option" if not self.legacy:
                self.set_config_option(rid, params)
            case "session/set_mode" | "session/set_model" if self.legacy:
                self.set_legacy(rid, method, params)
            case "session/load" | "session/resume":
                self.restore(rid, method, params)
            case "_session/steering" if agent.steering:
                self.steer(rid, params)
            case "session/prompt":
                attachments.received(agent, params.get("prompt"))
                agent.start_turn(rid, prompt_text(params.get("prompt")))
            case _:
                return False
        return True

    def initialized(self) -> dict[str, Any]:
        restore = self.agent.restore
        caps: dict[str, Any] = {"loadSession": "load" in restore,
                                "mcpCapabilities": dict(ACP1_CAPABILITIES),
                                "promptCapabilities": attachments.acp_prompt_capabilities(
                                    self.agent)}
        if "resume" in restore:
            caps["sessionCapabilities"] = {"resume": {}}
        result: dict[str, Any] = {"protocolVersion": 1, "agentCapabilities": caps,
                                  "agentInfo": AGENT_INFO,
                                  "authMethods": login.acp_methods(self.agent)}
        if self.agent.steering:
            result["_meta"] = {"steering": {"supported": True}}
        return result

    # -- options (protocols/mock/options.py) --------------------------------------

    #: The ACP version spoken (the shape of ``configOptions``).
    version = 1

    @property
    def legacy(self) -> bool:
        """Options as the legacy ``modes``/``models`` (v1 with ``--legacy-options``)."""
        return self.agent.legacy_options and self.version == 1

    def offer(self) -> dict[str, Any]:
        if not self.agent.offers:  # --no-offers: an agent offering no options
            return {}
        return options.offer(self.agent.options, self.version, self.agent.legacy_options)

    def set_config_option(self, rid: int | str, params: dict[str, Any]) -> None:
        agent = self.agent
        config_id, value = params.get("configId"), params.get("value")
        if params.get("sessionId") != agent.session_id:
            agent.error(rid, -32602, "no such session")
        elif self.version == 2 and params.get("type") != "id":
            agent.error(rid, -32602, "set_config_option needs type: \"id\" (ACP v2)")
        elif not options.valid(config_id, value):
            agent.error(rid, -32602, f"no option {config_id!r} with value {value!r}")
        else:
            agent.set_option(str(config_id), str(value))
            agent.respond(rid, {"configOptions": options.config_options(agent.options,
                                                                        self.version)})

    def set_legacy(self, rid: int | str, method: str, params: dict[str, Any]) -> None:
        agent = self.agent
        option_id, key = ("mode", "modeId") if method == "session/set_mode" else (
            "model", "modelId")
        value = params.get(key)
        if params.get("sessionId") != agent.session_id:
            agent.error(rid, -32602, "no such session")
        elif not options.valid(option_id, value):
            agent.error(rid, -32602, f"no {option_id} {value!r}")
        else:
            agent.set_option(option_id, str(value))
            agent.respond(rid, {})

    def usage(self, turn: Turn, used: int) -> None:
        self.update({"sessionUpdate": "usage_update", "used": used, "size": 200000,
                     "cost": {"amount": round(used * 0.00001, 5), "currency": "USD"}})

    def title(self, turn: Turn, name: str) -> str:
        self.update({"sessionUpdate": "session_info_update", "title": name})
        return f"title: {name}"

    def options_text(self, turn: Turn) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(self.agent.options.items()))

    def agent_sets(self, turn: Turn, option_id: str, value: str) -> str:
        agent = self.agent
        if not options.valid(option_id, value):
            return f"no option {option_id} with value {value}"
        agent.set_option(option_id, value)
        if not self.legacy:
            self.update({"sessionUpdate": "config_option_update",
                         "configOptions": options.config_options(agent.options, self.version)})
        elif option_id == "mode":
            self.update({"sessionUpdate": "current_mode_update", "currentModeId": value})
        else:
            return f"{option_id} is now {value} (legacy models have no update to say so)"
        return f"{option_id} is now {value}"

    def restorable(self, method: str) -> bool:
        return ("load" if method == "session/load" else "resume") in self.agent.restore

    def restore(self, rid: int | str, method: str, params: dict[str, Any]) -> None:
        agent = self.agent
        if not self.restorable(method):
            agent.error(rid, -32601, f"method not found: {method}")
            return
        session_id = params.get("sessionId")
        if not agent.restore_asked(session_id):
            return
        session = agent.reopen(session_id)
        if session is None:
            agent.error(rid, SESSION_NOT_FOUND, f"session not found: {session_id!r}")
            return
        if self.replays(method, params):
            # The history first: the answer says the replay is over.
            self.replay(session)
        agent.session_id = str(session["id"])
        agent.respond(rid, self.offer())

    def replays(self, method: str, params: dict[str, Any]) -> bool:
        return method == "session/load"

    def replay(self, session: dict[str, Any]) -> None:
        for message in session["messages"]:
            kind = "user_message_chunk" if message.get("role") == "user" else (
                "agent_message_chunk")
            self.agent.notify("session/update", {
                "sessionId": session["id"],
                "update": {"sessionUpdate": kind,
                           "content": {"type": "text", "text": str(message.get("text", ""))}},
            })

    def steer(self, rid: int | str, params: dict[str, Any]) -> None:
        agent = self.agent
        turn = agent.turn
        text = prompt_text(params.get("prompt"))
        if params.get("sessionId") != agent.session_id:
            agent.error(rid, -32602, "no such session")
        elif turn is None or not turn.add_steer(text):
            agent.respond(rid, {"outcome": "promptRequired", "reason": "noRunningTurn"})
        else:
            agent.remember("user", text)
            agent.respond(rid, {"outcome": "injected"})

    # -- a turn -------------------------------------------------------------

    def update(self, update: dict[str, Any]) -> None:
        self.agent.notify("session/update", {"sessionId": self.agent.session_id,
                                             "update": update})

    def chunk(self, turn: Turn, text: str) -> bytes:
        return self.agent.rpc.send_notification("session/update", {
            "sessionId": self.agent.session_id, "update": self.chunk_update(turn, text)})

    def chunk_update(self, turn: Turn, text: str) -> dict[str, Any]:
        return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}

    def end_turn(self, turn: Turn, stop: str) -> None:
        assert turn.rpc_id is not None
        self.agent.respond(turn.rpc_id, {"stopReason": stop})

    def tool_started(self, turn: Turn, tool_id: str, ms: int) -> None:
        self.update({"sessionUpdate": self.tool_call_kind, "toolCallId": tool_id,
                     "title": f"sleep {ms} ms", "kind": "execute", "status": "pending"})
        self.update({"sessionUpdate": "tool_call_update", "toolCallId": tool_id,
                     "status": "in_progress"})

    #: v2 has no ``tool_call``: the first ``tool_call_update`` of an id starts it.
    tool_call_kind = "tool_call"

    def tool_finished(self, turn: Turn, tool_id: str, ms: int) -> None:
        self.update({"sessionUpdate": "tool_call_update", "toolCallId": tool_id,
                     "status": "completed"})

    def command_started(self, turn: Turn, tool_id: str, title: str) -> None:
        # Running from its first report, as agents report a shell command they run.
        self.update({"sessionUpdate": self.tool_call_kind, "toolCallId": tool_id,
                     "title": title, "kind": "execute", "status": "in_progress",
                     "rawInput": {"command": title.rsplit(": ", 1)[-1]}})

    def command_finished(self, turn: Turn, tool_id: str, title: str, status: str) -> None:
        self.update({"sessionUpdate": "tool_call_update", "toolCallId": tool_id,
                     "status": status})

    def edit_started(self, turn: Turn, tool_id: str, edit: Edit) -> None:
        self.update(mock_edits.acp_tool_call(tool_id, edit))

    def edit_finished(self, turn: Turn, tool_id: str, edit: Edit, status: str) -> None:
        self.update({"sessionUpdate": "tool_call_update", "toolCallId": tool_id,
                     "status": status})

    def permission_params(self) -> dict[str, Any]:
        return {"sessionId": self.agent.session_id, "options": PERMISSION_OPTIONS,
                "toolCall": PERMISSION_TOOL}

    def ask_permission(self, turn: Turn) -> int:
        rid, data = self.agent.rpc.send_request("session/request_permission",
                                                self.permission_params())
        self.agent.send(data)
        return rid

    def permission_settled(self, turn: Turn) -> tuple[bool, str]:
        outcome = (turn.answer or {}).get("outcome", {})
        if not isinstance(outcome, dict):
            outcome = {}
        if turn.cancelled or outcome.get("outcome") == "cancelled":
            return True, ""
        return False, f"permission: {outcome.get('optionId')}"

    # -- child sessions (/subagents): the subagents RFD's shapes -------------------

    def subagent_announced(self, child: Child) -> None:
        self.update({"sessionUpdate": "subagent_update", "sessionId": child.id,
                     "title": child.title, "description": "mock subagent",
                     "capabilities": {"cancel": {}}, "state": {"state": "running"}})

    def subagent_chunk(self, child: Child, text: str) -> None:
        self.agent.notify("session/update", {"sessionId": child.id, "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}})

    def subagent_tool(self, child: Child, title: str) -> None:
        self.agent.notify("session/update", {"sessionId": child.id, "update": {
            "sessionUpdate": "tool_call", "toolCallId": f"{child.id}.tool", "title": title,
            "kind": "read", "status": "completed"}})

    def subagent_state(self, child: Child, state: str, stop: str | None = None) -> None:
        """v1: a child's work state is reported only on its parent."""
        work: dict[str, Any] = {"state": state}
        if stop is not None:
            work["stopReason"] = stop
        self.update({"sessionUpdate": "subagent_update", "sessionId": child.id, "state": work})

    def withdraw(self, turn: Turn, rid: int) -> bool:
        self.agent.notify("$/cancel_request", {"requestId": rid})
        # The client MUST answer the withdrawn request (error -32800).
        return True
