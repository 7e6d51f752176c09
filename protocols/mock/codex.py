"""The mock agent's Codex app-server dialect: threads, turns and items.

``turn/start`` is answered with the turn at once; the turn ends with ``turn/completed``.
``turn/steer {threadId, input, expectedTurnId}`` adds input to the running turn, and
``turn/interrupt`` is its cancel.  Approvals are ``item/commandExecution/requestApproval``,
each settled one followed by ``serverRequest/resolved`` as Codex does.  ``/subagents`` runs
its children as multi-agent child threads, as Codex 0.171 does: each named by the parent's
``spawnAgent`` item as it completes, streaming a turn of its own on its own ``threadId``,
stopped by a ``turn/interrupt`` that names its thread and turn.

Options as Codex has them: ``thread/start`` answers the thread's ``model``,
``reasoningEffort`` and ``approvalPolicy``; ``model/list`` lists the models with
their efforts; ``turn/start`` takes ``model``, ``effort`` and ``approvalPolicy``
(``/options`` says what the last one carried).  ``/usage`` is
``thread/tokenUsage/updated``; ``/title`` and ``/agentset`` have no Codex
counterpart and say so.
"""

from __future__ import annotations

import sys
from typing import Any

from .. import mock_edits
from ..mock_edits import Edit
from . import attachments, options
from .base import Child, Turn, Wire, prompt_text

__all__ = ["CodexWire"]


