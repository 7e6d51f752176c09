// Unit tests of the task page's keys (web/static/shortcuts.js): which key asks for what, and
// which session the next / previous key shows. Run with `node --test tests/ui_unit/`.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { TASK_KEYS, shortcutFor, steppedSession } from "../../web/static/shortcuts.js";

const key = (code, extra = {}) => ({ key: extra.key ?? code, code, altKey: false, ctrlKey: false, metaKey: false, shiftKey: false, isComposing: false, ...extra });

describe("shortcuts", () => {
  it("maps Alt+letters by their key's code, whatever character Alt makes", () => {
    assert.equal(shortcutFor(key("KeyU", { altKey: true, key: "ü" })), "cancel-revert");
    assert.equal(shortcutFor(key("KeyS", { altKey: true })), "stop-now");
    assert.equal(shortcutFor(key("KeyC", { altKey: true })), "changes");
    assert.equal(shortcutFor(key("KeyN", { altKey: true })), "new-task");
    assert.equal(shortcutFor(key("ArrowDown", { altKey: true })), "next-session");
    assert.equal(shortcutFor(key("ArrowUp", { altKey: true })), "previous-session");
    assert.equal(shortcutFor(key("Escape")), "cancel");
  });

  it("leaves plain letters, other modifiers and composition to the text", () => {
    assert.equal(shortcutFor(key("KeyU", { key: "u" })), null);
    assert.equal(shortcutFor(key("KeyU", { altKey: true, ctrlKey: true })), null);
    assert.equal(shortcutFor(key("KeyU", { altKey: true, shiftKey: true })), null);
    assert.equal(shortcutFor(key("KeyU", { altKey: true, isComposing: true })), null);
    assert.equal(shortcutFor(key("Escape", { shiftKey: true })), null);
    // Alt+↓ opens a <select>: there it stays the select's.
    assert.equal(shortcutFor(key("ArrowDown", { altKey: true }), { inSelect: true }), null);
  });

  it("steps through the sessions, wrapping at both ends", () => {
    assert.equal(steppedSession(["a", "b", "c"], "b", 1), "c");
    assert.equal(steppedSession(["a", "b", "c"], "c", 1), "a");
    assert.equal(steppedSession(["a", "b", "c"], "a", -1), "c");
    assert.equal(steppedSession(["a", "b"], null, -1), "b");
    assert.equal(steppedSession([], "a", 1), null);
  });

  it("lists every key it answers to for the ? sheet", () => {
    const listed = TASK_KEYS.map(([k]) => k).join(" ");
    for (const k of ["Esc", "Alt+U", "Alt+S", "Alt+C", "Alt+↓", "Alt+↑", "Alt+N"]) assert.ok(listed.includes(k), k);
  });
});
