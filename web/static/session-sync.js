// Keeping the page's copy of the task and of the followed session's messages whole: following
// a session (subscribe, then list), listing it again when a streamed append did not fit what the
// page holds, and the task's sessions and title after a reconnect. One listing at a time per
// session, so a burst of stale appends asks once.

import * as L from "./lists.js";
import * as S from "./state.js";
import { humanizeError } from "./status.js";

export function createSessionSync({ ws, taskId, getState, setState, applyLists, changes, showError }) {
  // Sessions whose messages are being listed (follow, or a resync): one listing at a time each.
  const listing = new Set();

  async function follow(sid) {
    if (!sid || !ws.isOpen) return; // onOpen follows the selected session once connected
    listing.add(sid);
    let listed = false;
    try {
      // text_appends: a streamed answer grows by session.message.appended, not whole copies.
      await ws.request("session.subscribe", { session_id: sid, text_appends: true });
      const { messages } = await ws.request("message.list", { session_id: sid });
      setState((s) => S.replaceMessages(s, sid, messages));
      listed = true;
      changes.probe(sid);
    } catch (err) {
      // Deleted meanwhile (while offline, or by another tab just now): show another one.
      if (err?.code === "NOT_FOUND") applyLists((s) => L.removeSession(s, sid));
      else if (err?.code !== "DISCONNECTED") showError(`Could not follow the session: ${humanizeError(err.message)}`);
    } finally {
      listing.delete(sid);
    }
    if (listed) resyncMessages(sid); // the held appends left a gap: list again
  }

  /** Lists a followed session's messages again when an append did not fit what is held. */
  async function resyncMessages(sid) {
    if (!sid || listing.has(sid) || !ws.isOpen || !S.messagesStale(getState(), sid)) return;
    listing.add(sid);
    try {
      const { messages } = await ws.request("message.list", { session_id: sid });
      setState((s) => S.replaceMessages(s, sid, messages));
    } catch {
      // The session stays stale: the next notification, or the reconnect's follow, tries again.
    } finally {
      listing.delete(sid);
    }
  }

  async function refreshSessions() {
    const before = [...getState().sessionOrder];
    let sessions;
    try {
      ({ sessions } = await ws.request("session.list", { task_id: taskId }));
    } catch (err) {
      if (err?.code === "NOT_FOUND") applyLists((s) => ({ ...s, taskGone: true })); // deleted while away
      return; // else only a refresh; the subscription snapshot still repairs the selected session
    }
    const epoch = ws.epoch;
    applyLists((s) => L.syncSessions(s, sessions, epoch, before));
  }

  /** The task's title (renamed while away), or that it is gone. */
  async function refreshTask() {
    try {
      const { tasks } = await ws.request("task.list", {});
      applyLists((s) => L.syncTask(s, tasks, taskId));
    } catch {
      // the next connection tries again; notifications carry changes meanwhile
    }
  }

  return { follow, resyncMessages, refreshSessions, refreshTask };
}
