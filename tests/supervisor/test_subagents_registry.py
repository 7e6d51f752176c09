"""supervisor/subagents.py without an agent: what the session DTO lists, and the
answers of ``subagent.cancel`` for each kind of child."""

from __future__ import annotations

import pytest

from protocols.events import SubagentChanged, SubagentState
from supervisor.errors import Conflict, NotFound
from supervisor.subagents import SubagentControl, Subagents


def ev(sid: str, state: SubagentState = "running", cancellable: bool = True) -> SubagentChanged:
    return SubagentChanged(subagent_id=sid, title=f"T {sid}", state=state,
                           cancellable=cancellable and state in ("running", "requires_action"))


def test_a_new_turns_first_child_drops_the_ended_ones_and_keeps_a_working_one() -> None:
    subs = Subagents()
    assert subs.dtos("s") == []
    subs.record("s", "t1", ev("a"))
    subs.record("s", "t1", ev("b"))
    subs.record("s", "t1", ev("a", "completed"))
    # A child keeps its turn even when it changes between turns.
    assert subs.record("s", None, ev("b", "running"))["turn_id"] == "t1"
    subs.record("s", "t2", ev("c"))
    assert [(d["id"], d["turn_id"]) for d in subs.dtos("s")] == [("b", "t1"), ("c", "t2")]
    assert subs.dtos("s")[0] == {"id": "b", "title": "T b", "state": "running",
                                 "cancellable": True, "turn_id": "t1", "task": "",
                                 "last_activity": ""}


def test_an_agent_that_stopped_leaves_no_child_running() -> None:
    subs = Subagents()
    subs.record("s", "t1", ev("a"))
    subs.record("s", "t1", ev("b", "cancelled"))
    changed = subs.agent_stopped("s")
    assert [(d["id"], d["state"], d["cancellable"]) for d in changed] == [("a", "unknown", False)]
    assert subs.agent_stopped("s") == []
    subs.forget("s")
    assert subs.dtos("s") == []


def test_an_escalated_parent_cancel_cancels_every_child_at_work() -> None:
    subs = Subagents()
    subs.record("s", "t1", ev("run"))
    subs.record("s", "t1", ev("stopping", "cancelling"))
    subs.record("s", "t1", ev("done", "completed"))
    changed = subs.parent_stopped("s")
    assert [(d["id"], d["state"], d["cancellable"]) for d in changed] == [
        ("run", "cancelled", False), ("stopping", "cancelled", False)]
    assert subs.parent_stopped("s") == []
    # The given-up agent's later word on them changes nothing; an agent
    # stopping afterwards leaves them cancelled.
    assert subs.record("s", None, ev("run", "completed"))["state"] == "cancelled"
    assert subs.record("s", None, ev("stopping", "running"))["state"] == "cancelled"
    assert subs.agent_stopped("s") == []
    # They are history for the next turn's first child.
    subs.record("s", "t2", ev("next"))
    assert [d["id"] for d in subs.dtos("s")] == ["next"]
    assert subs.parent_stopped("nobody") == []


def test_a_child_first_seen_between_turns_keeps_the_list() -> None:
    subs = Subagents()
    subs.record("s", "t1", ev("a", "completed"))
    subs.record("s", None, ev("b"))
    subs.record("s", "t1", ev("c"))
    assert [d["id"] for d in subs.dtos("s")] == ["a", "b", "c"]


class FakeAdapter:
    def __init__(self, writes: bool) -> None:
        self.writes = writes
        self.cancelled: list[str] = []

    def subagent(self, subagent_id: str) -> SubagentChanged | None:
        return None

    async def cancel_subagent(self, subagent_id: str) -> bool:
        self.cancelled.append(subagent_id)
        return self.writes


