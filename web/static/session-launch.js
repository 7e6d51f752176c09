// Starting a session from the task page (session.launch, DESIGN.md §12's worktree included).
// While it starts, Send waits (state.launching): what is typed meanwhile is for the new session.
// A start that fails selects the FAILED session it left (it says why, and Retry start is at
// hand), so nothing typed next goes to the session shown before (issue 29).

import * as L from "./lists.js";
import * as S from "./state.js";
import { humanizeError } from "./status.js";

const LAUNCH_TIMEOUT_MS = 60_000; // a real agent CLI may take a while to initialize

export function createSessionLauncher({ ws, taskId, picker, getState, setState, applyLists, select, focusComposer, showError, setPageError, worktreeWanted }) {
  async function launch(agent, prompt, { worktree = worktreeWanted() } = {}) {
    if (getState().launching) return false;
    picker.remember(agent);
    setPageError(null);
    const before = new Set(getState().sessionOrder);
    setState((s) => ({ ...s, launching: true }));
    try {
      const payload = { task_id: taskId, agent };
      if (prompt) payload.prompt = prompt;
      if (worktree) payload.worktree = true;
      const dto = await ws.request("session.launch", payload, { timeoutMs: LAUNCH_TIMEOUT_MS });
      const epoch = ws.epoch;
      setState((s) => S.upsertSession(s, dto, epoch));
      select(dto.id, { push: true });
      focusComposer();
      return true;
    } catch (err) {
      const failed = await failedStart(before, agent);
      if (failed) {
        select(failed, { push: true });
        focusComposer();
      } else {
        showError(`Could not start a session${worktree ? " in its own worktree" : ""}. ${humanizeError(err.message)}`);
      }
      return false;
    } finally {
      setState((s) => ({ ...s, launching: false }));
    }
  }

  /** The FAILED session a failed session.launch of `agent` left in this task, if any. */
  async function failedStart(before, agent) {
    try {
      const known = [...getState().sessionOrder];
      const { sessions } = await ws.request("session.list", { task_id: taskId });
      const epoch = ws.epoch;
      applyLists((s) => L.syncSessions(s, sessions, epoch, known));
      const fresh = sessions
        .filter((d) => !before.has(d.id) && d.agent === agent && d.state === "FAILED")
        .sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at));
      return fresh[0]?.id ?? null;
    } catch {
      return null; // offline meanwhile: the banner and the next listing tell the rest
    }
  }

  return { launch };
}
