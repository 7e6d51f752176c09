// Offline, the working indicator's clock stops where the page last heard the turn, and says so
// (web/static/turn-progress.js, issue 41). Run with `node --test tests/ui_unit/`.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as S from "../../web/static/state.js";
import * as P from "../../web/static/turn-progress.js";
import { boot, session } from "./fixtures.mjs";

describe("the working clock offline", () => {
  const started = "2026-08-03T10:00:00Z";
  const t0 = Date.parse(started);
  const user = { id: "u", session_id: "s1", role: "user", kind: "text", content: "go", metadata: {}, created_at: started };
  const state = S.hydrate(boot([session("s1")], { messages: [user] }));

  it("counts while the page hears the turn", () => {
    const live = S.setConnection(state, "open");
    assert.equal(P.workingView(live, "s1", { now: t0 + 30_000 }).text, "Working · 30 s — Waiting for the agent's first output");
  });

  it("stops at the moment the page went offline, and says it is the last known", () => {
    const offline = S.setConnection(S.setConnection(state, "open"), "reconnecting");
    const v = P.workingView(offline, "s1", { now: t0 + 90_000, offlineAt: t0 + 20_000 });
    assert.equal(v.stale, true);
    assert.equal(v.text, "Offline, clock paused: Working · 20 s — Waiting for the agent's first output (last known)");
    // A minute later it has not moved.
    assert.equal(P.workingView(offline, "s1", { now: t0 + 150_000, offlineAt: t0 + 20_000 }).text, v.text);
  });
});
