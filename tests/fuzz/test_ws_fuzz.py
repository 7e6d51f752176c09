"""Property: every WebSocket frame a client sends gets a response or an error
envelope — never a closed connection, an INTERNAL_ERROR or a traceback
(DESIGN.md §4: "A malformed frame gets an error, never a closed connection or
a server traceback").

One real server and one connection serve the whole property: Hypothesis runs
in a worker thread and hands each frame to the Trio side with
``trio.from_thread.run``, so an example costs a round trip, not a server.
After each frame a ``ping`` is sent on the same connection: its answer proves
the connection survived; then the frame's own answer is awaited (requests run
concurrently, so it may come after the ping's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.config import Limits
from tests.support.server import running_server
from tests.support.ws import WsClient, ws_client
from web.actions import ACTIONS

from .profiles import PHASES, examples

FRAME_LIMIT = 8 * 1024
UNKNOWN = "00000000-0000-0000-0000-000000000000"
CODES = {"BAD_REQUEST", "VALIDATION_ERROR", "UNAUTHORIZED", "FORBIDDEN", "NOT_FOUND",
         "CONFLICT", "UNKNOWN_ACTION"}
# Not the deletes: a fuzzed delete would take the task the final checks read.
NAMES = [*(a for a in ACTIONS if not a.endswith(".delete")), "session.subscribe",
         "session.unsubscribe"]
FIELDS = ["task_id", "session_id", "title", "content", "agent", "prompt", "limit", "before",
          "request_id", "option_id", "cancelled"]
EVIL_IDS = [UNKNOWN, "../../etc/passwd", "%00", "'; DROP TABLE tasks; --", "*", "%", "_",
            "😀" * 20]

#: Strings that broke, or could break, something downstream of a JSON decode.
NASTY = ["\ud800", "a\udfff", "\ud83d", "\ude00x", "\x00", "\u2028", "\ufeff", "",
         " ", "../..", "'; --", "%s%n", "\\", "a" * 65]
#: Text as JSON can spell it: lone surrogates, NUL, line separators, BOM.
texts = st.sampled_from(NASTY) | st.text(st.characters() | st.sampled_from(
    ["\ud800", "\udfff", "\ud83d", "\ude00", "\x00", "\u2028", "\ufeff", "/", "\\"]),
    max_size=30)
scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | texts)
values = st.recursive(scalars, lambda c: st.lists(c, max_size=4)
                      | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=12)


def frames(task_id: str, session_id: str) -> st.SearchStrategy[str | bytes]:
    ids = st.sampled_from([task_id, session_id, *EVIL_IDS]) | texts
    field_values = {
        "task_id": ids | values, "session_id": ids | values, "before": ids | values,
        "title": texts | values, "content": texts | values,
        "agent": st.sampled_from(["no-such-agent", "", "../mock"]) | values,
        "prompt": texts | values,
        "limit": st.integers(-5, 2000) | values,
        "request_id": texts | values, "option_id": texts | values,
        "cancelled": st.booleans() | values,
    }
    payloads = st.fixed_dictionaries({}, optional=field_values) | values
    # Mostly well-formed requests with fuzzed payloads (deep paths), else anything.
    request = st.fixed_dictionaries({
        "id": st.text(min_size=1, max_size=20), "type": st.just("request"),
        "action": st.sampled_from(NAMES),
        "payload": st.fixed_dictionaries(
            {"task_id": ids, "session_id": ids},
            optional={k: v for k, v in field_values.items()
                      if k not in ("task_id", "session_id")}),
    })
    wild = st.fixed_dictionaries({}, optional={
        "id": st.text(max_size=140) | texts | st.integers() | values,
        "type": st.sampled_from(["request", "request", "request", "response", "error",
                                 "notification", "REQUEST"]) | values,
        "action": st.sampled_from(NAMES) | texts | values,
        "payload": payloads,
        "timestamp": st.text(max_size=30) | values,
        "extra": values,
    })
    envelope = request | request | wild

    @st.composite
    def sized(draw: st.DrawFn) -> str:
        env = draw(envelope)
        if isinstance(env.get("payload"), dict):
            _defuse(env, task_id, session_id)
        text = json.dumps(env)
        if draw(st.integers(0, 9)) == 0:  # sometimes near or far above the frame limit
            pad = draw(st.sampled_from([FRAME_LIMIT - len(text) - 12, FRAME_LIMIT,
                                        4 * FRAME_LIMIT]))
            env["pad"] = "x" * max(pad, 0)
            text = json.dumps(env)
        return text

    raw = (st.text(max_size=200) | st.binary(max_size=200)
           | st.sampled_from(["", "{", "[]", "null", "1e99999", "[" * 5000 + "]" * 5000,
                              '{"id":"n","type":"request","action":"ping","payload":{"a":'
                              + "1" * 5000 + "}}",
                              '{"id": "d", "id": 5, "type": "request", "action": "ping"}'])
           | values.map(json.dumps))
    return st.one_of(sized(), sized(), raw)


def _defuse(env: dict[str, Any], task_id: str, session_id: str) -> None:
    """Keep the fuzzer from starting agents or long turns on purpose: launching
    needs the real task, a prompt starting with "/" picks a mock behaviour."""
    payload = env["payload"]
    if env.get("action") == "session.launch" and payload.get("task_id") == task_id:
        payload["task_id"] = UNKNOWN
    content = payload.get("content")
    if isinstance(content, str):
        payload["content"] = "fuzz " + content


def expected_id(frame: str | bytes) -> str | None:
    """The id the answer must echo, as the gateway reads it (None: a fresh uuid)."""
    if isinstance(frame, bytes) or len(frame) > FRAME_LIMIT:
        return None
    try:
        msg = json.loads(frame)
    except (ValueError, RecursionError):
        return None
    if not isinstance(msg, dict):
        return None
    rid = msg.get("id")
    if isinstance(rid, str | int) and not isinstance(rid, bool):
        return str(rid)[:128] or None
    return None


def check_reply(frame: str | bytes, reply: dict[str, Any]) -> None:
    text = json.dumps(reply)
    assert "Traceback" not in text and 'File "' not in text, text[:500]
    assert reply["type"] in ("response", "error"), reply
    if reply["type"] == "error":
        assert reply["payload"]["code"] in CODES, (frame[:300], reply)
        assert isinstance(reply["payload"]["message"], str) and reply["payload"]["message"]
    want = expected_id(frame)
    if want is not None:
        assert reply["id"] == want, (frame[:300], reply)


class Checker:
    def __init__(self, ws: WsClient) -> None:
        self.ws = ws
        self.sent = 0

    async def check(self, frame: str | bytes) -> None:
        ws = self.ws
        mark = len(ws.notifications)
        await ws.send_raw(frame)
        ping = await ws.request("ping", timeout=20)
        assert ping["type"] == "response", ("the connection did not survive", frame[:300], ping)
        with trio.fail_after(20):
            while True:
                replies = [f for f in ws.notifications[mark:]
                           if f.get("type") in ("response", "error")]
                if replies:
                    break
                assert not ws.closed, ("connection closed", frame[:300])
                await ws.changed()
        check_reply(frame, replies[0])
        self.sent += 1


async def test_every_frame_gets_an_answer(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data",
                              limits=Limits(max_ws_frame_bytes=FRAME_LIMIT)) as srv, \
            ws_client(srv) as ws:
        task_id = (await ws.call("task.create", {"title": "fuzzed"}))["id"]
        sid = (await ws.call("session.launch", {"task_id": task_id}))["id"]
        await ws.call("session.subscribe", {"session_id": sid})
        checker = Checker(ws)
        token = trio.lowlevel.current_trio_token()

        strategy = frames(task_id, sid)
        strategy.validate()  # here, not lazily in the worker thread

        @settings(max_examples=examples(1.5), suppress_health_check=[HealthCheck.too_slow],
                  phases=PHASES)
        @given(frame=strategy)
        def every_frame(frame: str | bytes) -> None:
            trio.from_thread.run(checker.check, frame, trio_token=token)

        await trio.to_thread.run_sync(every_frame)
        assert checker.sent >= examples(1.5) // 2
        # Afterwards: the same connection works, nothing runs, nothing is pending.
        assert (await ws.call("task.list"))["tasks"]
        await ws.call("agent.cancel", {"session_id": sid})
        with trio.fail_after(15):
            while srv.sup.orchestrator.operations or any(
                    ex.turn is not None for ex in srv.sup.lifecycle.executions.values()):
                await trio.sleep(0.05)
        dto = (await ws.call("session.list", {"task_id": task_id}))["sessions"]
        assert all(s["cancellation_pending"] is False for s in dto), dto
        assert all(s["state"] != "RUNNING" for s in dto), dto
        for frame in ws.notifications:
            assert "Traceback" not in json.dumps(frame)
