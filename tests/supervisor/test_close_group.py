"""Group commit of turn closes (supervisor/storage/close_group.py): closes ready in the
same scheduler round of a burst share one transaction; a lone close does not
wait for anyone; each keeps its own outcome and notifications.  Transactions are
counted where they land, in the database's write-ahead log (tests/support/wal.py),
not by a counter of the store's."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio
import trio.testing

from supervisor.bus import EventBus
from supervisor.notify import Notifier
from supervisor.storage.close_group import CloseGroup
from supervisor.storage.db import ClosedRow, Db, StoreUnavailable, TurnClose
from supervisor.storage.store import Store
from tests.support.bus_frames import queued_json
from tests.support.wal import WalCommits

CANCELLED = ("Turn cancelled by user", {"cancelled": True, "variant": "warning"})


def _running_turns(db: Db, n: int) -> list[tuple[str, str]]:
    """(session id, turn id) of ``n`` sessions with a running turn."""
    task = db.create_task(db.ensure_workspace("default"), "t").id
    out = []
    for _ in range(n):
        sid = db.create_session(task, "mock").id
        turn, *_ = db.open_turn(sid, "hi")
        out.append((sid, turn.id))
    return out


def test_close_turns_is_one_transaction_and_each_close_its_own(tmp_path: Path) -> None:
    db = Db(tmp_path / "t.db")
    (s1, t1), (s2, t2), (_, t3) = _running_turns(db, 3)
    db.close_turn(t3, state="completed", stop_reason="end_turn")
    db.queue_add(s1, "later", max_entries=10)
    wal = WalCommits(tmp_path / "t.db")
    rows = db.close_turns([TurnClose(t1, "cancelled", "cancelled", CANCELLED, park_queue=True),
                           TurnClose(t3, "cancelled", "cancelled", CANCELLED),
                           TurnClose(t2, "completed", "end_turn")])
    assert wal.since() == 1  # one transaction on disk for the three
    (c1, m1, sess1, q1), gone, (c2, m2, sess2, q2) = rows
    assert gone == (False, None, None, None)  # closed already: nothing, the others go on
    assert c1 and m1 is not None and m1.content == CANCELLED[0] and m1.session_id == s1
    assert sess1 is not None and sess1.id == s1 and q1 is not None and not q1.auto_run
    assert c2 and m2 is None and sess2 is not None and sess2.id == s2 and q2 is None
    # The sessions as the closes read them back are the sessions as stored.
    assert sess1 == db.get_session(s1) and sess1.queued_count == 1 and not sess1.auto_run
    assert sess2 == db.get_session(s2) and sess2.workspace_id == sess1.workspace_id
    assert q1 == db.queue_state(s1)
    assert db.get_turn(t1).state == "cancelled"  # type: ignore[union-attr]
    assert db.get_turn(t2).state == "completed"  # type: ignore[union-attr]
    assert db.count_status_messages(t1) == 1 and db.count_status_messages(t3) == 0


class Rig:
    def __init__(self, tmp_path: Path, n: int, wait_s: float = 30.0) -> None:
        self.bus = EventBus()
        self.store = Store.open(tmp_path / "t.db", Notifier(self.bus), wait_s=wait_s)
        self.turns = _running_turns(self.store.db, n)
        self.sub = self.bus.subscriber()
        for sid, _ in self.turns:
            self.sub.subscribe(sid)

    async def close(self, i: int, out: dict[int, object]) -> None:
        """A close as the closer makes it: the store's, then its publication."""
        sid, turn_id = self.turns[i]
        try:
            closed = await self.store.close_turn(turn_id, state="cancelled",
                                                 stop_reason="cancelled", status=CANCELLED)
        except StoreUnavailable as exc:
            out[i] = exc
            return
        out[i] = closed
        self.store.notify.publish(self.store.notify.close_notes(
            sid, turn_id, (),
            closed=None if closed is None else (closed.status, closed.session, closed.queue),
            stop_reason="cancelled", acknowledged=False))

    def waiting(self) -> set[str]:
        return {f["payload"]["session_id"] for f in queued_json(self.sub)
                if f["action"] == "session.state_changed"
                and f["payload"]["new_state"] == "WAITING_FOR_INPUT"}


async def _burst(rig: Rig, indexes: range, out: dict[int, object]) -> None:
    """Closes that become ready in the same scheduler round."""
    async with trio.open_nursery() as nursery:
        for i in indexes:
            nursery.start_soon(rig.close, i, out)


@pytest.fixture
def still_clock() -> trio.testing.MockClock:
    """Time stands still unless a test moves it: "within the window" is exact."""
    return trio.testing.MockClock()


async def test_closes_ready_together_in_a_burst_share_one_commit(
        tmp_path: Path, still_clock: trio.testing.MockClock) -> None:
    rig = Rig(tmp_path, 5)
    out: dict[int, object] = {}
    await rig.close(0, out)  # the burst's first close: alone, at once
    wal = WalCommits(tmp_path / "t.db")
    await _burst(rig, range(1, 5), out)
    assert wal.since() == 1  # the four closes (each written: below) in one transaction
    assert all(out[i] is not None and not isinstance(out[i], Exception) for i in range(5))
    assert rig.waiting() == {sid for sid, _ in rig.turns}
    for _, turn_id in rig.turns:
        assert rig.store.db.count_status_messages(turn_id) == 1


