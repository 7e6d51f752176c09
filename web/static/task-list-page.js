// Controller of `/`: the task list and the form that creates a task. Creating a task opens it
// (its page focuses the composer). The list is live: it follows the workspace notifications
// (task.changed / task.removed; session.changed / session.removed re-read the counts), and is
// re-read once on every (re)connect, which repairs whatever was missed while offline.

import * as A from "./attention.js";
import { createConnectionBanner } from "./connection-banner.js";
import { h, timeElement } from "./dom.js";
import { createItemDialog } from "./item-dialog.js";
import * as L from "./lists.js";
import * as S from "./state.js";
import { createPageAttention } from "./page-attention.js";
import { createProjectPicker } from "./project-picker.js";
import { createShortcutHelp } from "./shortcut-help.js";
import { createStopAll } from "./stop-all.js";
import { runningTurns } from "./stop-text.js";
import { humanizeError } from "./status.js";
import { socketProtocols } from "./credential.js";
import { Connection, socketUrl } from "./ws.js";

/** Deleting a task first cancels its running sessions (up to the backend's cancel bounds). */
const DELETE_TIMEOUT_MS = 60_000;

export function taskHref(taskId) {
  return `/tasks/${encodeURIComponent(taskId)}`;
}

export function mountTaskListPage(root, boot, env = globalThis) {
  let state = S.hydrate(boot);
  let creating = false;

  const list = h("ul", { class: "task-list", "aria-label": "Tasks" });
  const archivedList = h("ul", { class: "task-list", "aria-label": "Archived tasks" });
  const archivedSummary = h("summary", { class: "archived-summary" });
  const archivedGroup = h(
    "details",
    { class: "archived-group", dataset: { testid: "archived-tasks" }, hidden: true },
    archivedSummary,
    archivedList,
  );
  const lists = h("div", { class: "task-lists", dataset: { testid: "task-list" } }, list, archivedGroup);
  const dialog = createItemDialog();
  // DESIGN.md §15: every task's sessions that need the person, as the backend keeps them (each
  // task DTO's attention_sessions; none is looked at here).
  const attention = createPageAttention({
    env,
    onOpen: (sid, taskId) => env.location.assign(`${taskHref(taskId)}?session=${encodeURIComponent(sid)}`),
  });

  const title = h("input", {
    id: "new-task-title",
    class: "text-input",
    type: "text",
    autocomplete: "off",
    placeholder: "What should the agent work on?",
    dataset: { testid: "new-task-title" },
  });
  const create = h("button", { type: "submit", class: "btn btn-primary", dataset: { testid: "create-task-button" } }, "Create task");
  const error = h("p", { class: "form-error", role: "alert", dataset: { testid: "page-error" }, hidden: true });
  const projects = createProjectPicker({ request: (action, payload) => ws.request(action, payload) });
  const form = h(
    "form",
    { class: "new-task-form", "aria-label": "New task" },
    h("label", { for: "new-task-title", class: "field-label" }, "New task"),
    h("div", { class: "new-task-row" }, title, create),
    projects.el,
    error,
  );

  const banner = createConnectionBanner({ onRetry: () => ws.retryNow(), env });
  let retryAt = null;
  // DESIGN.md §18: every running turn of the workspace stopped at once, after a question.
  const stopAll = createStopAll({ request: (action, payload, options) => ws.request(action, payload, options), onDone: () => refreshTasks() });

  root.replaceChildren(
    createShortcutHelp(env.document).el,
    h(
      "div",
      { class: "page page--tasks" },
      h("header", { class: "topbar" }, h("h1", { class: "topbar-title" }, "Turnvisor"), stopAll.summary, stopAll.button, attention.badge, attention.toggle),
      banner.el,
      h("main", { class: "tasks-main" }, form, h("h2", { class: "section-title" }, "Tasks"), lists),
    ),
    dialog.el,
    stopAll.dialog,
  );

  function taskRow(t) {
    const status = L.taskStatus(t);
    const needs = A.taskListEntries([t]);
    const manage = h(
      "button",
      {
        type: "button",
        class: "btn btn-icon item-actions",
        "aria-label": `Rename, archive or delete ${t.title}`,
        "aria-haspopup": "dialog",
        title: "Rename, archive or delete",
        dataset: { testid: "task-actions", taskId: t.id },
      },
      "⋯",
    );
    manage.addEventListener("click", () => manageTask(t.id));
    return h(
      "li",
      { class: "task-row" },
      h(
        "a",
        {
          class: `task-item${t.archived ? " is-archived" : ""}`,
          href: taskHref(t.id),
          dataset: { testid: "task-item", taskId: t.id, archived: t.archived ? "true" : "false" },
        },
        h("span", { class: "task-title", dataset: { testid: "task-title" } }, t.title),
        h("span", { class: `state-badge tone--${status.tone}`, dataset: { testid: "task-status", status: status.key }, title: needs.map(A.tooltipLine).join("\n") || null }, status.label),
        timeElement(t.active_at ?? t.updated_at, "task-time"),
      ),
      manage,
    );
  }

  let drawn = null;
  function renderList() {
    // Redraw only when something shown changed (a click between mousedown and mouseup on a
    // replaced link would be lost).
    const signature = JSON.stringify(state.tasks.map((t) => [t.id, t.title, t.archived, t.active_at, t.updated_at, t.session_count, t.running_count, t.approval_count, t.cancelling_count, t.failed_count, t.attention_sessions]));
    if (signature === drawn) return;
    drawn = signature;
    const { active, archived } = L.splitArchived(state.tasks);
    if (active.length === 0) {
      const text = archived.length ? "No active tasks. Archived ones are below." : "No tasks yet. Create one above.";
      list.replaceChildren(h("li", { class: "task-empty" }, text));
    } else {
      list.replaceChildren(...active.map(taskRow));
    }
    archivedGroup.hidden = archived.length === 0;
    archivedSummary.textContent = `Archived (${archived.length})`;
    archivedList.replaceChildren(...archived.map(taskRow));
  }

  function render() {
    renderList();
    attention.update(A.taskListEntries(state.tasks));
    const title = `${attention.mark()}Tasks · Turnvisor`;
    if (env.document.title !== title) env.document.title = title;
    const offline = S.isOffline(state);
    create.disabled = creating || offline;
    create.title = offline ? "Offline: waiting for the server" : "";
    banner.update(offline, retryAt);
    stopAll.update(runningTurns(state.tasks), offline);
    dialog.setOffline(offline);
    // The task the dialog is about was deleted elsewhere: nothing is left to act on.
    const open = dialog.openFor;
    if (open && !state.tasks.some((t) => t.id === open)) dialog.close();
  }

  function actionsButton(taskId) {
    return lists.querySelector(`[data-testid="task-actions"][data-task-id="${CSS.escape(taskId)}"]`);
  }

  function manageTask(taskId) {
    const t = state.tasks.find((x) => x.id === taskId);
    if (!t) return;
    dialog.open({
      kind: "task",
      id: t.id,
      name: t.title,
      title: t.title,
      maxLength: 500,
      archived: Boolean(t.archived),
      deleteText: `“${t.title}” and all its sessions and messages will be deleted; a running session is cancelled first. This cannot be undone.`,
      rename: async (text) => {
        const dto = await ws.request("task.update", { task_id: t.id, title: text });
        state = L.applyTaskListNotification(state, "task.changed", { task: dto });
        render();
      },
      setArchived: async (archived) => {
        const dto = await ws.request("task.update", { task_id: t.id, archived });
        state = L.applyTaskListNotification(state, "task.changed", { task: dto });
        render();
      },
      remove: async () => {
        await ws.request("task.delete", { task_id: t.id }, { timeoutMs: DELETE_TIMEOUT_MS });
        state = L.removeTask(state, t.id);
        render();
      },
      // Back to the row's button; a deleted task has none, so the list's first one, or the
      // form (not on a touch screen, where focusing the input pops the keyboard up).
      returnFocus: () =>
        actionsButton(t.id) ??
        lists.querySelector("[data-testid='task-actions']") ??
        (env.matchMedia?.("(pointer: coarse)").matches ? null : title),
    });
  }

  function showError(text) {
    error.hidden = !text;
    error.textContent = text ?? "";
  }

  const ws = new Connection({
    url: socketUrl(env.location),
    protocols: socketProtocols(),
    WebSocketImpl: env.WebSocket,
    onStatus: (status, info) => {
      retryAt = info?.retryAt ?? null;
      const wasOffline = S.isOffline(state);
      state = S.setConnection(state, status);
      if (wasOffline && status === "open") showError(null); // stale: it described the outage
      render();
    },
    // Every (re)connect: one listing repairs whatever was missed while away.
    onOpen: () => {
      refreshTasks();
      projects.load();
    },
    onNotification: (action, payload) => {
      state = L.applyTaskListNotification(state, action, payload);
      render();
      if (L.changesTaskCounts(action)) refreshTasks();
    },
  });

  // One listing at a time; what asks meanwhile gets one more after it (a burst of session
  // changes costs two listings, not one each).
  let listing = false;
  let listAgain = false;
  async function refreshTasks() {
    if (listing) {
      listAgain = true;
      return;
    }
    listing = true;
    try {
      do {
        listAgain = false;
        const before = state.tasks.map((t) => t.id);
        const { tasks } = await ws.request("task.list", {});
        state = L.mergeTaskListing(state, tasks, before);
        render();
      } while (listAgain);
    } catch {
      // the list shown stays; the next connection or notification tries again
    } finally {
      listing = false;
    }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = title.value.trim();
    if (!text) {
      showError("Give the task a title.");
      title.focus();
      return;
    }
    creating = true;
    showError(null);
    render();
    let task = null;
    try {
      const payload = { title: text };
      if (projects.value) payload.project_dir = projects.value;
      task = await ws.request("task.create", payload);
      state = S.upsertTask(state, task);
      title.value = "";
    } catch (err) {
      showError(`Could not create the task. ${humanizeError(err.message)}`);
    } finally {
      creating = false;
      render();
    }
    if (task?.id) env.location.assign(taskHref(task.id)); // open it, composer focused there
  });


  render();
  if (!env.matchMedia?.("(pointer: coarse)").matches) title.focus();
  ws.start();
  env.addEventListener("pagehide", () => ws.stop());
  env.addEventListener("pageshow", (event) => {
    if (event.persisted) ws.start();
  });
}
