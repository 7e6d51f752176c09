// DESIGN.md §15: the task page tells the backend when it shows a session in a visible tab
// (`session.seen`), so what that session had to say (a turn that ended, a failure) is cleared on
// every tab and device; one that ended while no page showed it stays marked after a reload, in a
// second tab and on the phone. Checked after every render: on select, when the tab becomes
// visible, and when an attention change arrives for the session shown.

import { clearedBySeeing } from "./attention.js";

/**
 * request(action, payload) -> Promise of the answer; isOpen() -> whether it can be sent now;
 * onSeen(sessionId, attention): the session's attention as the backend answered.
 */
export function createSeenSender({ env, request, isOpen, onSeen }) {
  const asking = new Set(); // one session.seen in flight per session

  /** Sends session.seen when the session shown (row) has something a look clears. */
  function check(row) {
    if (!row || !clearedBySeeing(row.attention) || asking.has(row.id)) return;
    if (env.document.visibilityState === "hidden" || !isOpen()) return;
    const sid = row.id;
    asking.add(sid);
    request("session.seen", { session_id: sid })
      .then((dto) => onSeen(sid, dto?.attention ?? null))
      .catch(() => {}) // offline or gone: the next render (or the reconnect's listing) tries again
      .finally(() => asking.delete(sid));
  }

  return { check };
}
