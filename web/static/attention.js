// What needs the person (DESIGN.md §15), pure: which sessions had a turn end, asked for an
// approval or failed while the person was not looking at them. The tab's title mark, the
// `attention-badge` and the browser notifications are drawn from it (notify.js, the pages).
//
// "Looking at" a session means it is the one shown and the tab is visible; what happens there
// is seen as it happens and never counts.

const WORDS = {
  approval: "asks for your approval",
  ended: "finished its turn",
  failed: "failed",
};

/** No session needs the person yet. */
export function emptyAttention() {
  return { unseen: {} }; // session id -> {kind, taskId, name}
}

function failedNow(prev, next) {
  return next.state === "FAILED" && prev?.state !== "FAILED";
}

/**
 * The event a change of one session row makes, or null: "approval" (a permission now waits),
 * "failed" (its agent could not start, or its turn ended in an error), "ended" (a running turn
 * ended). `prev` may be undefined (a session heard of for the first time: only a failure or a
 * waiting approval count then, not a turn that ended before the page knew it).
 */
export function attentionEvent(prev, next, { turnFailed = false } = {}) {
  if (!next) return null;
  if (next.needs_approval === true && prev?.needs_approval !== true) return "approval";
  if (failedNow(prev, next)) return "failed";
  if (prev?.state === "RUNNING" && next.state !== "RUNNING") return turnFailed ? "failed" : "ended";
  return null;
}

/** Records an event unless the person is looking at that session. */
export function noteAttention(att, sessionId, kind, info, lookingAt) {
  if (!kind || !sessionId || sessionId === lookingAt) return att;
  return { ...att, unseen: { ...att.unseen, [sessionId]: { kind, taskId: info?.taskId ?? null, name: info?.name ?? "A session" } } };
}

/** The person looked at the session: what it had to say is seen. */
export function markSeen(att, sessionId) {
  if (!sessionId || !(sessionId in att.unseen)) return att;
  const unseen = { ...att.unseen };
  delete unseen[sessionId];
  return { ...att, unseen };
}

/** Forgets sessions that no longer exist (deleted here or elsewhere). */
export function keepOnly(att, exists) {
  let next = att;
  for (const sid of Object.keys(att.unseen)) if (!exists(sid)) next = markSeen(next, sid);
  return next;
}

/** How many sessions need the person. */
export function attentionCount(att) {
  return Object.keys(att.unseen).length;
}

/** The tab title's mark: "(2) " while two sessions need the person, else "". */
export function attentionMark(att) {
  const n = attentionCount(att);
  return n > 0 ? `(${n}) ` : "";
}

/** The badge's words: "1 session needs you", "3 sessions need you". */
export function badgeText(att) {
  const n = attentionCount(att);
  return n === 1 ? "1 session needs you" : `${n} sessions need you`;
}

/** A notification's title and body for an event of the session called `name`. */
export function notificationText(kind, name, taskTitle) {
  const title = `${name} ${WORDS[kind] ?? "needs you"}`;
  return { title, body: taskTitle ? `Task: ${taskTitle}` : "Turnvisor" };
}
