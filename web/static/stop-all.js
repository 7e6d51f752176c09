// Stop everything (DESIGN.md §18): `stop-all-button` in the task list's header, a confirmation
// that names how many turns run (a native modal <dialog> like revert-dialog.js: the safe choice
// has the focus, Esc closes it without stopping anything), then `workspace.stop_all {}` and a
// short summary (`stop-all-summary`) of what it stopped.

import { h } from "./dom.js";
import { humanizeError } from "./status.js";
import { stopAllQuestion, stopAllSummary } from "./stop-text.js";

/** Every running turn is cancelled, each within the backend's cancel bounds. */
const STOP_ALL_TIMEOUT_MS = 60_000;

/**
 * request(action, payload, options) is the page's socket request; onDone() runs after the stop
 * (the page re-reads its counts). Returns {button, dialog, summary, update(running, offline)}:
 * mount `button` and `summary` in the header, `dialog` once anywhere.
 */
export function createStopAll({ request, onDone }) {
  const button = h(
    "button",
    { type: "button", class: "btn btn-danger btn-stop-all", dataset: { testid: "stop-all-button" }, disabled: true },
    "Stop all",
  );
  const summary = h("span", { class: "stop-all-summary", role: "status", dataset: { testid: "stop-all-summary" }, hidden: true });
  const heading = h("h2", { class: "item-dialog-title", id: "stop-all-title" });
  const text = h("p", { class: "item-dialog-text", id: "stop-all-text" }, "Each one stops now, in every task. Queued messages wait until you resume them.");
  const keep = h("button", { type: "button", class: "btn", dataset: { testid: "stop-all-cancel" } }, "Keep running");
  const confirm = h("button", { type: "button", class: "btn btn-danger-solid", dataset: { testid: "stop-all-confirm" } }, "Stop all");
  const dialog = h(
    "dialog",
    { class: "item-dialog stop-all-dialog", dataset: { testid: "stop-all-dialog" }, "aria-labelledby": heading.id, "aria-describedby": text.id },
    heading,
    text,
    h("div", { class: "item-dialog-actions" }, keep, confirm),
  );

  let running = 0;
  let offline = false;
  let stopping = false;

  function refresh() {
    button.disabled = running === 0 || offline || stopping;
    button.title = offline ? "Offline: waiting for the server" : running ? stopAllQuestion(running).replace("?", "") : "Nothing is running";
    button.textContent = stopping ? "Stopping…" : "Stop all";
    confirm.disabled = offline || stopping;
  }

  function say(words) {
    summary.hidden = !words;
    summary.textContent = words ?? "";
  }

  button.addEventListener("click", () => {
    if (button.disabled) return;
    heading.textContent = stopAllQuestion(running);
    say(null);
    dialog.showModal();
    keep.focus(); // the safe choice: Enter right away stops nothing
  });
  keep.addEventListener("click", () => dialog.close());
  confirm.addEventListener("click", async () => {
    if (confirm.disabled) return;
    dialog.close();
    stopping = true;
    refresh();
    try {
      say(stopAllSummary(await request("workspace.stop_all", {}, { timeoutMs: STOP_ALL_TIMEOUT_MS })));
    } catch (err) {
      say(`Could not stop everything. ${humanizeError(err?.message) ?? ""}`.trim());
    } finally {
      stopping = false;
      refresh();
      if (!button.disabled) button.focus();
      onDone?.();
    }
  });

  return {
    button,
    dialog,
    summary,
    /** How many turns run now (the tasks' running_count), and whether the page is offline. */
    update(count, isOffline) {
      running = count;
      offline = isOffline;
      refresh();
      if (dialog.open && (running === 0 || offline)) dialog.close(); // nothing left to ask about
    },
  };
}
