// The chat composer in its two layouts. While a turn runs, Send (and Enter) queue the text
// (DESIGN.md §9); the page decides what a send means, the composer only hands the text over. Desktop: a roomy textarea with the actions below it.
// Compact (narrow viewports): one row, input then actions, sized for thumbs. Both render the
// shared cancel control from cancel-control.js beside Send. Only one composer is mounted at a
// time, so every test id stays unique on the page.

import { createAttachTray } from "./attach-tray.js";
import { uploadAttachment } from "./attachments.js";
import { createCancelControl } from "./cancel-control.js";
import { createCommandMenu } from "./command-menu.js";
import { h, setAttr } from "./dom.js";
import { createMentionMenu } from "./mention-menu.js";
import { createOptionBar } from "./option-bar.js";

export const COMPACT_QUERY = "(max-width: 640px)";

/** What the keys do, said under the input (desktop) and in the input's description. */
export function keyHint(view) {
  if (!view?.running) return "Enter sends · Shift+Enter adds a line";
  return view.steer?.visible ? "Enter queues · Alt+Enter steers into the turn · Esc cancels" : "Enter queues · Esc cancels the turn";
}

/**
 * layout: "desktop" | "compact". onSend(text, delivery) -> Promise<boolean> (true = sent, clear
 * the draft); delivery "steer" for the steer button and Alt+Enter, else undefined.
 * onCancel() asks to cancel the selected session's turn. onSetOption({session_id, option_id,
 * value}) -> Promise<{applied}> sets one of the agent's options (DESIGN.md §19).
 * onListFiles(query) -> Promise<[path]> feeds the `@` menu; onUpload(file) -> Promise<{attachment_id,
 * name, mime, size}> uploads a file (DESIGN.md §19). onSend's third argument is {attachments:
 * [id], mentions: [path]} when the message carries any, else {}.
 */
