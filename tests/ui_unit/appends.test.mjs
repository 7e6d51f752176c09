// Text appends (issue 19, docs/contract-notes.md): `session.message.appended` grows a held
// message when its offset (UTF-16 units, a JavaScript string's length) is the held length; an
// append already in a listing is skipped; anything else marks the session stale, holds the
// append, and the next listing (replaceMessages) replays what was held.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as S from "../../web/static/state.js";

import { boot, session } from "./fixtures.mjs";

const msg = (id, content, extra = {}) => ({
  id,
  session_id: "a",
  turn_id: "t1",
  role: "agent",
  kind: "text",
  content,
  metadata: {},
  created_at: "2026-08-03T10:00:01Z",
  ...extra,
});
const user = msg("u1", "hi", { role: "user", created_at: "2026-08-03T10:00:00Z" });

function loaded(messages) {
  return S.hydrate(boot([session("a")], { messages }));
}

function append(state, messageId, offset, text) {
  return S.applyNotification(
    state,
    "session.message.appended",
    { session_id: "a", message_id: messageId, turn_id: "t1", offset, text },
    1,
  );
}

const contentOf = (state, id) => state.messages.a.find((m) => m.id === id)?.content;

describe("session.message.appended", () => {
  it("appends at the held length and keeps every other message as it was", () => {
    let state = loaded([user, msg("m1", "Hello")]);
    const before = state.messages.a[0];
    state = append(state, "m1", 5, ", world");
    state = append(state, "m1", 12, "!");
    assert.equal(contentOf(state, "m1"), "Hello, world!");
    assert.equal(state.messages.a[0], before, "the user's message is the same object");
    assert.equal(S.messagesStale(state, "a"), false);
  });

  it("counts offsets in UTF-16 units, as the server does (an emoji is 2)", () => {
    let state = loaded([msg("m1", "a😀")]);
    assert.equal("a😀".length, 3);
    const atCodePoints = append(state, "m1", 2, "b");
    assert.equal(S.messagesStale(atCodePoints, "a"), true, "a code-point offset is a gap");
    state = append(state, "m1", 3, "b🎉");
    state = append(state, "m1", 6, "c");
    assert.equal(contentOf(state, "m1"), "a😀b🎉c");
    assert.equal(S.messagesStale(state, "a"), false);
  });

  it("skips an append the listing already holds (it was read after the append was written)", () => {
    const listed = loaded([msg("m1", "Hello, world")]);
    const state = append(listed, "m1", 5, ", wo");
    assert.equal(state, listed, "nothing changes");
    // The same span with other text is no duplicate: resync.
    assert.equal(S.messagesStale(append(listed, "m1", 5, ", WO"), "a"), true);
  });

  it("holds appends after a gap until a fresh listing, then replays them over it", () => {
    let state = loaded([msg("m1", "Hello")]);
    state = append(state, "m1", 9, "four"); // "Hello" + a lost ", wo" ...
    assert.equal(S.messagesStale(state, "a"), true);
    assert.equal(contentOf(state, "m1"), "Hello", "nothing applied over the gap");
    state = append(state, "m1", 13, "!"); // held too, even though it would not fit either
    assert.equal(S.messagesStale(state, "a"), true);
    // The listing was read when the message was "Hello, wofour": the first held append is
    // already in it, the second applies.
    state = S.replaceMessages(state, "a", [msg("m1", "Hello, wofour")]);
    assert.equal(contentOf(state, "m1"), "Hello, wofour!");
    assert.equal(S.messagesStale(state, "a"), false);
    assert.deepEqual(state.staleMessages, {});
  });

  it("stays stale when the listing is older than a held append's gap", () => {
    let state = loaded([msg("m1", "ab")]);
    state = append(state, "m1", 4, "e");
    state = S.replaceMessages(state, "a", [msg("m1", "abc")]); // still missing "d"
    assert.equal(S.messagesStale(state, "a"), true);
    assert.equal(contentOf(state, "m1"), "abc");
    state = S.replaceMessages(state, "a", [msg("m1", "abcd")]);
    assert.equal(contentOf(state, "m1"), "abcde");
    assert.equal(S.messagesStale(state, "a"), false);
  });

  it("holds an append for a message not loaded yet (subscribed before the listing came)", () => {
    let state = S.hydrate(boot([session("a")], { selected_session_id: "a" }));
    state = { ...state, messages: {} }; // the page has not listed session a yet
    state = append(state, "m1", 0, "x");
    assert.equal(S.messagesStale(state, "a"), true);
    state = S.replaceMessages(state, "a", [user]);
    assert.equal(S.messagesStale(state, "a"), true, "the listing does not have m1 either");
    state = S.replaceMessages(state, "a", [user, msg("m1", "")]);
    assert.equal(contentOf(state, "m1"), "x");
    assert.equal(S.messagesStale(state, "a"), false);
  });

  it("keeps the session's own staleness: another session is untouched", () => {
    let state = loaded([msg("m1", "a")]);
    state = append(state, "m1", 7, "x");
    assert.equal(S.messagesStale(state, "a"), true);
    assert.equal(S.messagesStale(state, "b"), false);
    assert.equal(S.messagesStale(state, null), false);
  });

  it("bounds what it holds", () => {
    let state = loaded([msg("m1", "")]);
    state = append(state, "m1", 1, "x");
    for (let i = 0; i < S.MAX_HELD_APPENDS + 10; i++) state = append(state, "m1", 2 + i, "y");
    assert.equal(state.staleMessages.a.length, S.MAX_HELD_APPENDS);
    assert.equal(state.staleMessages.a.at(-1).offset, S.MAX_HELD_APPENDS + 11);
  });

  it("ignores a malformed append", () => {
    const state = loaded([msg("m1", "ab")]);
    for (const bad of [
      { message_id: "m1", offset: "2", text: "c" },
      { message_id: "m1", offset: 2.5, text: "c" },
      { message_id: "m1", offset: 2 },
      { offset: 2, text: "c" },
    ]) {
      assert.equal(S.applyNotification(state, "session.message.appended", { session_id: "a", ...bad }, 1), state);
    }
  });

  it("still takes whole messages: an update replaces what appends built", () => {
    let state = loaded([msg("m1", "ab")]);
    state = append(state, "m1", 2, "c");
    state = S.applyNotification(state, "session.message.updated", { session_id: "a", message: msg("m1", "abc😀") }, 1);
    state = append(state, "m1", 5, "!");
    assert.equal(contentOf(state, "m1"), "abc😀!");
  });
});
