"""``/steps`` and ``/stray`` (DESIGN.md §18) on the mock's machine, in each dialect: the
frames in order and at their times, a cancel mid-step and between steps, the permission
asked while the first step runs.  protocols/mock/stops.py says what they do; the real
process (its stray in its own group) is in test_mock_stops_agent.py."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from protocols.mock.machine import MockMachine
from protocols.mock.sessions import MemoryStore
from protocols.mock.stops import THINK_S, steps_args

DIALECTS = ["acp", "acp2", "codex"]
Frame = tuple[Any, ...]


class Drive:
    """One mock machine in ``dialect``, a session open, driven by the clock the test keeps."""

    def __init__(self, dialect: str, *, spawn: Any = None) -> None:
        self.dialect = dialect
        self.codex = dialect == "codex"
        self.m = MockMachine("codex" if self.codex else "acp", MemoryStore(), acp_max_version=2,
                             cwd="/nowhere", new_id=lambda: "s1", spawn=spawn)
        self.now = 0.0
        self.turn_id: str | None = None
        self.raw: list[dict[str, Any]] = []
        self.send({"id": 0, "method": "initialize",
                   "params": {"protocolVersion": 2 if dialect == "acp2" else 1}})
        self.send({"id": 1, "method": "thread/start" if self.codex else "session/new",
                   "params": {"cwd": "/nowhere"}})
        self.m.effects()

    def send(self, msg: dict[str, Any]) -> None:
        head = {} if self.codex else {"jsonrpc": "2.0"}
        self.m.receive_data(json.dumps({**head, **msg}).encode() + b"\n", self.now)

    def out(self) -> list[dict[str, Any]]:
        data = b"".join(getattr(e, "data", b"") for e in self.m.effects())
        msgs = [json.loads(x) for x in data.splitlines() if x.strip()]
        self.raw += msgs
        return msgs

    def prompt(self, text: str) -> list[Frame]:
        blocks = [{"type": "text", "text": text}]
        if self.codex:
            self.send({"id": 2, "method": "turn/start", "params": {"threadId": "s1",
                                                                   "input": blocks}})
        else:
            self.send({"id": 2, "method": "session/prompt",
                       "params": {"sessionId": "s1", "prompt": blocks}})
        msgs = self.out()
        if self.codex:
            self.turn_id = next(x for x in msgs if x.get("id") == 2)["result"]["turn"]["id"]
        return self.frames(msgs)

    def until(self, t: float) -> list[tuple[Any, Frame]]:
        """Every frame up to time ``t``, each with the time it was sent at (approximately:
        compared with sums of seconds)."""
        seen: list[tuple[Any, Frame]] = []
        while (wake := self.m.next_wakeup()) is not None and wake <= t + 1e-9:
            self.now = wake
            self.m.advance(wake)
            seen += [(pytest.approx(wake), f) for f in self.frames(self.out())]
        self.now = t
        return seen

    def cancel(self) -> list[Frame]:
        if self.codex:
            self.send({"id": 3, "method": "turn/interrupt",
                       "params": {"threadId": "s1", "turnId": self.turn_id}})
        else:
            self.send({"method": "session/cancel", "params": {"sessionId": "s1"}})
        return self.frames(self.out())

    def answer(self, rid: int, how: str) -> list[Frame]:
        """Answer the permission request: ``allow``, or ``stop`` (ACP's ``cancelled``
        outcome, Codex's ``cancel``: deny and stop)."""
        if self.codex:
            result: dict[str, Any] = {"decision": "accept" if how == "allow" else "cancel"}
        elif how == "allow":
            result = {"outcome": {"outcome": "selected", "optionId": "allow"}}
        else:
            result = {"outcome": {"outcome": "cancelled"}}
        self.send({"id": rid, "result": result})
        return self.frames(self.out())

    def frames(self, msgs: Sequence[dict[str, Any]]) -> list[Frame]:
        """The frames of one dialect as the same few kinds: ``start`` (id, title),
        ``done`` (id, status), ``text``, ``ask`` (request id), ``end`` (stop reason)."""
        out: list[Frame] = []
        for x in msgs:
            method, params = x.get("method"), x.get("params") or {}
            if self.codex:
                item = params.get("item") or {}
                if method == "item/started" and item.get("type") == "commandExecution":
                    out.append(("start", item["id"], item["command"]))
                elif method == "item/completed" and item.get("type") == "commandExecution":
                    out.append(("done", item["id"], item["status"]))
                elif method == "item/agentMessage/delta":
                    out.append(("text", params["delta"]))
                elif method == "item/commandExecution/requestApproval":
                    out.append(("ask", x["id"]))
                elif method == "turn/completed":
                    status = params["turn"]["status"]
                    out.append(("end", {"completed": "end_turn",
                                        "interrupted": "cancelled"}.get(status, status)))
                continue
            if "result" in x and "stopReason" in x["result"]:
                out.append(("end", x["result"]["stopReason"]))
            if method == "session/request_permission":
                out.append(("ask", x["id"]))
            if method != "session/update":
                continue
            u = params["update"]
            kind = u["sessionUpdate"]
            if kind in ("tool_call", "tool_call_update") and "title" in u:
                out.append(("start", u["toolCallId"], u["title"]))
            elif kind == "tool_call_update":
                out.append(("done", u["toolCallId"], u["status"]))
            elif kind == "agent_message_chunk":
                c = u["content"]
                out.append(("text", "".join(b["text"] for b in c) if isinstance(c, list)
                            else c["text"]))
            elif kind == "state_update" and u["state"] == "idle":
                out.append(("end", u["stopReason"]))
        return out


def _ids(frames: Sequence[Frame]) -> list[str]:
    return [f[1] for f in frames if f[0] == "start"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_steps_run_in_sequence_with_a_think_between(dialect: str) -> None:
    d = Drive(dialect)
    first = d.prompt("/steps 3 200")
    seen = [(0.0, f) for f in first] + d.until(5.0)
    ids = _ids(first) + _ids([f for _, f in seen[1:]])
    assert len(ids) == len(set(ids)) == 3
    a, b, c = ids
    # Each step runs 200 ms; the next starts a think (THINK_S) after the last one's end.
    t = THINK_S
    assert seen == [
        (0.0, ("start", a, "step 1 of 3: sleep 0.2")),
        (0.2, ("done", a, "completed")), (0.2, ("text", "step 1 of 3 done. ")),
        (0.2 + t, ("start", b, "step 2 of 3: sleep 0.2")),
        (0.4 + t, ("done", b, "completed")), (0.4 + t, ("text", "step 2 of 3 done. ")),
        (0.4 + 2 * t, ("start", c, "step 3 of 3: sleep 0.2")),
        (0.6 + 2 * t, ("done", c, "completed")), (0.6 + 2 * t, ("text", "step 3 of 3 done. ")),
        (0.6 + 2 * t, ("end", "end_turn")),
    ]
    assert d.m.turn is None and d.m.next_wakeup() is None


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_step_is_a_running_shell_command_on_the_wire(dialect: str) -> None:
    d = Drive(dialect)
    d.prompt("/steps")
    [start] = [x["params"] for x in d.raw if x.get("method") in ("session/update", "item/started")
               and "step 1 of 3" in json.dumps(x)]
    if dialect == "codex":
        item = start["item"]
        assert {k: v for k, v in item.items() if k != "id"} == {
            "type": "commandExecution", "command": "step 1 of 3: sleep 0.5", "cwd": "/nowhere",
            "status": "inProgress"}
        assert start["turnId"] == d.turn_id
    else:
        update = start["update"]
        assert {k: v for k, v in update.items() if k != "toolCallId"} == {
            "sessionUpdate": "tool_call" if dialect == "acp" else "tool_call_update",
            "title": "step 1 of 3: sleep 0.5", "kind": "execute", "status": "in_progress",
            "rawInput": {"command": "sleep 0.5"}}
    d.until(10.0)
    assert d.frames(d.raw)[-1] == ("end", "end_turn")
    assert len(_ids(d.frames(d.raw))) == 3  # the defaults: 3 steps of 500 ms


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_cancel_mid_step_ends_the_turn_at_once_leaving_the_step_to_the_client(
        dialect: str) -> None:
    d = Drive(dialect)
    d.prompt("/steps 3 200")
    before = d.until(0.4)  # step 2 runs since 0.3
    assert [f[0] for _, f in before] == ["done", "text", "start"]
    assert d.cancel() == [("end", "cancelled")]
    # Nothing more: no step 2 completion (ACP: the client marks it; Codex leaves an
    # interrupted command open), no step 3.
    assert d.until(5.0) == [] and d.m.turn is None and d.m.running == []


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_cancel_as_a_step_completes_stops_before_the_next_step(dialect: str) -> None:
    d = Drive(dialect)
    d.prompt("/steps 3 200")
    seen = d.until(0.2)
    assert [(t, f[0]) for t, f in seen] == [(0.2, "done"), (0.2, "text")]
    d.now = 0.2 + THINK_S / 2  # the client's cancel, while the agent "thinks"
    assert d.cancel() == [("end", "cancelled")]
    assert d.until(5.0) == []
    assert len(_ids(d.frames(d.raw))) == 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_steps_permission_asks_for_the_second_step_while_the_first_runs(dialect: str) -> None:
    d = Drive(dialect)
    d.prompt("/steps 2 200 permission")
    asked = d.until(0.15)
    [(t, (_, rid))] = [(t, f) for t, f in asked if f[0] == "ask"]
    assert t == 0.1  # half-way through step 1
    assert d.answer(rid, "allow") == []  # the first step still runs
    seen = d.until(5.0)
    said = "approval: accept. " if d.codex else "permission: allow. "
    assert [f for _, f in seen] == [
        ("done", seen[0][1][1], "completed"), ("text", "step 1 of 2 done. "), ("text", said),
        ("start", seen[3][1][1], "step 2 of 2: sleep 0.2"),
        ("done", seen[3][1][1], "completed"), ("text", "step 2 of 2 done. "),
        ("end", "end_turn")]
    assert seen[3][0] == pytest.approx(0.2 + THINK_S)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_steps_waits_for_the_answer_before_the_second_step(dialect: str) -> None:
    d = Drive(dialect)
    d.prompt("/steps 2 200 permission")
    rid = next(f[1] for _, f in d.until(0.5) if f[0] == "ask")
    assert len(_ids(d.frames(d.raw))) == 1 and d.m.next_wakeup() is None
    d.now = 2.0
    d.answer(rid, "allow")
    assert [f[0] for _, f in d.until(5.0)] == ["start", "done", "text", "end"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_answer_that_stops_ends_the_turn_after_the_running_step(dialect: str) -> None:
    d = Drive(dialect)
    d.prompt("/steps 3 200 permission")
    rid = next(f[1] for _, f in d.until(0.15) if f[0] == "ask")
    assert d.answer(rid, "stop") == []
    seen = [f for _, f in d.until(5.0)]
    assert [f[0] for f in seen] == ["done", "text", "end"]
    assert seen[-1] == ("end", "cancelled") and len(_ids(d.frames(d.raw))) == 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_cancel_with_the_request_pending_settles_it_then_ends(dialect: str) -> None:
    d = Drive(dialect)
    d.prompt("/steps 3 200 permission")
    rid = next(f[1] for _, f in d.until(0.15) if f[0] == "ask")
    if d.codex:
        # Codex clears the request itself, and says so, as it interrupts.
        assert d.cancel() == [("end", "cancelled")]
        assert {"method": "serverRequest/resolved",
                "params": {"threadId": "s1", "requestId": rid}} in d.raw
    else:
        # ACP: the client must answer the request; the turn ends after that.
        assert d.cancel() == []
        assert d.answer(rid, "stop") == [("end", "cancelled")]
    assert d.until(5.0) == [] and d.m.turn is None


@pytest.mark.parametrize("dialect", DIALECTS)
def test_stray_reports_its_command_and_pid(dialect: str) -> None:
    started: list[Sequence[str]] = []

    def spawn(argv: Sequence[str]) -> int:
        started.append(argv)
        return 4242

    d = Drive(dialect, spawn=spawn)
    frames = d.prompt("/stray")
    tool = _ids(frames)[0]
    assert frames == [("start", tool, "stray: sleep 600"), ("done", tool, "completed"),
                      ("text", "stray pid 4242"), ("end", "end_turn")]
    assert [list(a) for a in started] == [["sleep", "600"]]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_stray_without_a_process_of_its_own_fails_its_tool_and_says_why(dialect: str) -> None:
    d = Drive(dialect)  # as the tests' in-process twin: no spawn
    frames = d.prompt("/stray")
    tool = _ids(frames)[0]
    assert frames[1] == ("done", tool, "failed")
    assert frames[2][1].startswith("stray: cannot start it: ")
    assert frames[-1] == ("end", "end_turn")


def test_steps_arguments_and_their_defaults() -> None:
    assert steps_args("/steps") == (3, 500, False)
    assert steps_args("/steps 5") == (5, 500, False)
    assert steps_args("/steps 2 50 permission") == (2, 50, True)
    assert steps_args("/steps x 0 permission") == (3, 500, True)
    assert steps_args("/steps 100000 10") == (100, 10, False)
