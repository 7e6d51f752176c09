// A cancel request that outlives the page's 15 s bound while the backend holds the stop
// (web/static/control-state.js settleCancel): no "try again" error; a timeout with nothing
// pending on the backend, and every other failure, still says it. Run with
// `node --test tests/ui_unit/`.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as S from "../../web/static/state.js";

import { boot, session } from "./fixtures.mjs";

const TIMEOUT = { ok: false, error: "No answer to the cancel request within 15 s. You can try again.", timedOut: true };
const pendingNow = (state, revision) =>
  S.applyNotification(state, "session.cancellation_changed", { session_id: "a", cancellation_pending: true, cancellation_revision: revision }, 1);

function running() {
  return S.hydrate(boot([session("a", { cancellation_revision: 2 })]));
}

describe("a cancel request past its bound", () => {
  it("says nothing failed while the backend holds the stop after the step", () => {
    let { state } = S.beginCancel(running(), "a", "r1", 1, "after_step");
    state = pendingNow(state, 3);
    state = S.applyNotification(state, "session.cancel.progress", { session_id: "a", turn_id: "t1", phase: "after_step", title: "sleep" }, 1);
    state = S.settleCancel(state, "a", "r1", TIMEOUT);
    assert.equal(state.composerErrors.a, undefined);
    assert.equal(state.cancelRequests.a, undefined, "the request is over");
    const view = S.cancelControlView(state, "a");
    assert.equal(view.pending, true);
    assert.equal(view.label, "Stop now", "a stop now still joins the waiting stop");
    assert.equal(view.disabled, false);
    assert.equal(S.composerView(state).error, null);
  });

  it("says nothing failed while a late cancel is held", () => {
    let { state } = S.beginCancel(running(), "a", "r1", 1);
    state = pendingNow(state, 3);
    state = S.applyNotification(state, "session.cancel.progress", { session_id: "a", turn_id: "t1", phase: "late" }, 1);
    state = S.settleCancel(state, "a", "r1", TIMEOUT);
    assert.equal(state.composerErrors.a, undefined);
    assert.deepEqual(S.cancelControlView(state, "a"), {
      visible: true, pending: true, disabled: true, label: "Cancelling...", note: S.LATE_NOTE,
    });
  });

  it("says it when the backend holds nothing: the cancel may be tried again", () => {
    let { state } = S.beginCancel(running(), "a", "r1", 1);
    state = S.settleCancel(state, "a", "r1", TIMEOUT);
    assert.equal(state.composerErrors.a, TIMEOUT.error);
    assert.equal(S.cancelControlView(state, "a").disabled, false);
  });

  it("says every other failure even while the backend is pending", () => {
    let { state } = S.beginCancel(running(), "a", "r1", 1);
    state = pendingNow(state, 3);
    state = S.settleCancel(state, "a", "r1", { ok: false, error: "The cancel failed: CONFLICT" });
    assert.equal(state.composerErrors.a, "The cancel failed: CONFLICT");
  });
});
