// The task page's keys (issue 41 item 9), listed by the `?` sheet (shortcut-help.js). Each key
// does what a control on the page does, through that control: Alt+U clicks the
// `cancel-revert-button` and Alt+S the `stop-now-button`, so a key can never do more (or ask
// less) than the button. Esc cancels the running turn anywhere but in a dialog (the composer's
// own Esc does so in the input). Every other key carries Alt, so it works while typing and
// never takes a character from the message; `event.code` names the key, as Alt changes the
// character on some keyboards. Esc clicks the `cancel-agent-button` (shown and enabled exactly
// while the turn can be cancelled).

/** [keys, what they do], in the order the `?` sheet lists them (after the composer's). */
export const TASK_KEYS = [
  ["Esc", "Cancel the running turn (in a dialog: close it)"],
  ["Alt+U", "Cancel and undo: cancel the turn and put its files back"],
  ["Alt+S", "Stop it now, while a cancel waits on an agent that does not answer"],
  ["Alt+C", "Go to the latest turn's changes (then Tab reaches Revert this turn)"],
  ["Alt+↓ / Alt+↑", "Next / previous session"],
  ["Alt+N", "New task"],
];

const ALT_CODES = {
  KeyU: "cancel-revert",
  KeyS: "stop-now",
  KeyC: "changes",
  KeyN: "new-task",
  ArrowDown: "next-session",
  ArrowUp: "previous-session",
};

/**
 * The action a keydown asks for, or null. Pure: `{key, code, altKey, ctrlKey, metaKey,
 * shiftKey, isComposing}` and where it happened (`inSelect`: a <select>, whose Alt+↓ opens it).
 */
export function shortcutFor(event, { inSelect = false } = {}) {
  if (!event || event.isComposing) return null;
  if (event.ctrlKey || event.metaKey) return null;
  if (event.key === "Escape" && !event.altKey && !event.shiftKey) return "cancel";
  if (!event.altKey || event.shiftKey) return null;
  const action = ALT_CODES[event.code] ?? null;
  if (inSelect && (action === "next-session" || action === "previous-session")) return null;
  return action;
}

/** A control a person could use now: on the page, shown, enabled. */
function usable(el) {
  return Boolean(el) && el.isConnected && !el.disabled && !el.closest("[hidden]") && el.getClientRects().length > 0;
}

/** The session shown `step` places after the selected one, in the strip's order (wrapping). */
export function steppedSession(ids, selected, step) {
  if (!ids.length) return null;
  const at = ids.indexOf(selected);
  if (at < 0) return ids[step > 0 ? 0 : ids.length - 1];
  return ids[(at + step + ids.length) % ids.length];
}

/**
 * Listens on the document. deps: {env, sessionIds() (the strip's, archived left out),
 * selected(), select(id)}.
 */
export function installTaskShortcuts({ env, sessionIds, selected, select }) {
  const doc = env.document;
  function click(testid) {
    const button = doc.querySelector(`[data-testid="${testid}"]`);
    if (!usable(button)) return false;
    button.click();
    return true;
  }
  function focusChanges() {
    const cards = doc.querySelectorAll('[data-testid="message-list"] [data-testid="turn-changes"]');
    const card = cards[cards.length - 1];
    if (!card) return false;
    // The card itself takes the focus (its label is read), so Tab goes on to its first control.
    if (!card.hasAttribute("tabindex")) card.setAttribute("tabindex", "-1");
    card.scrollIntoView({ block: "nearest" });
    card.focus();
    return true;
  }
  const run = {
    cancel: () => click("cancel-agent-button"),
    "cancel-revert": () => click("cancel-revert-button"),
    "stop-now": () => click("stop-now-button"),
    changes: focusChanges,
    "new-task": () => {
      env.location.assign("/"); // the task list, its title field focused
      return true;
    },
    "next-session": () => step(1),
    "previous-session": () => step(-1),
  };
  function step(by) {
    const next = steppedSession(sessionIds(), selected(), by);
    if (!next || next === selected()) return false;
    select(next);
    return true;
  }
  doc.addEventListener("keydown", (event) => {
    if (event.defaultPrevented) return;
    if (doc.querySelector("dialog[open], [role='dialog']:not([hidden])")) return; // the dialog's own keys
    const action = shortcutFor(event, { inSelect: event.target?.tagName === "SELECT" });
    if (action && run[action]()) event.preventDefault();
  });
}
