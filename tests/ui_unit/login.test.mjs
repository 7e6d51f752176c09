// Unit tests of the login card's rules (DESIGN.md §19): which session rows show it, what each
// method says, and the `agent.login` payload (a key only for a key method, and never empty).

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { failedComposerView } from "../../web/static/failed-start.js";
import { loginComposerView, loginPayload, loginView, methodHint } from "../../web/static/login-card.js";
import { emptyState } from "../../web/static/state.js";
import { sessionStatus } from "../../web/static/status.js";

const KEY = { id: "mock-key", name: "Mock API key", description: "", kind: "key", var_name: "MOCK_AGENT_API_KEY", link: null, command: null };
const TERMINAL = { id: "mock-terminal", name: "Terminal", description: "", kind: "terminal", var_name: null, link: null, command: "env HOME=/h mock --sign-in" };
const AGENT = { id: "oauth", name: "Google", description: "", kind: "agent", var_name: null, link: null, command: null };

describe("loginView", () => {
  it("shows the card only for a session whose agent asked for a login", () => {
    assert.equal(loginView(null), null);
    assert.equal(loginView({ id: "s", auth: null }), null);
    assert.equal(loginView({ id: "s" }), null);
    assert.equal(loginView({ id: "s", auth: { required: false, methods: [KEY] } }), null);
    assert.deepEqual(loginView({ id: "s", auth: { required: true, methods: [KEY, null, { name: "no id" }], error: "" } }), { sessionId: "s", methods: [KEY], error: null });
    assert.equal(loginView({ id: "s", auth: { required: true, methods: [], error: "bad key" } }).error, "bad key");
  });
});

describe("methodHint", () => {
  it("says where a key goes, what to run, or that the agent does it", () => {
    assert.match(methodHint(KEY), /MOCK_AGENT_API_KEY.*keeps no copy/);
    assert.match(methodHint({ ...KEY, var_name: null }), /^Your key goes to the agent when it starts/);
    assert.match(methodHint(TERMINAL), /Run this in a terminal/);
    assert.match(methodHint({ ...TERMINAL, command: null }), /from a terminal/);
    assert.match(methodHint(AGENT), /on its own/);
  });
});

describe("loginPayload", () => {
  it("carries a key for a key method only, and refuses an empty one", () => {
    assert.deepEqual(loginPayload("s", KEY, "mk-1"), { payload: { session_id: "s", method_id: "mock-key", key: "mk-1" } });
    assert.match(loginPayload("s", KEY, "").error, /Enter the key for Mock API key/);
    assert.deepEqual(loginPayload("s", TERMINAL, "typed by mistake"), { payload: { session_id: "s", method_id: "mock-terminal" } });
    assert.deepEqual(loginPayload("s", AGENT, null), { payload: { session_id: "s", method_id: "oauth" } });
  });
});

describe("sessionStatus", () => {
  it("says a session waits for a login, not that its agent sleeps", () => {
    const row = { id: "s", state: "WAITING_FOR_INPUT", agent_live: false, auth: { required: true, methods: [KEY] } };
    const state = { ...emptyState(), sessions: { s: row }, messages: { s: [] }, selectedSessionId: "s" };
    assert.deepEqual(sessionStatus(state, "s"), { key: "login", label: "Needs login", tone: "attention", reason: null });
    state.sessions.s = { ...row, auth: null };
    assert.notEqual(sessionStatus(state, "s").key, "login");
  });
});

describe("loginComposerView", () => {
  it("turns Send off while the agent waits for a login, and only then", () => {
    const view = { sendDisabled: false, error: "x", note: null };
    const row = { id: "s", state: "WAITING_FOR_INPUT", auth: { required: true, methods: [KEY] } };
    for (const made of [loginComposerView(view, row), failedComposerView(view, row)]) {
      assert.equal(made.sendDisabled, true);
      assert.equal(made.error, null);
      assert.match(made.note, /logged in/);
    }
    assert.equal(loginComposerView(view, { ...row, auth: null }), view);
    assert.equal(failedComposerView(view, { ...row, auth: null }), view);
  });
});