async def test_a_close_outside_a_burst_commits_alone_and_at_once(
        tmp_path: Path, still_clock: trio.testing.MockClock) -> None:
    rig = Rig(tmp_path, 4)
    out: dict[int, object] = {}
    await rig.close(0, out)
    wal = WalCommits(tmp_path / "t.db")
    still_clock.jump(1)  # long after the last one: not a burst
    await _burst(rig, range(1, 3), out)
    assert wal.since() == 2  # a transaction each: none grouped
    await rig.close(3, out)  # in the window, but none joined it: its own commit
    assert wal.since() == 3
    assert rig.waiting() == {sid for sid, _ in rig.turns}


async def test_a_refused_group_is_refused_to_each_of_its_closes(
        tmp_path: Path, still_clock: trio.testing.MockClock) -> None:
    rig = Rig(tmp_path, 3, wait_s=0.05)
    out: dict[int, object] = {}
    await rig.close(0, out)
    other = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # someone else holds the write lock
    try:
        await _burst(rig, range(1, 3), out)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert isinstance(out[1], StoreUnavailable) and isinstance(out[2], StoreUnavailable)
    assert rig.waiting() == {rig.turns[0][0]}  # nothing announced that was not written
    # Written once the store answers, as any refused close.
    await _burst(rig, range(1, 3), out)
    assert not isinstance(out[1], Exception) and not isinstance(out[2], Exception)
    assert rig.waiting() == {rig.turns[1][0], rig.turns[2][0]}


async def test_a_follower_whose_group_failed_otherwise_closes_alone(
        tmp_path: Path, still_clock: trio.testing.MockClock) -> None:
    rig = Rig(tmp_path, 3)
    out: dict[int, object] = {}
    await rig.close(0, out)
    real = functools.partial(rig.store.runner.commit, rig.store.db.close_turns)

    async def no_groups(closes: Sequence[TurnClose]) -> list[ClosedRow]:
        if len(closes) > 1:
            raise RuntimeError("the group's transaction failed before it ran")
        return await real(closes)

    rig.store.closes._run = no_groups

    async def close(i: int) -> None:
        try:
            await rig.close(i, out)
        except RuntimeError as exc:
            out[i] = exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(close, 1)
        nursery.start_soon(close, 2)
    # The leader (either) failed; the other was not left waiting, nor lost.
    failed = [i for i in (1, 2) if isinstance(out[i], RuntimeError)]
    assert len(failed) == 1
    (ok,) = {1, 2} - set(failed)
    assert rig.store.db.get_turn(rig.turns[ok][1]).state == "cancelled"  # type: ignore[union-attr]
    assert rig.waiting() == {rig.turns[0][0], rig.turns[ok][0]}


async def _burst_of_two(bound_s: float) -> tuple[str, dict[str, object], float]:
    """After a lone close, two closes ready in the same round (whichever runs
    first leads): ``patient`` unbounded, ``bounded`` inside a shield of
    ``bound_s``; the group's commit takes 10 s and, as a worker thread's, is
    not cancellable.  Returns who led, what each got and when, and the start."""
    release = trio.Event()
    led: list[str] = []

    async def commit(closes: Sequence[TurnClose]) -> list[ClosedRow]:
        if closes[0].turn_id != "first":
            led.append(closes[0].turn_id)
            with trio.CancelScope(shield=True):
                await release.wait()  # a disk that takes its time
        return [(True, None, None, None)] * len(closes)

    group = CloseGroup(commit, wait_s=30.0)
    outcome: dict[str, object] = {}

    async def close(name: str, within_s: float) -> None:
        with trio.CancelScope(shield=True, deadline=trio.current_time() + within_s):
            try:
                outcome[name] = await group.close(TurnClose(name, "cancelled", "cancelled"))
            except StoreUnavailable as exc:
                outcome[name] = exc
        outcome[name + "_at"] = trio.current_time()

    await close("first", 100.0)  # alone, at once; the next two are a burst
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(close, "patient", 100.0)
        nursery.start_soon(close, "bounded", bound_s)
        await trio.sleep(10)
        release.set()
    return led[0], outcome, start


async def test_a_follower_keeps_the_bound_of_the_shield_around_it(
        autojump_clock: trio.testing.MockClock) -> None:
    """A follower waits for its leader shielded, but never past the deadline of
    a shield its caller holds (a turn's close bounded by its own cleanup): it
    gives up there with ``StoreUnavailable``, which the caller retries."""
    for _attempt in range(50):
        leader, outcome, start = await _burst_of_two(2.0)
        if leader == "patient":
            break
    else:
        pytest.fail("the bounded close never followed")
    assert isinstance(outcome["bounded"], StoreUnavailable)
    assert outcome["bounded_at"] == pytest.approx(start + 2.0)
    assert outcome["patient"] == (True, None, None, None)
    assert outcome["patient_at"] == pytest.approx(start + 10.0)
