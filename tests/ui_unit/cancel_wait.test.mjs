// A stop the backend holds past the page's 15 s request bound (a stop after a long step, a late
// cancel): the request waits on while the backend says the stop is pending (web/static/ws.js
// `holdWhile`, set by turn-actions.js), so the answer that comes when the stop settles is the
// one shown — an error included (web/static/control-state.js settleCancel). Run with
// `node --test tests/ui_unit/`.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as S from "../../web/static/state.js";

import { boot, session } from "./fixtures.mjs";

const TIMEOUT = { ok: false, error: "No answer to the cancel request within 15 s. You can try again." };
const pendingNow = (state, revision) =>
  S.applyNotification(state, "session.cancellation_changed", { session_id: "a", cancellation_pending: true, cancellation_revision: revision }, 1);
const pendingOver = (state, revision) =>
  S.applyNotification(state, "session.cancellation_changed", { session_id: "a", cancellation_pending: false, cancellation_revision: revision }, 1);

function running() {
  return S.hydrate(boot([session("a", { cancellation_revision: 2 })]));
}

describe("a stop held past the request's bound", () => {
  it("shows the progress while held, and a late failure's own error when it settles", () => {
    let { state } = S.beginCancel(running(), "a", "r1", 1, "after_step");
    state = pendingNow(state, 3);
    state = S.applyNotification(state, "session.cancel.progress", { session_id: "a", turn_id: "t1", phase: "after_step", title: "sleep" }, 1);
    const view = S.cancelControlView(state, "a");
    assert.equal(view.pending, true);
    assert.equal(view.label, "Stop now", "a stop now still joins the waiting stop");
    assert.equal(S.composerView(state).error, null);
    // Minutes later the stop fails: pending=false and the held request's error answer.
    state = pendingOver(state, 4);
    state = S.settleCancel(state, "a", "r1", { ok: false, error: "The cancel failed: the agent did not take the cancel" });
    assert.equal(state.composerErrors.a, "The cancel failed: the agent did not take the cancel");
    assert.equal(S.cancelControlView(state, "a").pending, false);
    assert.equal(S.cancelControlView(state, "a").disabled, false, "the person may try again");
  });

  it("ends quietly when the held stop settles as a cancel", () => {
    let { state } = S.beginCancel(running(), "a", "r1", 1);
    state = pendingNow(state, 3);
    state = S.applyNotification(state, "session.cancel.progress", { session_id: "a", turn_id: "t1", phase: "late" }, 1);
    assert.deepEqual(S.cancelControlView(state, "a"), {
      visible: true, pending: true, disabled: true, label: "Cancelling...", note: S.LATE_NOTE,
    });
    state = pendingOver(state, 4);
    state = S.settleCancel(state, "a", "r1", { ok: true });
    assert.equal(state.composerErrors.a, undefined);
    assert.equal(state.cancelRequests.a, undefined, "the request is over");
  });

  it("says a timeout when the backend held nothing: the cancel may be tried again", () => {
    let { state } = S.beginCancel(running(), "a", "r1", 1);
    state = S.settleCancel(state, "a", "r1", TIMEOUT);
    assert.equal(state.composerErrors.a, TIMEOUT.error);
    assert.equal(S.cancelControlView(state, "a").disabled, false);
  });
});