async def test_cancel_answers() -> None:
    subs = Subagents()
    adapter = FakeAdapter(writes=True)
    control = SubagentControl(lambda sid: adapter if sid == "s" else None,  # type: ignore[arg-type,return-value]
                              subs)
    subs.record("s", "t1", ev("run"))
    subs.record("s", "t1", ev("done", "completed"))
    subs.record("s", "t1", ev("stopping", "cancelling"))
    subs.record("s", "t1", ev("closed", cancellable=False))
    with pytest.raises(NotFound):
        await control.cancel("s", "nope")
    assert (await control.cancel("s", "run"))[0] == "cancel_sent"
    assert (await control.cancel("s", "done"))[0] == "already_finished"
    assert (await control.cancel("s", "stopping"))[0] == "already_cancelling"
    with pytest.raises(Conflict):
        await control.cancel("s", "closed")
    assert adapter.cancelled == ["run"]
    # No agent running any more: nothing to stop.
    subs.record("x", "t1", ev("orphan"))
    assert (await control.cancel("x", "orphan"))[0] == "already_finished"
    # An executor that cannot send it (agentctl): CONFLICT, said so.
    control = SubagentControl(lambda sid: FakeAdapter(writes=False), subs)  # type: ignore[arg-type,return-value]
    with pytest.raises(Conflict, match="executor"):
        await control.cancel("s", "run")




def test_a_childs_last_activity_is_its_latest_tool_or_the_end_of_its_text() -> None:
    subs = Subagents()
    subs.record("s", "t1", ev("a"))
    assert subs.activity("s", "a", "", "Read notes.txt", now=0.0) is not None
    assert subs.dtos("s")[0]["last_activity"] == "Read notes.txt"
    # Text within a second of the last publication is kept, not published.
    assert subs.activity("s", "a", "counting one ", "", now=0.5) is None
    dto = subs.activity("s", "a", "two " * 40, "", now=1.6)
    assert dto is not None
    assert dto["last_activity"].startswith("…") and dto["last_activity"].endswith("two")
    assert len(dto["last_activity"]) <= 81
    assert subs.activity("s", "unknown", "x", "", now=5.0) is None


def test_an_ended_child_leaves_its_trace_once() -> None:
    subs = Subagents()
    subs.record("s", "t1", ev("a"))
    subs.record("s", "t1", ev("b"))
    subs.activity("s", "a", "", "Read notes.txt", now=0.0)
    subs.activity("s", "a", "hello ", "", now=0.1)
    subs.activity("s", "a", "world", "", now=0.2)
    assert subs.take_ended("s") == []
    subs.record("s", "t1", ev("a", "completed"))
    [(turn, content, meta)] = subs.take_ended("s")
    assert (turn, content) == ("t1", "T a")
    assert meta["outcome"] == "finished" and meta["output"] == "hello world"
    assert meta["tools"] == ["Read notes.txt"]
    assert subs.take_ended("s") == []  # written once
    subs.asked_to_stop("s", "b")
    subs.record("s", "t1", ev("b", "cancelled"))
    assert [m["outcome"] for _, _, m in subs.take_ended("s")] == ["stopped_by_you"]


def test_a_child_stopped_by_the_turns_cancel_or_by_the_agent() -> None:
    subs = Subagents()
    subs.record("s", "t1", ev("a"))
    subs.record("s", "t1", ev("b"))
    subs.record("s", "t1", ev("c"))
    subs.record("s", "t1", ev("a", "cancelling"), by_user=True)  # the person's cancel
    subs.record("s", "t1", ev("a", "cancelled"))
    subs.record("s", "t1", ev("b", "cancelled"))  # the agent's own doing
    subs.record("s", "t1", ev("c", "failed"))
    assert [m["outcome"] for _, _, m in subs.take_ended("s")] == [
        "stopped_by_you", "stopped", "failed"]
    subs.record("s", "t2", ev("d"))
    subs.agent_stopped("s")
    assert [m["outcome"] for _, _, m in subs.take_ended("s")] == ["ran"]


def test_a_long_output_keeps_its_end() -> None:
    subs = Subagents()
    subs.record("s", "t1", ev("a"))
    subs.activity("s", "a", "x" * 9000 + "END", "", now=0.0)
    subs.record("s", "t1", ev("a", "completed"))
    [(_, _, meta)] = subs.take_ended("s")
    assert meta["output_cut"] is True and meta["output"].endswith("END")
    assert len(meta["output"]) == 8000
