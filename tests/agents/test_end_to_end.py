"""The cancel path end to end: WebSocket API → ``turnvisor serve`` → a real agent CLI.

The server is ``web.server.serve`` (what ``turnvisor serve`` runs: the
supervisor tree and real Hypercorn) in the test's nursery, its data dir holding
a ``turnvisor.toml`` that overrides the agent's built-in profile the way a user
would: the cached binary, a throw-away home whose config sends every model
request to the fake provider on 127.0.0.1 (``homes.launch``), and the agent's
working directory.  A trio-websocket client then does what the page does:
``task.create``, ``session.launch``, ``session.subscribe``, ``message.add``,
``agent.cancel``, ``permission.respond``.

Checked for each agent: a cancel mid-stream succeeds with the cancellation
progress published ``true`` then ``false`` on consecutive revisions, the session
back to ``WAITING_FOR_INPUT``, exactly one "Turn cancelled by user" status
message, the upstream HTTP stream aborted, and the same agent process (same
process group) answering the next prompt; a cancel before the first output
(model silent, or right after the prompt); the permission prompt answered over
the WebSocket, and a cancel that finds one pending.  Every wait is bounded;
after the server stops, no process of the agent may be left.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio

from protocols.sandbox import resolve_mode
from supervisor.config import Config
from supervisor.session.lifecycle import CancelOutcome
from tests.fake_provider import FakeProvider, StreamRecord
from tests.support.leaks import kill_group
from tests.support.server import Server, running_server
from tests.support.ws import WsClient, ws_client

from .cli import AGENTS_DIR, find_cli
from .harness import START_S, assert_gone, descendants
from .homes import agents_toml, launch, profile_table, server_environ

pytestmark = [pytest.mark.agents, pytest.mark.slow]

#: Codex and at least one ACP agent are required by issue 6; all four are cheap enough.
E2E_AGENTS = ("codex", "gemini", "auggie", "claude")

# Decided at collection (a skip raised inside a trio test loses its reason).
per_agent = pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.skipif(
        find_cli(name) is None,
        reason=f"{name} CLI is not installed in {AGENTS_DIR} (run scripts/install_agents.sh)",
    ))
    for name in E2E_AGENTS
])

TOKENS = 40
INTERVAL_S = 0.2
APPROVED_FILE = "turnvisor-approved.txt"
CANCELLED_STATUS = ("Turn cancelled by user", {"cancelled": True, "variant": "warning"})
#: Bound on one whole test (agent start-up ~3 s, a few turns of a few seconds).
TEST_S = 150.0
#: Bound on one turn or one notification.
STEP_S = 30.0


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(token_interval_s=INTERVAL_S, n_tokens=TOKENS, wait_s=30.0,
                      tool_command=f"touch {APPROVED_FILE}") as p:
        yield p


# -- the profile, as turnvisor.toml ------------------------------------------------

def write_profile(data_dir: Path, name: str, provider: FakeProvider, tmp: Path,
                  monkeypatch: pytest.MonkeyPatch,
                  thread_params: dict[str, Any] | None = None,
                  acp_version: int | None = None) -> Config:
    """``DATA_DIR/turnvisor.toml`` overriding the built-in profile ``name`` so that
    the agent talks to ``provider`` only; the Config ``turnvisor serve`` would load."""
    spec = launch(name, provider.url, tmp)
    assert spec is not None  # skipped at collection otherwise
    # The profile's env is merged over the server's environment: leave out of the
    # server's (this process's) what the agent must not see (proxies, keys, IS_SANDBOX).
    server_env = server_environ(spec)
    for key in list(os.environ):
        if key not in server_env:
            monkeypatch.delenv(key)
    data_dir.mkdir(parents=True, exist_ok=True)
    table = profile_table(spec, server_env, thread_params)
    if acp_version is not None:
        table["acp_version"] = acp_version
    (data_dir / "turnvisor.toml").write_text(agents_toml({name: table}))
    cfg = Config.load(data_dir)
    assert cfg.profiles[name].command == tuple(spec.command)
    return cfg


# -- one session over the WebSocket -------------------------------------------------

#: Answers a ``session.permission.requested`` payload: an option id, None for
#: "cancelled", or ``...`` to leave the request pending.
Policy = Callable[[dict[str, Any]], Any]


def option(payload: dict[str, Any], *kinds: str) -> str:
    for kind in kinds:
        for o in payload["options"]:
            if o["kind"] == kind:
                return str(o["option_id"])
    raise AssertionError(f"no option of kind {kinds} in {payload['options']}")


def decline(payload: dict[str, Any]) -> str:
    """Auggie asks to index a new workspace on its first prompt: say no."""
    return option(payload, "reject_once", "reject_always")


def allow(payload: dict[str, Any]) -> str:
    return option(payload, "allow_once", "allow_always")


@dataclass
class E2E:
    name: str
    srv: Server
    ws: WsClient
    provider: FakeProvider
    cwd: str
    task_id: str
    sid: str
    pgid: int
    policy: Policy | None
    #: Every process seen under the agent while the test ran.
    seen_pids: set[int] = field(default_factory=set)
    #: Permission requests answered by the policy: (payload, option id).
    answered: list[tuple[dict[str, Any], Any]] = field(default_factory=list)

    def mark(self) -> int:
        return len(self.ws.notifications)

    def since(self, mark: int, action: str) -> list[dict[str, Any]]:
        return [n["payload"] for n in self.ws.notifications[mark:]
                if n["action"] == action and n["payload"].get("session_id") == self.sid]

    async def wait(self, mark: int, pred: Callable[[dict[str, Any]], bool], what: str,
                   timeout: float = STEP_S) -> dict[str, Any]:
        """The first notification of this session after ``mark`` matching ``pred``."""
        try:
            with trio.fail_after(timeout):
                seen = mark
                while True:
                    for frame in self.ws.notifications[seen:]:
                        if frame["payload"].get("session_id") == self.sid and pred(frame):
                            return frame
                    seen = len(self.ws.notifications)
                    with trio.move_on_after(0.1):
                        await self.ws.changed()
        except trio.TooSlowError:
            raise AssertionError(
                f"{self.name}: no {what} within {timeout}s; last notifications "
                f"{[(n['action'], n['payload']) for n in self.ws.notifications[-6:]]}; "
                f"streams {self.provider.snapshot()[-4:]}"
            ) from None

    async def wait_streams(self, pred: Callable[[list[StreamRecord]], bool], what: str,
                           timeout: float = STEP_S) -> list[StreamRecord]:
        try:
            with trio.fail_after(timeout):
                while not pred(snap := self.provider.main_streams()):
                    await trio.sleep(0.02)
                return snap
        except trio.TooSlowError:
            raise AssertionError(f"{self.name}: {what} not within {timeout}s; "
                                 f"streams {self.provider.snapshot()[-6:]}") from None

    async def prompt(self, text: str) -> tuple[int, str]:
        """``message.add``; returns the notification mark before it and the turn id."""
        mark = self.mark()
        msg = await self.ws.call("message.add", {"session_id": self.sid, "content": text})
        assert msg["role"] == "user" and msg["content"] == text, msg
        return mark, str(msg["turn_id"])

    async def turn_end(self, mark: int, turn_id: str) -> str:
        done = await self.wait(mark, lambda f: f["action"] == "session.turn.completed"
                               and f["payload"]["turn_id"] == turn_id, f"end of turn {turn_id}")
        return str(done["payload"]["stop_reason"])

    async def messages(self) -> list[dict[str, Any]]:
        return list((await self.ws.call("message.list", {"session_id": self.sid}))["messages"])

    async def session(self) -> dict[str, Any]:
        sessions = (await self.ws.call("session.list", {"task_id": self.task_id}))["sessions"]
        return next(s for s in sessions if s["id"] == self.sid)

    async def agent_text(self, turn_id: str) -> str:
        texts = [m["content"] for m in await self.messages()
                 if m["turn_id"] == turn_id and m["role"] == "agent" and m["kind"] == "text"]
        # Usually one message; Auggie may put its workspace-indexing notice into
        # the first turn as text of its own, before the answer.
        return "".join(texts)

    async def quick_turn(self) -> None:
        """The session still works: a short prompt streams and ends normally, on the
        same agent process."""
        mark, turn_id = await self.prompt("QUICK: say three words")
        assert await self.turn_end(mark, turn_id) == "end_turn"
        assert "tok0 tok1 tok2" in await self.agent_text(turn_id)
        self.assert_same_agent()
        state = await self.wait(mark, _state("WAITING_FOR_INPUT"), "WAITING_FOR_INPUT")
        assert state["payload"]["cancellation_pending"] is False

    def assert_same_agent(self) -> None:
        ex = self.srv.sup.lifecycle.executions.get(self.sid)
        assert ex is not None, f"{self.name}: the session has no running agent"
        assert ex.agent.pgid == self.pgid, f"{self.name}: the agent was restarted"

    def revision(self) -> int:
        """The newest cancellation revision this client has seen for the session."""
        revs = [n["payload"]["cancellation_revision"] for n in self.ws.notifications
                if n["payload"].get("session_id") == self.sid
                and "cancellation_revision" in n["payload"]]
        return int(max(revs))

    async def cancel(self) -> float:
        """``agent.cancel``; asserts success; returns its round trip in ms."""
        t0 = trio.current_time()
        frame = await self.ws.request("agent.cancel", {"session_id": self.sid}, timeout=STEP_S)
        assert frame["type"] == "response", frame
        assert (frame["payload"]["success"], frame["payload"]["session_id"]) == (True, self.sid)
        return (trio.current_time() - t0) * 1000

    async def assert_cancelled(self, mark: int, turn_id: str, rev: int) -> None:
        """What a settled cancel must leave: progress true → false on consecutive
        revisions, the turn ``cancelled`` (acknowledged by the agent, not escalated),
        the session waiting, one status message."""
        changes = [(c["cancellation_pending"], c["cancellation_revision"])
                   for c in self.since(mark, "session.cancellation_changed")]
        assert changes == [(True, rev + 1), (False, rev + 2)], changes
        assert await self.turn_end(mark, turn_id) == "cancelled"
        status = [m["metadata"] for m in await self.messages()
                  if m["turn_id"] == turn_id and m["kind"] == "status"]
        # An agent that answered the cancel otherwise (opencode: end_turn) still
        # leaves the user's cancel, but did not acknowledge it.
        acknowledged = not any("agent_stop_reason" in meta for meta in status)
        assert [c["turn_id"] for c in self.since(mark, "session.agent.cancelled")] == (
            [turn_id] if acknowledged else [])
        op = self.srv.sup.orchestrator.settled[-1]
        assert op.outcome is CancelOutcome.ACKNOWLEDGED, op
        states = [s["new_state"] for s in self.since(mark, "session.state_changed")]
        assert states[-1] == "WAITING_FOR_INPUT", states
        s = await self.session()
        assert (s["state"], s["cancellation_pending"], s["cancellation_revision"]) == (
            "WAITING_FOR_INPUT", False, rev + 2), s
        statuses = [(m["content"], m["metadata"]) for m in await self.messages()
                    if m["turn_id"] == turn_id and m["role"] == "system"
                    and m["kind"] == "status"]
        # The agent's own answer, when it was not "cancelled", rides along in the
        # metadata (agent_stop_reason); the rest is the user's cancel.
        plain = [(text, {k: v for k, v in meta.items() if not k.startswith("agent_")})
                 for text, meta in statuses]
        assert plain == [CANCELLED_STATUS], statuses
        added = [n["message"] for n in self.since(mark, "session.message.added")
                 if n["message"]["kind"] == "status"]
        assert len(added) == 1, added


def _state(state: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: (f["action"] == "session.state_changed"
                      and f["payload"]["new_state"] == state)


def _streamed(at_least: int) -> Callable[[dict[str, Any]], bool]:
    def pred(f: dict[str, Any]) -> bool:
        if f["action"] != "session.message.updated":
            return False
        msg = f["payload"]["message"]
        return bool(msg["role"] == "agent" and msg["kind"] == "text"
                    and f"tok{at_least - 1} " in msg["content"])
    return pred


async def _answer_permissions(e: E2E) -> None:
    """Answer each permission request with ``e.policy`` over the WS, as the page does:
    the pending ones ``message.list`` shows (Auggie asks right after ``session/new``,
    before this client subscribed), then each ``session.permission.requested``."""
    done: set[str] = set()

    async def answer(payload: dict[str, Any]) -> None:
        if e.policy is None or payload["request_id"] in done:
            return
        choice = e.policy(payload)
        if choice is ...:
            return
        done.add(payload["request_id"])
        e.answered.append((payload, choice))
        body: dict[str, Any] = {"session_id": e.sid, "request_id": payload["request_id"]}
        body.update({"cancelled": True} if choice is None else {"option_id": choice})
        frame = await e.ws.request("permission.respond", body, timeout=STEP_S)
        assert frame["type"] == "response", frame
        assert frame["payload"] == {"success": True}

    for m in await e.messages():
        if m["kind"] == "permission" and m["metadata"]["status"] == "pending":
            await answer({"session_id": e.sid, "message_id": m["id"], "title": m["content"],
                          "request_id": m["metadata"]["request_id"],
                          "options": m["metadata"]["options"]})
    seen = 0
    while True:
        for frame in e.ws.notifications[seen:]:
            if frame["action"] == "session.permission.requested":
                await answer(frame["payload"])
        seen = len(e.ws.notifications)
        with trio.move_on_after(0.2):
            await e.ws.changed()


async def _scan_descendants(e: E2E) -> None:
    while True:
        e.seen_pids |= descendants(e.pgid)
        await trio.sleep(0.25)


@asynccontextmanager
async def e2e_session(name: str, provider: FakeProvider, tmp: Path,
                      monkeypatch: pytest.MonkeyPatch, *, policy: Policy | None = decline,
                      thread_params: dict[str, Any] | None = None,
                      unchecked: set[int] | None = None,
                      timeouts: dict[str, float] | None = None,
                      agent_may_exit: bool = False,
                      acp_version: int | None = None) -> AsyncIterator[E2E]:
    """A server with ``name`` pointed at ``provider``, a WS client subscribed to one
    launched session.  On exit the server stops; then no process of the agent may be
    alive (its group, or any process seen under it, but for the pids the test puts in
    ``unchecked`` to check them itself).  ``timeouts`` are the server's, over the
    agent start-up bound; ``agent_may_exit`` for a test that ends the agent itself."""
    data_dir = tmp / "data"
    cfg = write_profile(data_dir, name, provider, tmp, monkeypatch, thread_params, acp_version)
    # Real agents run in the default sandbox (bwrap: make test installs it).
    assert resolve_mode(cfg.profiles[name].sandbox) == "bwrap"
    pgids: list[int] = []
    seen: set[int] = set()
    try:
        async with running_server(data_dir,
                                  timeouts={"agent_start_s": START_S, **(timeouts or {})},
                                  profiles=cfg.profiles,
                                  # No turn checkpoints: these tests race the cancel
                                  # against the prompt's write to the real agent ("at
                                  # once, as soon as message.add has answered"); one
                                  # before the prompt would withhold it instead (covered
                                  # by tests/supervisor/test_continuity_timing.py).
                                  projects=dataclasses.replace(cfg.projects,
                                                               checkpoints=False),
                                  ) as srv, ws_client(srv) as ws:
            task = await ws.call("task.create", {"title": f"e2e {name}"})
            start_s = (timeouts or {}).get("agent_start_s", START_S)
            frame = await ws.request("session.launch", {"task_id": task["id"], "agent": name},
                                     timeout=start_s + 5)
            assert frame["type"] == "response", frame
            session = frame["payload"]
            assert (session["agent"], session["state"]) == (name, "WAITING_FOR_INPUT"), session
            sid = session["id"]
            ex = srv.sup.lifecycle.executions[sid]
            assert ex.agent.pgid is not None
            pgids.append(ex.agent.pgid)
            e = E2E(name=name, srv=srv, ws=ws, provider=provider, cwd=cfg.profiles[name].cwd or "",
                    task_id=task["id"], sid=sid, pgid=ex.agent.pgid, policy=policy,
                    seen_pids=seen)
            assert await ws.call("session.subscribe", {"session_id": sid}) == {"success": True}
            snap = await e.wait(0, _state("WAITING_FOR_INPUT"), "the subscribe snapshot")
            assert snap["payload"]["cancellation_pending"] is False
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_answer_permissions, e)
                nursery.start_soon(_scan_descendants, e)
                yield e
                if not agent_may_exit:
                    e.assert_same_agent()
                nursery.cancel_scope.cancel()
        # The server has stopped (SIGTERM to the group, grace, SIGKILL).
        for pgid in pgids:
            await assert_gone(pgid, (seen | {pgid}) - (unchecked or set()))
    finally:
        for pgid in pgids:
            kill_group(pgid)


# -- the tests ------------------------------------------------------------------------

@per_agent
async def test_cancel_mid_stream_over_websocket(
    name: str, provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(TEST_S):
        async with e2e_session(name, provider, tmp_path, monkeypatch) as e:
            rev = e.revision()
            mark, turn_id = await e.prompt("SLOW: stream many tokens")
            await e.wait(mark, _state("RUNNING"), "RUNNING")
            await e.wait(mark, _streamed(2), "two streamed tokens in session.message.updated")
            assert not e.since(mark, "session.turn.completed")
            slow = [r for r in e.provider.main_streams() if r.mode == "slow" and r.open]
            assert slow, f"no model stream open at the cancel: {e.provider.snapshot()}"
            ids = {r.id for r in slow}

            ms = await e.cancel()
            await e.assert_cancelled(mark, turn_id, rev)
            streamed = await e.agent_text(turn_id)
            # (Auggie puts a line about declined indexing before the first answer.)
            assert "tok0 tok1 " in streamed, streamed
            assert f"tok{TOKENS - 1} " not in streamed

            final = await e.wait_streams(
                lambda s: all(not r.open for r in s if r.id in ids), "the model stream's end",
                timeout=5.0)
            for rec in (r for r in final if r.id in ids):
                assert rec.aborted, f"upstream stream not aborted: {rec}"
                assert rec.tokens_sent < TOKENS
            print(f"[{name}] e2e mid-stream agent.cancel answered in {ms:.1f} ms")

            await e.quick_turn()


@per_agent
async def test_cancel_before_first_output_over_websocket(
    name: str, provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(TEST_S):
        async with e2e_session(name, provider, tmp_path, monkeypatch) as e:
            # Auggie asks about indexing on its first prompt; get that out of the way
            # so that the cancels below race only the model.
            await e.quick_turn()

            # 1. The model request is open and silent.
            rev = e.revision()
            mark, turn_id = await e.prompt("WAIT: think before you answer")
            await e.wait_streams(lambda s: any(r.mode == "wait" and r.open for r in s),
                                 "the model request")
            ids = {r.id for r in e.provider.main_streams() if r.mode == "wait" and r.open}
            await e.cancel()
            await e.assert_cancelled(mark, turn_id, rev)
            assert "tok" not in await e.agent_text(turn_id)
            final = await e.wait_streams(
                lambda s: all(not r.open for r in s if r.id in ids), "the model stream's end",
                timeout=5.0)
            assert all(r.aborted for r in final if r.id in ids), final
            await e.quick_turn()

            # 2. At once, as soon as message.add has answered.
            rev = e.revision()
            mark, turn_id = await e.prompt("WAIT: another question")
            await e.cancel()
            await e.assert_cancelled(mark, turn_id, rev)
            assert "tok" not in await e.agent_text(turn_id)
            # Whatever request the agent had started upstream is closed, not left hanging.
            await e.wait_streams(lambda s: not any(r.open for r in s), "no model stream open",
                                 timeout=5.0)
            await e.quick_turn()


@per_agent
async def test_permission_over_websocket(
    name: str, provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Auggie's only question here is workspace indexing: decline it.  The others ask
    # about the scripted shell command: allow it (Codex asks before any command not
    # known to be safe with approvalPolicy "untrusted").
    policy: Policy = decline if name == "auggie" else allow
    with trio.fail_after(TEST_S):
        async with e2e_session(
            name, provider, tmp_path, monkeypatch, policy=policy,
            thread_params={"approvalPolicy": "untrusted"} if name == "codex" else None,
        ) as e:
            # 1. Asked and answered over the WebSocket.
            mark, turn_id = await e.prompt("QUICK: hi" if name == "auggie"
                                           else "TOOL: create the file")
            assert await e.turn_end(mark, turn_id) == "end_turn"
            assert e.answered, f"{name} asked no permission"
            payload, choice = e.answered[0]
            # Auggie asks on its own after session/new, not about the prompt: before
            # the first turn opened its card belongs to no turn, after, to that turn.
            asked = [m for m in await e.messages() if m["kind"] == "permission"]
            assert [m["id"] for m in asked] == [payload["message_id"]], asked
            assert asked[0]["turn_id"] in ((None, turn_id) if name == "auggie" else (turn_id,))
            meta = asked[0]["metadata"]
            assert (meta["request_id"], meta["status"], meta["option_id"]) == (
                payload["request_id"], "selected", choice), meta
            assert "tok0 tok1 tok2" in await e.agent_text(turn_id)
            if name != "auggie":
                assert (Path(e.cwd) / APPROVED_FILE).exists(), f"{name} did not run it"
                (Path(e.cwd) / APPROVED_FILE).unlink()
            print(f"[{name}] e2e permission {payload['title']!r} answered {choice!r}")

            # 2. A cancel that finds the question pending answers it "cancelled".
            if name == "auggie":
                return  # it asks about indexing once per workspace only
            e.policy = lambda p: ...
            rev = e.revision()
            mark, turn_id = await e.prompt("TOOL: create the file again")
            asked_frame = await e.wait(
                mark, lambda f: f["action"] == "session.permission.requested",
                "a permission request")
            request_id = asked_frame["payload"]["request_id"]
            await e.cancel()
            await e.assert_cancelled(mark, turn_id, rev)
            assert [p["request_id"] for p in e.since(mark, "session.permission.cancelled")] == [
                request_id]
            perm = [m for m in await e.messages()
                    if m["turn_id"] == turn_id and m["kind"] == "permission"]
            assert [m["metadata"]["status"] for m in perm] == ["cancelled"], perm
            assert not (Path(e.cwd) / APPROVED_FILE).exists()
            e.policy = allow
            await e.quick_turn()
