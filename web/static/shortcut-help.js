// The `?` sheet (issue 29): every key the pages answer to, in a native modal <dialog> (focus
// stays inside, Esc closes it, focus goes back where it was). `?` opens it anywhere but in a
// text field, where it is a character like any other.

import { h } from "./dom.js";

const KEYS = [
  ["Enter", "Send the message (while the agent works: queue it)"],
  ["Shift+Enter", "A new line in the message"],
  ["Alt+Enter", "Steer: send into the running turn, where the agent takes it"],
  ["Tab / Shift+Tab", "Move between the controls"],
  ["?", "This list (not while typing)"],
];

// A <select> takes no `?` (its type-ahead finds no choice by it): there it opens the list too,
// so the composer's option selects (DESIGN.md §19) do not hide the key.
function typing(el) {
  return Boolean(el?.closest?.("input, textarea, [contenteditable='true']"));
}

/** Returns {el}: mount `el` once; the `?` key on `doc` opens it. `pageKeys`: the page's own. */
export function createShortcutHelp(doc = document, pageKeys = []) {
  const close = h("button", { type: "button", class: "btn btn-primary", dataset: { testid: "shortcut-help-close" } }, "Close");
  const rows = [...KEYS, ...pageKeys].map(([key, what]) => h("tr", {}, h("th", { scope: "row" }, h("kbd", {}, key)), h("td", {}, what)));
  const el = h(
    "dialog",
    { class: "item-dialog shortcut-help", "aria-labelledby": "shortcut-help-title", dataset: { testid: "shortcut-help" } },
    h("h2", { class: "item-dialog-title", id: "shortcut-help-title" }, "Keyboard shortcuts"),
    h("table", { class: "shortcut-table" }, h("tbody", {}, ...rows)),
    h("div", { class: "item-dialog-actions" }, close),
  );
  let back = null;
  close.addEventListener("click", () => el.close());
  el.addEventListener("close", () => {
    if (back?.isConnected) back.focus();
    back = null;
  });
  doc.addEventListener("keydown", (event) => {
    if (event.key !== "?" || event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    if (typing(event.target) || el.open || doc.querySelector("dialog[open]")) return;
    event.preventDefault();
    back = doc.activeElement;
    el.showModal();
    close.focus();
  });
  return { el };
}
