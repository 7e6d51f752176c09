// What needs the person (DESIGN.md §15), pure. The backend keeps it: each session DTO's
// `attention` is "approval" (a permission waits), "turn_ended" (a turn ended and no page has
// shown the session since), "failed" (its start failed or its turn ended in an error), or null;
// `session.seen` clears the last two for every tab and device. The tab's title mark, the
// `attention-badge`, the rows and the browser notifications are drawn from it here.

const WORDS = {
  approval: "asks for your approval",
  turn_ended: "finished its turn",
  failed: "failed",
};

/** The kinds a page clears by showing the session (an approval waits for its answer). */
export function clearedBySeeing(kind) {
  return kind === "turn_ended" || kind === "failed";
}

/**
 * The entries of the task page: its sessions whose attention is set, in their order.
 * rows: session DTOs (ordered); names: session id -> its name; lookingAt: the session shown in
 * a visible tab (never counted: it is being seen).
 */
export function taskPageEntries(rows, { task, names, lookingAt }) {
  return rows
    .filter((r) => r?.attention && r.id !== lookingAt)
    .map((r) => ({ sessionId: r.id, kind: r.attention, taskId: task?.id ?? r.task_id, taskTitle: task?.title ?? "", agent: r.agent ?? "", name: names?.get?.(r.id) ?? r.title ?? "A session" }));
}

/** The entries of the task list: every task's `attention_sessions` (none is looked at there). */
export function taskListEntries(tasks) {
  const out = [];
  for (const t of Array.isArray(tasks) ? tasks : []) {
    for (const a of Array.isArray(t?.attention_sessions) ? t.attention_sessions : []) {
      if (!a?.attention || typeof a.session_id !== "string") continue;
      out.push({ sessionId: a.session_id, kind: a.attention, taskId: t.id, taskTitle: t.title ?? "", agent: a.agent ?? "", name: a.title || a.agent || "A session" });
    }
  }
  return out;
}

/** session id -> kind of every session with an attention (what notifications compare). */
export function kindsOf(entries) {
  const map = {};
  for (const e of entries) map[e.sessionId] = e.kind;
  return map;
}

/**
 * The entries whose attention is new since `before` (session id -> kind): what a browser
 * notification announces. Only those not looked at (`lookingAt`).
 */
export function newAttention(before, entries, lookingAt = null) {
  return entries.filter((e) => e.sessionId !== lookingAt && before?.[e.sessionId] !== e.kind);
}

/** The tab title's mark: "(2) " while two sessions need the person, else "". */
export function attentionMark(count) {
  return count > 0 ? `(${count}) ` : "";
}

/** The badge's words: "1 session needs you", "3 sessions need you". */
export function badgeText(count) {
  return count === 1 ? "1 session needs you" : `${count} sessions need you`;
}

/** One line of the badge's tooltip: "<task title> · <agent>: finished its turn". */
export function tooltipLine(entry) {
  const words = WORDS[entry.kind] ?? "needs you";
  const who = entry.agent || entry.name || "A session";
  return entry.taskTitle ? `${entry.taskTitle} · ${who}: ${words}` : `${who}: ${words}`;
}

/** A notification's title and body for an entry. */
export function notificationText(entry) {
  const title = `${entry.name} ${WORDS[entry.kind] ?? "needs you"}`;
  return { title, body: entry.taskTitle ? `Task: ${entry.taskTitle}` : "Turnvisor" };
}
