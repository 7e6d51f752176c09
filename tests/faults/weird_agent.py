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

from protocols import mock_agent
from protocols.mock import stdio
from protocols.mock.base import Exit, Turn, Wait
from protocols.mock.scripts import Steps, echo, number, stream


def _acp(turn: Turn) -> bool:
    return turn.wire.protocol == "acp"


def tool_call(turn: Turn, title: str) -> None:
    tool_id = f"tool_{uuid.uuid4().hex[:8]}"
    if _acp(turn):
        for update in ({"sessionUpdate": "tool_call", "toolCallId": tool_id, "title": title,
                        "kind": "execute", "status": "pending"},
                       {"sessionUpdate": "tool_call_update", "toolCallId": tool_id,
                        "status": "completed"}):
            turn.notify("session/update", {"sessionId": turn.agent.session_id,
                                           "update": update})
    else:
        item = {"type": "commandExecution", "id": tool_id, "command": title,
                "status": "inProgress"}
        where = {"threadId": turn.agent.session_id, "turnId": turn.turn_id}
        turn.notify("item/started", {**where, "item": item})
        turn.notify("item/completed", {**where, "item": {**item, "status": "completed",
                                                          "exitCode": 0}})


def surrogates(turn: Turn, text: str) -> Steps:
    turn.chunk("split \ud83d")
    turn.chunk("\ude00 lone \udfff end ")
    tool_call(turn, "tool \ud800 title")
    return echo(turn, text)


def late(turn: Turn, text: str) -> Steps:
    rid = turn.rpc_id
    yield from echo(turn, text)
    turn.chunk(" after the end")
    rpc = turn.agent.rpc
    if _acp(turn) and rid is not None:
        turn.write(rpc.send_response(rid, {"stopReason": "end_turn"}))
    turn.write(rpc.send_response(424242, {}))
    turn.write(rpc.send_error(424243, -32000, "for nobody"))
    turn.write(rpc.send_response("no-such-id", {"stopReason": "cancelled"}))


def env(turn: Turn, text: str) -> Steps:
    words = text.split()
    name = words[1] if len(words) > 1 else ""
    turn.chunk(f"{name}={os.environ.get(name, '<unset>')}")
    turn.end("end_turn")
    yield from ()


def errorcancel(turn: Turn, text: str) -> Steps:
    yield Wait(number(text, 5000) / 1000, cancel=True)
    if not turn.cancelled:
        yield from echo(turn, "no cancel came")
        return
    turn.agent.close_turn(turn)
    if _acp(turn):
        assert turn.rpc_id is not None
        turn.write(turn.agent.rpc.send_error(turn.rpc_id, -32603, "Internal error: aborted"))
    else:
        turn.notify("turn/completed", {"threadId": turn.agent.session_id, "turn": {
            "id": turn.turn_id, "items": [], "status": "failed",
            "error": {"message": "aborted"}}})


def spawn(turn: Turn, text: str) -> Steps:
    command = text.split()[0]
    tool = subprocess.Popen(["sleep", "600"], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    turn.chunk(f"tool-pid: {tool.pid} ")
    if command == "/spawncrash":
        turn.agent.emit(Exit(1))
    elif command == "/spawn":
        yield from stream(turn, number(text, 5000), honour_cancel=True)


def flood(turn: Turn, text: str) -> Steps:
    for _ in range(number(text, 1000)):
        tool_call(turn, "flood")
    return echo(turn, text)


WEIRD = {"/surrogates": surrogates, "/late": late, "/env": env, "/errorcancel": errorcancel,
         "/spawn": spawn, "/spawnhang": spawn, "/spawncrash": spawn, "/flood": flood}


def main() -> int:
    if os.environ.get("WEIRD_AGENT_BOOM") == "1":
        sys.stderr.write("boom: bad config\n")
        sys.stderr.flush()
        return 3
    args = mock_agent.build_parser().parse_args()
    return stdio.serve(mock_agent.machine(args, WEIRD))


if __name__ == "__main__":
    sys.exit(main())
