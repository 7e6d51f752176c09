// The chat composer in its two layouts. While a turn runs, Send (and Enter) queue the text
// (DESIGN.md §9); the page decides what a send means, the composer only hands the text over. Desktop: a roomy textarea with the actions below it.
// Compact (narrow viewports): one row, input then actions, sized for thumbs. Both render the
// shared cancel control from cancel-control.js beside Send. Only one composer is mounted at a
// time, so every test id stays unique on the page.

import { createCancelControl } from "./cancel-control.js";
import { h, setAttr } from "./dom.js";

export const COMPACT_QUERY = "(max-width: 640px)";

/**
 * layout: "desktop" | "compact". onSend(text) -> Promise<boolean> (true = sent, clear the draft).
 * onCancel() asks to cancel the selected session's turn.
 */
export function createComposer({ layout, onSend, onCancel, onCancelRevert }) {
  const compact = layout === "compact";
  const placeholder = compact ? "Message the agent" : "Message the agent (Enter sends, Shift+Enter adds a line, Esc cancels)";
  const input = h("textarea", {
    class: "chat-input",
    dataset: { testid: "chat-input" },
    "aria-label": "Message to the agent",
    rows: compact ? 1 : 3,
    placeholder,
  });
  const send = h("button", { type: "submit", class: "btn btn-primary btn-send", dataset: { testid: "send-button" } }, "Send");
  const cancel = createCancelControl({ onActivate: () => onCancel() });
  const error = h("p", { class: "composer-error", role: "alert", dataset: { testid: "composer-error" }, hidden: true });
  const hint = h("span", { class: "composer-hint" }, "Esc cancels a running turn");
  // DESIGN.md §12: "Cancel and undo" beside the cancel control; Esc stays a plain cancel.
  const cancelRevert = h("button", { type: "button", class: "btn btn-secondary", hidden: true, dataset: { testid: "cancel-revert-button" }, title: "Cancel the turn and put its files back" }, "Cancel and undo");
  cancelRevert.addEventListener("click", () => {
    if (!cancelRevert.disabled) onCancelRevert?.();
  });
  const actions = h("div", { class: "composer-actions" }, cancelRevert, cancel.el, send);
  // The row wraps (actions under the input) before the input would get narrower than a usable
  // width, so a phone with Cancel shown still has room to type.
  const form = compact
    ? h("form", { class: "composer composer--compact" }, error, cancel.note, h("div", { class: "composer-row" }, input, actions))
    : h(
        "form",
        { class: "composer composer--desktop" },
        input,
        h("div", { class: "composer-bar" }, error, cancel.note, hint, actions),
      );
  form.dataset.testid = "composer";
  form.dataset.layout = layout;

  let view = null;
  let sending = false;

  async function submit() {
    const text = input.value.trim();
    if (!text || !view || view.sendDisabled || sending) return;
    sending = true;
    refresh();
    try {
      if (await onSend(text)) {
        // Keep whatever was typed meanwhile only if it differs from what was sent.
        if (input.value.trim() === text) input.value = "";
      }
    } finally {
      sending = false;
      refresh();
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      // The agent-CLI convention: Esc stops the running turn. Same path as a click, so a
      // repeated Esc is a duplicate activation and is ignored.
      if (view?.cancel.visible && !view.cancel.disabled) {
        event.preventDefault();
        onCancel();
      }
      return;
    }
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit();
    }
  });
  input.addEventListener("input", () => refresh());

  function refresh() {
    if (!view) return;
    send.disabled = view.sendDisabled || sending || input.value.trim() === "";
    send.title = view.offline ? "Offline: waiting for the server" : "";
    input.placeholder = view.offline
      ? "Offline: waiting for the server…"
      : view.running
        ? compact
          ? "Queue a message"
          : "Queue a message for when the agent is done (Enter queues, Esc cancels the turn)"
        : placeholder;
    hint.hidden = Boolean(view.cancel.note);
    send.textContent = view.sendLabel;
    setAttr(send, "aria-label", view.sendLabel);
    cancel.update(view.cancel, view.sessionId);
    cancelRevert.hidden = !(view.cancel.visible && view.revertable);
    cancelRevert.disabled = view.cancel.disabled;
    error.hidden = !view.error;
    error.textContent = view.error ?? "";
  }

  return {
    el: form,
    layout,
    update(next) {
      view = next;
      refresh();
    },
    get draft() {
      return input.value;
    },
    set draft(text) {
      input.value = text;
      refresh();
    },
    hasFocus: () => document.activeElement === input,
    focus: () => input.focus(),
  };
}
