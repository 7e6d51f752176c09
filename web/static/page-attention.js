// The pages' side of attention (DESIGN.md §15): folds each session change into attention.js,
// draws `attention-badge`, and sends a browser notification (notify.js) for a session the
// person is not looking at. Both pages mount one: the task page looks at its selected session,
// the task list at none.

import * as A from "./attention.js";
import { h } from "./dom.js";
import { createNotifier } from "./notify.js";

/**
 * onOpen(sessionId, taskId): the badge (or a notification) was activated for that session.
 * Returns {badge, toggle, observe, seen, forget, mark}.
 */
export function createPageAttention({ env = globalThis, onOpen }) {
  let att = A.emptyAttention();
  const notifier = createNotifier(env);
  const badge = h("button", { type: "button", class: "attention-badge", hidden: true, dataset: { testid: "attention-badge" } });
  badge.addEventListener("click", () => {
    const [sid, info] = Object.entries(att.unseen)[0] ?? [];
    if (sid) onOpen(sid, info.taskId);
  });

  function draw() {
    const n = A.attentionCount(att);
    badge.hidden = n === 0;
    // The count alone on a phone (the words are hidden there, and are the accessible name).
    const text = A.badgeText(att);
    badge.replaceChildren(h("span", { class: "badge-count" }, String(n)), h("span", { class: "badge-words" }, text.slice(String(n).length)));
    badge.setAttribute("aria-label", text);
    badge.title = Object.values(att.unseen).map((u) => A.notificationText(u.kind, u.name).title).join("\n");
  }

  /**
   * Compares the rows before and after a change. rows: session id -> row; describe(sid, row)
   * -> {name, taskId, taskTitle, turnFailed}; lookingAt: the session shown in a visible tab.
   */
  function observe(before, after, describe, lookingAt) {
    for (const [sid, row] of Object.entries(after)) {
      const prev = before[sid];
      if (prev === row) continue;
      const info = describe(sid, row);
      const kind = A.attentionEvent(prev, row, info);
      if (!kind || sid === lookingAt) continue;
      att = A.noteAttention(att, sid, kind, info, lookingAt);
      const text = A.notificationText(kind, info.name, info.taskTitle);
      notifier.notify(text.title, text.body, `turnvisor-${sid}`, () => onOpen(sid, info.taskId));
    }
    draw();
  }

  return {
    badge,
    toggle: notifier.el,
    observe,
    seen(sid) {
      att = A.markSeen(att, sid);
      draw();
    },
    forget(exists) {
      att = A.keepOnly(att, exists);
      draw();
    },
    mark: () => A.attentionMark(att),
  };
}
