"""Codex multi-agent child threads in the sans-IO Codex core (DESIGN.md §13): a spawned
agent's thread is a child, not the parent's turn; its text is its own; one child is
interrupted through its own ``turn/interrupt`` while the parent goes on; the parent's
cancel interrupts every running child and its end counts them."""

from __future__ import annotations

from typing import Any

from protocols.events import (
    MessageChunk,
    OtherUpdate,
    SubagentActivity,
    SubagentChanged,
    TurnEnded,
)
from protocols.jsonrpc import IncomingRequest

from .codex_states import THREAD, TURN, Pair, completed, in_turn, notify

CHILD, CHILD_TURN = "thr-child", "turn-child-1"


def spawn_item(status: str, agent_status: str, receivers: list[str] | None = None,
               sender: str = THREAD) -> dict[str, Any]:
    ids = [CHILD] if receivers is None else receivers
    return {"type": "collabAgentToolCall", "id": "call-spawn", "tool": "spawnAgent",
            "senderThreadId": sender, "receiverThreadIds": ids,
            "prompt": "Look through the tests and list the slow ones",
            "status": status, "agentsStates": {t: {"status": agent_status} for t in ids}}


def started_child(p: Pair, child: str = CHILD, parent: str = THREAD,
                  nickname: str | None = "Noether") -> list[object]:
    return notify(p, "thread/started", {"thread": {
        "id": child, "parentThreadId": parent, "agentNickname": nickname,
        "agentRole": "explorer", "ephemeral": False}})


def child_turn(p: Pair, method: str, status: str = "inProgress", child: str = CHILD,
               turn: str = CHILD_TURN) -> list[object]:
    return notify(p, method, {"threadId": child, "turn": {
        "id": turn, "items": [], "status": status, "error": None}})


def running_child() -> Pair:
    p = in_turn()
    started_child(p)
    notify(p, "item/started", {"threadId": THREAD, "turnId": TURN,
                               "item": spawn_item("inProgress", "pendingInit")})
    child_turn(p, "turn/started")
    return p


def changes(events: list[object]) -> list[SubagentChanged]:
    return [e for e in events if isinstance(e, SubagentChanged)]


def test_a_spawned_thread_is_a_child_named_by_its_nickname() -> None:
    p = in_turn()
    [announced] = started_child(p)
    assert announced == SubagentChanged(subagent_id=CHILD, title="Noether", state="running",
                                        cancellable=False)  # no turn of its own yet
    events = child_turn(p, "turn/started")
    assert changes(events) == [SubagentChanged(subagent_id=CHILD, title="Noether",
                                               state="running", cancellable=True)]
    # The parent's own turn is untouched: still the parent's id, still running.
    assert p.client.turn_id == TURN and p.client.turn.running


def test_the_spawn_item_announces_a_child_titled_by_its_prompt() -> None:
    p = in_turn()
    events = notify(p, "item/started", {"threadId": THREAD, "turnId": TURN,
                                         "item": spawn_item("inProgress", "pendingInit")})
    [child] = changes(events)
    assert child.subagent_id == CHILD and child.state == "running"
    assert child.title == "Look through the tests and list the slow ones"
    # A role names a child that has no nickname.
    [named] = changes(started_child(p, "thr-other", nickname=None))
    assert named.title == "explorer"


def test_a_childs_text_and_end_are_its_own_not_the_parents() -> None:
    p = running_child()
    events = notify(p, "item/agentMessage/delta", {
        "threadId": CHILD, "turnId": CHILD_TURN, "itemId": "m1", "delta": "child says"})
    assert events == [SubagentActivity(subagent_id=CHILD, text="child says")]
    assert not any(isinstance(e, MessageChunk) for e in events)
    ended = child_turn(p, "turn/completed", "completed")
    assert changes(ended) == [SubagentChanged(subagent_id=CHILD, title="Noether",
                                              state="completed", cancellable=False,
                                              stop_reason="end_turn")]
    assert not any(isinstance(e, TurnEnded) for e in ended)
    assert p.client.turn.running and p.client.turn_id == TURN
    # The parent's own text is still the parent's.
    mine = notify(p, "item/agentMessage/delta", {
        "threadId": THREAD, "turnId": TURN, "itemId": "m2", "delta": "parent says"})
    assert mine == [MessageChunk(text="parent says", message_id="m2")]