class CodexWire(Wire):
    protocol = "codex"
    update_method = "item/agentMessage/delta"
    cancel_ends_permission = True
    subagents = True

    def on_request(self, rid: int | str, method: str, params: dict[str, Any]) -> bool:
        agent = self.agent
        match method:
            case "initialize":
                agent.respond(rid, {"userAgent": "turnvisor-mock/0.1.0",
                                    "platformOs": sys.platform})
            case "thread/start":
                agent.session_id = agent.new_id()
                agent.open_session(agent.session_id, params.get("cwd"))
                thread = {"id": agent.session_id, "cwd": params.get("cwd"), "ephemeral": False}
                agent.respond(rid, {"thread": thread} | self.settings(params))
                agent.notify("thread/started", {"thread": thread})
            case "model/list":
                agent.respond(rid, options.codex_models())
            case "thread/resume":
                self.resume(rid, params)
            case "thread/revert":
                self.revert(rid, params)
            case "turn/steer":
                self.steer(rid, params)
            case "turn/start":
                agent.turn_settings = {k: params.get(k)
                                       for k in ("model", "effort", "approvalPolicy")}
                attachments.received(agent, params.get("input"))
                agent.start_turn(rid, prompt_text(params.get("input")))
            case "turn/interrupt" if params.get("threadId") in agent.children:
                child = agent.children[params["threadId"]]
                if params.get("turnId") != _child_turn(child):
                    agent.error(rid, -32602, "no active turn with that id")
                else:
                    agent.respond(rid, {})
                    agent.cancel_child(child)
            case "turn/interrupt":
                turn = agent.turn
                if turn is None or params.get("turnId") != turn.turn_id:
                    agent.error(rid, -32602, "no active turn with that id")
                else:
                    agent.respond(rid, {})
                    agent.cancel_turn()
            case _:
                return False
        return True

    def resume(self, rid: int | str, params: dict[str, Any]) -> None:
        agent = self.agent
        if "resume" not in agent.restore:
            agent.error(rid, -32601, "method not found: thread/resume")
            return
        thread_id = params.get("threadId")
        if not agent.restore_asked(thread_id):
            return
        session = agent.reopen(thread_id)
        if session is None:
            # As codex 0.169 answers a thread it has no rollout of.
            agent.error(rid, -32600, f"no rollout found for thread id {thread_id}")
            return
        agent.session_id = str(session["id"])
        cwd = params.get("cwd") or session.get("cwd")
        thread: dict[str, Any] = {"id": agent.session_id, "cwd": cwd, "ephemeral": False,
                                  "turns": []}
        agent.respond(rid, {
            "thread": thread, "cwd": cwd, "approvalsReviewer": "user",
            "sandbox": {"type": "dangerFullAccess"}} | self.settings(params))

    def settings(self, params: dict[str, Any]) -> dict[str, Any]:
        """What a thread's answer says it runs with (a policy asked for is taken)."""
        policy = params.get("approvalPolicy")
        return {"model": self.agent.options["model"], "modelProvider": "mock",
                "reasoningEffort": "medium",
                "approvalPolicy": policy if isinstance(policy, str) else "never"}

    def usage(self, turn: Turn, used: int) -> None:
        last = {"totalTokens": used, "inputTokens": used - used // 4,
                "cachedInputTokens": 0, "outputTokens": used // 4, "reasoningOutputTokens": 0}
        self.agent.notify("thread/tokenUsage/updated", {
            "threadId": self.agent.session_id, "turnId": turn.turn_id,
            "tokenUsage": {"total": last, "last": last, "modelContextWindow": 258400}})

    def title(self, turn: Turn, name: str) -> str:
        return "titles are not part of the Codex app-server protocol"

    def options_text(self, turn: Turn) -> str:
        settings = self.agent.turn_settings
        return " ".join(f"{k}={settings.get(k) or '-'}"
                        for k in ("model", "effort", "approvalPolicy"))

    def agent_sets(self, turn: Turn, option_id: str, value: str) -> str:
        return "a Codex agent does not change its options itself"

    def revert(self, rid: int | str, params: dict[str, Any]) -> None:
        """``thread/revert {threadId, beforeTurnId}`` as Codex 0.171 answers it: the
        history up to that turn (files untouched), then ``thread/reverted``."""
        agent = self.agent
        before = params.get("beforeTurnId")
        if params.get("threadId") != agent.session_id:
            agent.error(rid, -32600, "no such thread")
            return
        if agent.turn is not None:
            agent.error(rid, -32600, "cannot revert a thread while a turn is running")
            return
        if not agent.rewind(before):
            agent.error(rid, -32600, f"turn {before!r} is not in thread {agent.session_id}")
            return
        thread: dict[str, Any] = {"id": agent.session_id, "cwd": agent.cwd, "ephemeral": False,
                                  "turns": []}
        agent.respond(rid, {"thread": thread, "turnsBackwardsCursor": None,
                            "itemsBackwardsCursor": None})
        agent.notify("thread/reverted", {"threadId": agent.session_id})

    def steer(self, rid: int | str, params: dict[str, Any]) -> None:
        agent = self.agent
        turn = agent.turn
        text = prompt_text(params.get("input"))
        if params.get("threadId") != agent.session_id:
            agent.error(rid, -32600, "no such thread")
        elif turn is None or params.get("expectedTurnId") != turn.turn_id:
            agent.error(rid, -32600, f"expectedTurnId {params.get('expectedTurnId')!r} is not "
                        "the active turn")
        elif not turn.add_steer(text):
            agent.error(rid, -32600, "the turn is ending")
        else:
            agent.remember("user", text)
            agent.respond(rid, {"turnId": turn.turn_id})

    # -- a turn -------------------------------------------------------------

    def item(self, method: str, turn: Turn, item: dict[str, Any]) -> None:
        self.agent.notify(method, {"threadId": self.agent.session_id, "turnId": turn.turn_id,
                                   "item": item})

    def accept_turn(self, rid: int | str, turn: Turn, text: str) -> None:
        t: dict[str, Any] = {"id": turn.turn_id, "items": [], "status": "inProgress",
                             "error": None}
        self.agent.respond(rid, {"turn": t})
        self.agent.notify("turn/started", {"threadId": self.agent.session_id, "turn": t})

    def chunk(self, turn: Turn, text: str) -> bytes:
        return self.agent.rpc.send_notification("item/agentMessage/delta", {
            "threadId": self.agent.session_id, "turnId": turn.turn_id,
            "itemId": f"msg_{turn.turn_id}", "delta": text,
        })

    def end_turn(self, turn: Turn, stop: str) -> None:
        status = {"end_turn": "completed", "cancelled": "interrupted"}.get(stop, "failed")
        self.item("item/completed", turn,
                  {"type": "agentMessage", "id": f"msg_{turn.turn_id}", "text": ""})
        self.agent.notify("turn/completed", {
            "threadId": self.agent.session_id,
            "turn": {"id": turn.turn_id, "items": [], "status": status, "error": None},
        })

    def tool_started(self, turn: Turn, tool_id: str, ms: int) -> None:
        self.item("item/started", turn, {"type": "commandExecution", "id": tool_id,
                                         "command": f"sleep {ms / 1000}",
                                         "status": "inProgress"})

    def tool_finished(self, turn: Turn, tool_id: str, ms: int) -> None:
        self.item("item/completed", turn, {"type": "commandExecution", "id": tool_id,
                                           "command": f"sleep {ms / 1000}",
                                           "status": "completed", "exitCode": 0})

    def command_started(self, turn: Turn, tool_id: str, title: str) -> None:
        self.item("item/started", turn, {"type": "commandExecution", "id": tool_id,
                                         "command": title, "cwd": self.agent.cwd,
                                         "status": "inProgress"})

    def command_finished(self, turn: Turn, tool_id: str, title: str, status: str) -> None:
        self.item("item/completed", turn, {"type": "commandExecution", "id": tool_id,
                                           "command": title, "cwd": self.agent.cwd,
                                           "status": status,
                                           "exitCode": 0 if status == "completed" else 1})

    def edit_started(self, turn: Turn, tool_id: str, edit: Edit) -> None:
        self.item("item/started", turn, mock_edits.codex_item(tool_id, edit, "inProgress"))

    def edit_finished(self, turn: Turn, tool_id: str, edit: Edit, status: str) -> None:
        self.item("item/completed", turn, mock_edits.codex_item(tool_id, edit, status))

    def ask_permission(self, turn: Turn) -> int:
        rid, data = self.agent.rpc.send_request("item/commandExecution/requestApproval", {
            "threadId": self.agent.session_id, "turnId": turn.turn_id, "itemId": "perm-item",
            "command": "touch file.txt", "reason": "Write to disk",
        })
        self.agent.send(data)
        return rid

    # -- child threads (/subagents): Codex multi-agent's shapes -----------------

    def subagent_announced(self, child: Child) -> None:
        # As Codex 0.171 spawns (tests/fixtures/agent-transcripts/codex-0.171-multi-agent.jsonl):
        # no thread/started for the child; the spawn item names it only as it completes.
        agent, turn = self.agent, child.turn
        spawn: dict[str, Any] = {
            "type": "collabAgentToolCall", "id": f"spawn_{child.id}", "tool": "spawnAgent",
            "senderThreadId": agent.session_id, "receiverThreadIds": [],
            "prompt": child.title, "status": "inProgress", "agentsStates": {}}
        self.item("item/started", turn, spawn)
        self.item("item/completed", turn, {
            **spawn, "status": "completed", "receiverThreadIds": [child.id],
            "agentsStates": {child.id: {"status": "pendingInit", "message": None}}})
        agent.notify("turn/started", {"threadId": child.id, "turn": {
            "id": _child_turn(child), "rootTurnId": turn.turn_id, "items": [],
            "status": "inProgress", "error": None}})

    def subagent_chunk(self, child: Child, text: str) -> None:
        self.agent.notify("item/agentMessage/delta", {
            "threadId": child.id, "turnId": _child_turn(child),
            "itemId": f"msg_{_child_turn(child)}", "delta": text})

    def subagent_tool(self, child: Child, title: str) -> None:
        self.agent.notify("item/started", {
            "threadId": child.id, "turnId": _child_turn(child),
            "item": {"type": "commandExecution", "id": f"cmd_{_child_turn(child)}",
                     "command": title, "status": "inProgress"}})

    def subagent_state(self, child: Child, state: str, stop: str | None = None) -> None:
        if state != "idle":
            return
        status = {"end_turn": "completed", "cancelled": "interrupted"}.get(str(stop), "failed")
        self.agent.notify("turn/completed", {"threadId": child.id, "turn": {
            "id": _child_turn(child), "items": [], "status": status, "error": None}})

    def permission_settled(self, turn: Turn) -> tuple[bool, str]:
        # As Codex does once a request is settled, answered or cleared.
        self.agent.notify("serverRequest/resolved", {
            "threadId": self.agent.session_id, "requestId": turn.permission_rpc_id})
        answer = turn.answer or {}
        # "cancel" is "deny and stop": Codex interrupts the turn itself.
        if turn.cancelled or answer.get("decision") == "cancel":
            return True, ""
        return False, f"approval: {answer.get('decision')}"

    def withdraw(self, turn: Turn, rid: int) -> bool:
        self.agent.notify("serverRequest/resolved", {"threadId": self.agent.session_id,
                                                     "requestId": rid})
        return False


def _child_turn(child: Child) -> str:
    """The one turn a child thread runs (``/subagents``)."""
    return f"{child.id}.turn"
