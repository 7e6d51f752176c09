// The pages' side of attention (DESIGN.md §15): draws `attention-badge` from the backend's
// attention (attention.js) and sends an opt-in browser notification (notify.js) when a session
// the person is not looking at gets a new one. Both pages mount one: the task page with its
// sessions (the one shown in a visible tab left out), the task list with every task's.

import * as A from "./attention.js";
import { h } from "./dom.js";
import { createNotifier } from "./notify.js";

/**
 * onOpen(sessionId, taskId): the badge (or a notification) was activated for that session.
 * Returns {badge, toggle, update(entries, {all, lookingAt}), mark()}.
 */
export function createPageAttention({ env = globalThis, onOpen }) {
  const notifier = createNotifier(env);
  let shown = [];
  let known = null; // session id -> kind last heard (null until the first update: no news then)
  const badge = h("button", { type: "button", class: "attention-badge", hidden: true, dataset: { testid: "attention-badge" } });
  badge.addEventListener("click", () => {
    const first = shown[0];
    if (first) onOpen(first.sessionId, first.taskId);
  });

  function draw() {
    const n = shown.length;
    badge.hidden = n === 0;
    // The count alone on a phone (the words are hidden there, and are the accessible name).
    const text = A.badgeText(n);
    badge.replaceChildren(h("span", { class: "badge-count" }, String(n)), h("span", { class: "badge-words" }, text.slice(String(n).length)));
    badge.setAttribute("aria-label", text);
    badge.title = shown.map(A.tooltipLine).join("\n");
  }

  /**
   * entries: what the badge shows (attention.js); all: every session's entry, the one looked at
   * included (a change of it is no news for a notification, but must not look new once left).
   */
  function update(entries, { all = entries, lookingAt = null } = {}) {
    shown = entries;
    if (known !== null) {
      for (const e of A.newAttention(known, all, lookingAt)) {
        const text = A.notificationText(e);
        notifier.notify(text.title, text.body, `turnvisor-${e.sessionId}`, () => onOpen(e.sessionId, e.taskId));
      }
    }
    known = A.kindsOf(all);
    draw();
  }

  return { badge, toggle: notifier.el, update, mark: () => A.attentionMark(shown.length) };
}
