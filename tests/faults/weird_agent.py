"""The mock agent with faults it does not have itself (run as a program).

    python tests/faults/weird_agent.py --protocol acp|codex

Extra prompts:

    /surrogates   text with an emoji split across two chunks (each half a lone
                  surrogate, as JavaScript agents produce when they cut a
                  string) and truly lone surrogates, in text and a tool title
    /late         ends the turn, then keeps talking about it: chunks for the
                  finished turn, the same answer twice, answers to ids never used
    /flood <n>    <n> tool calls opened and finished, as fast as it can write
    /env <NAME>   answers with its environment variable <NAME> (what a coding
                  agent running ``env`` would show its model provider)
    /errorcancel <ms>
                  streams; a cancel is answered with an error (ACP: the prompt's
                  JSON-RPC error -32603, as opencode does; Codex: turn failed)
    /spawn <ms>   starts a tool (``sleep 600``) in a session of its own, says its
                  pid (``tool-pid: N``), then streams like /delay
    /spawnhang    the same, then ignores everything (a cancel escalates)
    /spawncrash   the same, then exits with status 1 (the tool is orphaned)
    anything else what the mock agent does

With ``WEIRD_AGENT_BOOM=1`` in its environment it writes "boom: bad config" on
stderr and exits with status 3 before reading anything (a broken profile).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from protocols.jsonrpc import Dialect
from protocols.mock_agent import MockAgent, Turn, _int


class WeirdAgent(MockAgent):
    def run_turn(self, turn: Turn, text: str) -> None:
        words = text.split()
        command = words[0] if words else ""
        arg = _int(words[1]) if len(words) > 1 else None
        if command == "/surrogates":
            self.chunk(turn, "split \ud83d")
            self.chunk(turn, "\ude00 lone \udfff end ")
            self.tool_call(turn, "tool \ud800 title")
            self.echo(turn, text)
        elif command == "/late":
            rid = turn.rpc_id
            self.echo(turn, text)
            self.chunk(turn, " after the end")
            if self.dialect is Dialect.JSONRPC2 and rid is not None:
                self.write(self.rpc.send_response(rid, {"stopReason": "end_turn"}))
            self.write(self.rpc.send_response(424242, {}))
            self.write(self.rpc.send_error(424243, -32000, "for nobody"))
            self.write(self.rpc.send_response("no-such-id", {"stopReason": "cancelled"}))
        elif command == "/env":
            name = words[1] if len(words) > 1 else ""
            self.chunk(turn, f"{name}={os.environ.get(name, '<unset>')}")
            self.end_turn(turn, "end_turn")
        elif command == "/errorcancel":
            self.stream_until_cancel_then_fail(turn, arg or 5000)
        elif command in ("/spawn", "/spawnhang", "/spawncrash"):
            tool = subprocess.Popen(["sleep", "600"], start_new_session=True,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            self.chunk(turn, f"tool-pid: {tool.pid} ")
            if command == "/spawncrash":
                os._exit(1)
            if command == "/spawn":
                self.stream(turn, arg or 5000, honour_cancel=True)
        elif command == "/flood":
            for _ in range(arg or 1000):
                self.tool_call(turn, "flood")
            self.echo(turn, text)
        else:
            super().run_turn(turn, text)

    def stream_until_cancel_then_fail(self, turn: Turn, ms: int) -> None:
        if turn.cancelled.wait(ms / 1000) is False:
            self.echo(turn, "no cancel came")
            return
        with self.lock:
            if self.turn is turn:
                self.turn = None
        if self.dialect is Dialect.JSONRPC2:
            assert turn.rpc_id is not None
            self.write(self.rpc.send_error(turn.rpc_id, -32603, "Internal error: aborted"))
        else:
            self.notify("turn/completed", {"threadId": self.thread_id, "turn": {
                "id": turn.turn_id, "items": [], "status": "failed",
                "error": {"message": "aborted"}}})

    def tool_call(self, turn: Turn, title: str) -> None:
        tool_id = f"tool_{uuid.uuid4().hex[:8]}"
        if self.dialect is Dialect.JSONRPC2:
            for update in ({"sessionUpdate": "tool_call", "toolCallId": tool_id, "title": title,
                            "kind": "execute", "status": "pending"},
                           {"sessionUpdate": "tool_call_update", "toolCallId": tool_id,
                            "status": "completed"}):
                self.notify("session/update", {"sessionId": self.session_id, "update": update})
        else:
            item = {"type": "commandExecution", "id": tool_id, "command": title,
                    "status": "inProgress"}
            self.notify("item/started", {"threadId": self.thread_id, "turnId": turn.turn_id,
                                         "item": item})
            self.notify("item/completed", {"threadId": self.thread_id, "turnId": turn.turn_id,
                                           "item": {**item, "status": "completed",
                                                    "exitCode": 0}})


def main() -> int:
    if os.environ.get("WEIRD_AGENT_BOOM") == "1":
        sys.stderr.write("boom: bad config\n")
        sys.stderr.flush()
        return 3
    protocol = sys.argv[sys.argv.index("--protocol") + 1] if "--protocol" in sys.argv else "acp"
    return WeirdAgent(Dialect.JSONRPC2 if protocol == "acp" else Dialect.CODEX).serve()


if __name__ == "__main__":
    sys.exit(main())