export function createComposer({ layout, onSend, onCancel, onCancelRevert, onStopAfterStep, onTyping, onSetOption, onListFiles, onUpload = uploadAttachment }) {
  const compact = layout === "compact";
  const placeholder = compact ? "Message the agent" : "Message the agent (Enter sends, Shift+Enter adds a line, Esc cancels)";
  const input = h("textarea", {
    class: "chat-input",
    dataset: { testid: "chat-input" },
    "aria-describedby": `composer-hint-${layout}`,
    "aria-label": "Message to the agent",
    rows: compact ? 1 : 3,
    placeholder,
  });
  const send = h("button", { type: "submit", class: "btn btn-primary btn-send", dataset: { testid: "send-button" } }, "Send");
  const cancel = createCancelControl({ onActivate: () => onCancel() });
  const error = h("p", { class: "composer-error", role: "alert", dataset: { testid: "composer-error" }, hidden: true });
  const hint = h("span", { class: "composer-hint", id: `composer-hint-${layout}` }, "");
  // DESIGN.md §9, §15: sent into the running turn where the agent steers (Alt+Enter).
  const steer = h("button", { type: "button", class: "btn btn-secondary", hidden: true, dataset: { testid: "steer-button" }, title: "Send into the running turn (Alt+Enter)" }, "Steer");
  steer.addEventListener("click", () => submit("steer"));
  // The §9 fallback, and other words about the last send that are no error.
  const note = h("p", { class: "composer-note", "aria-live": "polite", dataset: { testid: "composer-note" }, hidden: true });
  // DESIGN.md §12: "Cancel and undo" beside the cancel control; Esc stays a plain cancel.
  // The phone says "Undo" (its four buttons then share one line at 390 px); the name stays whole.
  const cancelRevert = h(
    "button",
    { type: "button", class: "btn btn-secondary", hidden: true, dataset: { testid: "cancel-revert-button" }, title: "Cancel the turn and put its files back", "aria-label": "Cancel and undo" },
    compact ? "Undo" : "Cancel and undo",
  );
  cancelRevert.addEventListener("click", () => {
    if (!cancelRevert.disabled) onCancelRevert?.();
  });
  // DESIGN.md §18: the running tool call finishes, then the turn stops; gone once a stop is
  // pending (the cancel control then means "stop now").
  const afterStep = h(
    "button",
    { type: "button", class: "btn btn-secondary btn-after-step", hidden: true, dataset: { testid: "stop-after-step-button" }, title: "Let the running step finish, then stop the turn", "aria-label": compact ? "Finish: stop after this step" : "Stop after this step" },
    // (A phone's row holds Undo, this, Cancel, Steer and Queue on one line at 390 px.)
    compact ? "Finish" : "Stop after this step",
  );
  afterStep.addEventListener("click", () => {
    if (!afterStep.disabled) onStopAfterStep?.();
  });
  // DESIGN.md §19: files for the agent, and `@` mentions of the session's files.
  const formEl = h("form", {});
  const tray = createAttachTray({ upload: (file) => onUpload(file), onChange: () => refresh(), form: formEl, input, compact });
  const mentionMenu = createMentionMenu({ input, listFiles: (query) => onListFiles(query) });
  // On a phone the attach button sits beside the input, as in a messenger, leaving the action
  // row to the turn's controls (they share one line at 390 px).
  const actions = h("div", { class: "composer-actions" }, ...(compact ? [] : [tray.button]), cancelRevert, afterStep, cancel.el, steer, send);
  // DESIGN.md §19: the agent's options and usage above the input, its commands on "/".
  const offers = createOptionBar({ compact, onSet: (payload) => onSetOption(payload) });
  const menu = createCommandMenu({ input });
  // The row wraps (actions under the input) before the input would get narrower than a usable
  // width, so a phone with Cancel shown still has room to type.
  const form = formEl;
  form.className = `composer composer--${compact ? "compact" : "desktop"}`;
  if (compact) {
    form.append(menu.list, mentionMenu.list, error, note, cancel.note, offers.el, tray.list, h("div", { class: "composer-row" }, tray.button, input, actions), hint, menu.ghost, tray.picker);
  } else {
    // The words keep their one line; the buttons wrap under them rather than squeeze them.
    const words = h("div", { class: "composer-words" }, error, note, cancel.note, hint);
    const bar = h("div", { class: "composer-bar" }, words, actions);
    form.append(menu.list, mentionMenu.list, offers.el, tray.list, input, menu.ghost, bar, tray.picker);
  }
  form.dataset.testid = "composer";
  form.dataset.layout = layout;

  let view = null;
  let sending = false;
  let offlineWord = null; // what an Enter or Esc pressed while offline did not do

  async function submit(delivery) {
    const text = input.value.trim();
    if (!text || !view || view.sendDisabled || sending || tray.blocked()) return;
    // The button pressed is disabled while sending and drops the focus: it goes back to the
    // input afterwards, so the next message (or Esc) goes on from there.
    const hadFocus = form.contains(document.activeElement);
    sending = true;
    refresh();
    try {
      const [attachments, mentions] = [tray.ids(), mentionMenu.mentions()];
      const parts = attachments.length + mentions.length ? { attachments, mentions } : {};
      if (await onSend(text, delivery, parts)) {
        // Keep whatever was typed meanwhile only if it differs from what was sent.
        if (input.value.trim() === text) input.value = "";
        tray.clear();
        mentionMenu.clear();
        fit();
      }
    } finally {
      sending = false;
      refresh();
      // Not on a touch screen: focusing the input there pops the keyboard up again.
      const touch = window.matchMedia?.("(pointer: coarse)").matches;
      if (hadFocus && !touch && (document.activeElement === document.body || document.activeElement === null)) input.focus();
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });
  input.addEventListener("keydown", (event) => {
    if (menu.keydown(event)) return; // the `/` menu's own keys (Esc closes it, nothing more)
    if (mentionMenu.keydown(event)) return; // and the `@` menu's
    // Offline, Enter and Esc cannot reach the server: say so where the person looks.
    const enter = event.key === "Enter" && !event.shiftKey && !event.isComposing;
    if (view?.offline && (enter || (event.key === "Escape" && view.running))) {
      offlineWord = enter
        ? "Offline: not sent. The message stays here; send it once the page reconnects."
        : "Offline: the cancel cannot reach the server; press Esc again once the page reconnects.";
      refresh();
    }
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
      // Alt+Enter steers while a turn runs (queued by the backend where the agent cannot).
      submit(event.altKey && view?.running ? "steer" : undefined);
    }
  });
  // The box grows with its text (up to a third of the window, then it scrolls), so a
  // multi-line message can be read before it is sent; it shrinks back once sent.
  function fit() {
    if (!input.isConnected) return; // measured once it is on the page
    input.style.height = "auto";
    const most = Math.max(80, Math.round((window.visualViewport?.height ?? window.innerHeight) / 3));
    input.style.height = `${Math.min(input.scrollHeight + 2, most)}px`;
  }
  input.addEventListener("input", () => {
    fit();
    refresh();
    menu.refresh();
    mentionMenu.refresh();
  });
  // The caret moved without typing: the `@` under it may be another one, or none.
  input.addEventListener("keyup", (event) => {
    if (["ArrowLeft", "ArrowRight", "Home", "End"].includes(event.key)) mentionMenu.refresh();
  });
  input.addEventListener("click", () => mentionMenu.refresh());
  // Typing on a phone: the page folds its header away while the input has the focus. When a
  // tap takes the focus away, it unfolds only once that tap's click is done: the tap must land
  // where it was aimed, before the header comes back and moves the page under it.
  let pressing = false;
  let unfoldAfterPress = false;
  function unfold() {
    if (document.activeElement !== input) onTyping?.(false);
  }
  document.addEventListener("pointerdown", () => {
    pressing = true;
    setTimeout(released, 1000); // a press that never clicks (a drag) ends anyway
  }, true);
  const released = () => setTimeout(() => {
    pressing = false;
    if (unfoldAfterPress) {
      unfoldAfterPress = false;
      unfold();
    }
  }, 0);
  document.addEventListener("click", released, true);
  document.addEventListener("pointercancel", released, true);
  input.addEventListener("focus", () => {
    menu.refresh();
    mentionMenu.refresh();
    unfoldAfterPress = false;
    onTyping?.(true);
  });
  input.addEventListener("blur", () => {
    menu.refresh();
    mentionMenu.refresh();
    if (pressing) unfoldAfterPress = true;
    else unfold();
  });

  function refresh() {
    if (!view) return;
    const waiting = tray.blocked();
    send.disabled = view.sendDisabled || sending || input.value.trim() === "" || Boolean(waiting);
    send.title = view.offline ? "Offline: waiting for the server" : waiting ?? "";
    // Files go with a message to a session's agent (a new session's first prompt takes none).
    tray.setEnabled(Boolean(view.sessionId) && !view.offline);
    input.placeholder = view.offline
      ? "Offline: waiting for the server…"
      : view.running
        ? compact
          ? "Queue a message"
          : "Queue a message for when the agent is done (Enter queues, Esc cancels the turn)"
        : placeholder;
    // Nothing can be sent (offline, a login, a start under way): "Enter sends" would mislead.
    hint.hidden = Boolean(view.cancel.note) || Boolean(view.sendDisabled);
    hint.textContent = keyHint(view);
    steer.hidden = !view.steer?.visible;
    steer.disabled = send.disabled;
    const said = (view.offline && offlineWord) || view.note;
    note.hidden = !said;
    note.textContent = said ?? "";
    send.textContent = view.sendLabel;
    setAttr(send, "aria-label", view.sendLabel);
    cancel.update(view.cancel, view.sessionId);
    cancelRevert.hidden = !(view.cancel.visible && view.revertable);
    cancelRevert.disabled = view.cancel.disabled;
    afterStep.hidden = !(view.running && !view.cancel.pending);
    afterStep.disabled = view.offline;
    error.hidden = !view.error;
    error.textContent = view.error ?? "";
    offers.update(view.session ?? null, { offline: view.offline });
    menu.update(view.session?.commands);
  }

  return {
    el: form,
    layout,
    update(next) {
      view = next;
      if (!next.offline) offlineWord = null;
      refresh();
    },
    get draft() {
      return input.value;
    },
    /** What the other layout's composer takes over: the draft, its files and mentions, the focus. */
    get carried() {
      return { draft: input.value, chips: tray.chips, mentions: mentionMenu.recorded, focused: document.activeElement === input };
    },
    set carried(next) {
      input.value = next.draft;
      tray.chips = next.chips;
      mentionMenu.recorded = next.mentions;
      fit();
      refresh();
      if (next.focused) input.focus();
    },
    set draft(text) {
      input.value = text;
      fit();
      refresh();
    },
    hasFocus: () => document.activeElement === input,
    focus: () => input.focus(),
  };
}
