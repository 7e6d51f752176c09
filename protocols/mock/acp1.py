"""The mock agent's ACP v1: a prompt is answered when its turn ends, with its stop reason."""

from __future__ import annotations

from typing import Any

from .. import mock_edits
from ..mock_edits import Edit
from .base import SESSION_NOT_FOUND, Child, Turn, Wire, prompt_text

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
                agent.respond(rid, {"sessionId": agent.session_id})
            case "session/load" | "session/resume":
                self.restore(rid, method, params)
            case "_session/steering" if agent.steering:
                self.steer(rid, params)
            case "session/prompt":
                agent.start_turn(rid, prompt_text(params.get("prompt")))
            case _:
                return False
        return True

    def initialized(self) -> dict[str, Any]:
        restore = self.agent.restore
        caps: dict[str, Any] = {"loadSession": "load" in restore}
        if "resume" in restore:
            caps["sessionCapabilities"] = {"resume": {}}
        result: dict[str, Any] = {"protocolVersion": 1, "agentCapabilities": caps,
                                  "agentInfo": AGENT_INFO, "authMethods": []}
        if self.agent.steering:
            result["_meta"] = {"steering": {"supported": True}}
        return result

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
        agent.respond(rid, {})

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