def test_one_child_is_interrupted_while_the_parent_goes_on() -> None:
    p = running_child()
    data = p.client.cancel_subagent(CHILD)
    [req] = p.to_agent(data)
    assert isinstance(req, IncomingRequest) and req.method == "turn/interrupt"
    assert req.params == {"threadId": CHILD, "turnId": CHILD_TURN}
    assert p.client.children.get(CHILD) == SubagentChanged(
        subagent_id=CHILD, title="Noether", state="cancelling", cancellable=False)
    # Twice: nothing more is written; the parent's turn is not cancelled.
    assert p.client.cancel_subagent(CHILD) == b""
    assert p.client.turn.running
    # Streaming after the interrupt does not make it running again; its end does end it.
    child_turn(p, "turn/started")
    assert p.client.children.get(CHILD).state == "cancelling"  # type: ignore[union-attr]
    [done] = changes(child_turn(p, "turn/completed", "interrupted"))
    assert done.state == "cancelled" and done.stop_reason == "cancelled"
    assert completed(p, "completed")[-1] == TurnEnded(stop_reason="end_turn", turn_id=TURN)


def test_the_parents_cancel_interrupts_each_running_child_and_counts_them() -> None:
    p = running_child()
    started_child(p, "thr-idle")  # announced, no turn running: nothing to interrupt
    lines = p.to_agent(p.client.cancel())
    interrupts = [r.params for r in lines
                  if isinstance(r, IncomingRequest) and r.method == "turn/interrupt"]
    assert interrupts == [{"threadId": THREAD, "turnId": TURN},
                          {"threadId": CHILD, "turnId": CHILD_TURN}]
    events = completed(p, "interrupted")
    assert events[-1] == TurnEnded(stop_reason="cancelled", turn_id=TURN,
                                   subagents_cancelled=1)
    # The next turn's end counts nothing of this one.
    p.to_agent(p.client.turn_start("again")[1])
    p.to_client(p.agent.send_response(4, {"turn": {"id": "turn-2", "status": "inProgress"}}))
    assert completed(p, "completed", "turn-2")[-1] == TurnEnded(stop_reason="end_turn",
                                                                 turn_id="turn-2")


def test_a_childs_own_child_is_shown_beside_it() -> None:
    p = running_child()
    [grandchild] = changes(started_child(p, "thr-grandchild", parent=CHILD, nickname="Hilbert"))
    assert grandchild.subagent_id == "thr-grandchild"
    # A thread whose parent is neither ours nor a child's is not ours to show.
    assert not changes(started_child(p, "thr-stranger", parent="thr-elsewhere"))


def test_traffic_of_an_unknown_thread_is_passed_on_not_shown_as_the_parents() -> None:
    p = in_turn()
    events = notify(p, "item/agentMessage/delta", {
        "threadId": "thr-unknown", "turnId": "t", "itemId": "m", "delta": "not mine"})
    assert [type(e) for e in events] == [OtherUpdate]
    # Its turn's end does not end ours.
    events = child_turn(p, "turn/completed", "completed", child="thr-unknown")
    assert not any(isinstance(e, TurnEnded) for e in events) and p.client.turn.running


def test_agent_states_end_a_child_with_no_turn_known() -> None:
    p = in_turn()
    notify(p, "item/started", {"threadId": THREAD, "turnId": TURN,
                               "item": spawn_item("inProgress", "pendingInit")})
    events = notify(p, "item/completed", {"threadId": THREAD, "turnId": TURN,
                                          "item": spawn_item("completed", "errored")})
    [failed] = changes(events)
    assert failed.state == "failed" and not failed.cancellable


def test_a_late_end_of_an_earlier_child_turn_is_ignored() -> None:
    p = running_child()
    child_turn(p, "turn/completed", "completed")
    child_turn(p, "turn/started", turn="turn-child-2")  # a follow-up task
    assert not changes(child_turn(p, "turn/completed", "failed", turn=CHILD_TURN))
    assert p.client.children.get(CHILD).state == "running"  # type: ignore[union-attr]


def test_ids_that_are_not_strings_name_no_thread() -> None:
    """Any JSON value may stand where a thread id belongs (found by the core fuzz test)."""
    p = running_child()
    for odd in ([CHILD], {"id": CHILD}, 7, None):
        events = notify(p, "item/agentMessage/delta", {
            "threadId": odd, "turnId": TURN, "itemId": "m", "delta": "x"})
        assert events == [MessageChunk(text="x", message_id="m")]  # as a thread-less delta
        assert not changes(notify(p, "thread/started", {"thread": {
            "id": "thr-odd", "parentThreadId": odd}}))
        item = {**spawn_item("completed", "running", ["thr-odd"]), "senderThreadId": odd}
        assert not changes(notify(p, "item/completed", {"threadId": THREAD, "turnId": TURN,
                                                        "item": item}))
    assert p.client.turn.running and p.client.children.count == 1
