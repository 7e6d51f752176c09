// Rename, archive/unarchive and delete a session of the task page, through the item dialog
// (WS `session.update` / `session.delete`, contract-notes "Renaming, archiving, deleting").
// The answers are folded in at once; the workspace notifications that follow say the same.

import * as L from "./lists.js";
import { RUNNING } from "./state.js";

/** Deleting a running session first cancels its turn (up to the backend's cancel bounds). */
export const SESSION_DELETE_TIMEOUT_MS = 60_000;

/**
 * ws: the page's Connection; dialog: an item dialog; getState(); apply(fn): folds fn(state) into
 * the page's state (and lets the page re-pick the selection); actionsButton(id) and fallbackFocus()
 * give the element focused after the dialog closes.
 */
export function createSessionActions({ ws, dialog, taskId, getState, apply, actionsButton, fallbackFocus }) {
  function fold(dto) {
    apply((s) => L.applyPageNotification(s, "session.changed", { session: dto }, ws.epoch, taskId));
  }

  function manage(sessionId) {
    const state = getState();
    const row = state.sessions[sessionId];
    if (!row) return;
    const name = L.sessionName(row, state.sessionOrder.indexOf(sessionId));
    const running = row.state === RUNNING;
    dialog.open({
      kind: "session",
      id: sessionId,
      name,
      title: row.title ?? "",
      placeholder: `${name} (${row.agent ?? "agent"})`,
      maxLength: 200,
      archived: Boolean(row.archived),
      deleteText: running
        ? `${name} is running a turn: it is cancelled first, then the session and its messages are deleted. This cannot be undone.`
        : `${name} and its messages will be deleted. This cannot be undone.`,
      // An empty name clears the title: the session is named by its number and agent again.
      rename: async (title) => fold(await ws.request("session.update", { session_id: sessionId, title })),
      setArchived: async (archived) => fold(await ws.request("session.update", { session_id: sessionId, archived })),
      remove: async () => {
        await ws.request("session.delete", { session_id: sessionId }, { timeoutMs: SESSION_DELETE_TIMEOUT_MS });
        apply((s) => L.removeSession(s, sessionId));
      },
      returnFocus: () => actionsButton(sessionId) ?? fallbackFocus(),
    });
  }

  return { manage };
}
