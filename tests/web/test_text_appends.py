"""``session.subscribe {text_appends: true}`` (issue 19, docs/contract-notes.md):
a streamed text message's growth arrives as ``session.message.appended`` at
its UTF-16 offset; connections without the option still get whole messages."""

from __future__ import annotations

from typing import Any

import trio

from supervisor.models import utf16_len
from tests.support.server import Server
from tests.support.ws import WsClient, is_turn_completed, ws_client

from .support import launch, new_task, running_session

#: Steered into a streaming turn: text beyond the BMP in the middle of a message.
EMOJI = "smile 😀 party 🎉"


def is_append(session_id: str) -> Any:
    return lambda f: (f["action"] == "session.message.appended"
                      and f["payload"]["session_id"] == session_id)


def utf16_slice(text: str, start: int, end: int) -> str:
    return text.encode("utf-16-le", "surrogatepass")[2 * start:2 * end].decode(
        "utf-16-le", "surrogatepass")


async def stored(ws: WsClient, sid: str) -> dict[str, str]:
    listed = (await ws.call("message.list", {"session_id": sid}))["messages"]
    return {m["id"]: m["content"] for m in listed if m["role"] == "agent" and m["kind"] == "text"}


async def test_appends_rebuild_the_stored_message_while_others_get_whole_updates(
        server: Server) -> None:
    with trio.fail_after(40):
        async with ws_client(server) as full, ws_client(server) as short:
            task_id = await new_task(full)
            # mock-codex: steering puts the emoji into the stream mid-message.
            sid = await launch(full, task_id, "mock-codex")
            await full.call("session.subscribe", {"session_id": sid})
            await short.call("session.subscribe", {"session_id": sid, "text_appends": True})
            await full.call("message.add", {"session_id": sid, "content": "/delay 1200"})
            await short.wait_for(is_append(sid))
            steered = await full.call("message.add", {"session_id": sid, "content": EMOJI,
                                                      "delivery": "steer"})
            assert steered["delivery"] == "steered"
            await short.wait_for(is_turn_completed(sid))
            await full.wait_for(is_turn_completed(sid))
            truth = await stored(short, sid)

        # The appends client: each text message is added whole once, then only grows,
        # each append exactly at the length (in UTF-16 units) of what came before.
        built: dict[str, str] = {}
        code_point_offsets_differ = False
        for frame in short.notifications:
            p = frame["payload"]
            if frame["action"] == "session.message.added" and p["message"]["kind"] == "text" \
                    and p["message"]["role"] == "agent":
                built[p["message"]["id"]] = p["message"]["content"]
            elif frame["action"] == "session.message.appended":
                assert set(p) == {"session_id", "message_id", "turn_id", "offset", "text"}
                have = built[p["message_id"]]
                assert p["offset"] == utf16_len(have), (p, have)
                code_point_offsets_differ |= p["offset"] != len(have)
                built[p["message_id"]] = have + p["text"]
            elif frame["action"] == "session.message.updated":
                assert p["message"]["id"] not in built, "a text message that only grew"
        assert built == truth
        assert any("😀" in text for text in truth.values())
        assert code_point_offsets_differ, "an offset after the emoji counts UTF-16 units"
        assert len(short.of("session.message.appended", sid)) >= 5

        # The client without the option got today's frames only, ending in the stored text.
        assert full.of("session.message.appended") == []
        last: dict[str, str] = {}
        for p in full.of("session.message.updated", sid):
            if p["message"]["id"] in truth:
                last[p["message"]["id"]] = p["message"]["content"]
        assert last == truth
        assert len(full.of("session.message.updated", sid)) >= 5


async def test_a_subscribe_mid_message_then_a_listing_meets_the_appends(
        server: Server) -> None:
    """The resync rule: after subscribing and listing, an append is either already
    in the listing (offset + its length <= the listed length, same text there) or
    exactly at its end; never beyond it (no gap to refetch for)."""
    with trio.fail_after(40):
        async with ws_client(server) as driver, ws_client(server) as late:
            task_id = await new_task(driver)
            sid = await running_session(driver, task_id, "/delay 1500")
            await driver.wait_for(lambda f: f["action"] == "session.message.updated"
                                  and f["payload"]["session_id"] == sid)
            await late.call("session.subscribe", {"session_id": sid, "text_appends": True})
            contents = await stored(late, sid)
            assert contents, "the message was there before the subscribe"
            await late.wait_for(is_turn_completed(sid))
            truth = await stored(late, sid)
        applied = 0
        for p in late.of("session.message.appended", sid):
            have = contents[p["message_id"]]
            size = utf16_len(have)
            end = p["offset"] + utf16_len(p["text"])
            if end <= size:
                assert utf16_slice(have, p["offset"], end) == p["text"]
                continue
            assert p["offset"] == size, (p, size)
            contents[p["message_id"]] = have + p["text"]
            applied += 1
        assert applied >= 3
        assert contents == truth


async def test_text_appends_must_be_a_boolean(server: Server) -> None:
    with trio.fail_after(20):
        async with ws_client(server) as ws:
            sid = await launch(ws, await new_task(ws))
            bad_values: list[Any] = ["yes", 1, None, [], {}]
            for bad in bad_values:
                frame = await ws.request("session.subscribe",
                                         {"session_id": sid, "text_appends": bad})
                assert frame["type"] == "error", (bad, frame)
                assert frame["payload"]["code"] == "VALIDATION_ERROR"
                assert "text_appends" in frame["payload"]["message"]
            assert server.sup.bus.subscriber_count(sid) == 0
            assert await ws.call("session.subscribe",
                                 {"session_id": sid, "text_appends": False}) == {"success": True}
            assert server.sup.bus.subscriber_count(sid) == 1
