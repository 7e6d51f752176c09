// Controller of `/`: the task list and the form that creates a task. Creating a task opens it
// (its page focuses the composer). The list is re-read on every (re)connect and every few
// seconds, so tasks made in other tabs show up.

import { createConnectionBanner } from "./connection-banner.js";
import { h, timeElement } from "./dom.js";
import * as S from "./state.js";
import { humanizeError } from "./status.js";
import { Connection, socketUrl } from "./ws.js";

const TASK_REFRESH_MS = 10_000;

export function taskHref(taskId) {
  return `/tasks/${encodeURIComponent(taskId)}`;
}

export function mountTaskListPage(root, boot, env = globalThis) {
  let state = S.hydrate(boot);
  let creating = false;

  const list = h("ul", { class: "task-list", dataset: { testid: "task-list" }, "aria-label": "Tasks" });
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
  const form = h(
    "form",
    { class: "new-task-form", "aria-label": "New task" },
    h("label", { for: "new-task-title", class: "field-label" }, "New task"),
    h("div", { class: "new-task-row" }, title, create),
    error,
  );

  const banner = createConnectionBanner({ onRetry: () => ws.retryNow(), env });
  let retryAt = null;

  root.replaceChildren(
    h(
      "div",
      { class: "page page--tasks" },
      h("header", { class: "topbar" }, h("h1", { class: "topbar-title" }, "Turnvisor")),
      banner.el,
      h("main", { class: "tasks-main" }, form, h("h2", { class: "section-title" }, "Tasks"), list),
    ),
  );
  env.document.title = "Tasks · Turnvisor";

  function render() {
    if (state.tasks.length === 0) {
      list.replaceChildren(h("li", { class: "task-empty" }, "No tasks yet. Create one above."));
    } else {
      list.replaceChildren(
        ...state.tasks.map((t) =>
          h(
            "li",
            {},
            h(
              "a",
              { class: "task-item", href: taskHref(t.id), dataset: { testid: "task-item", taskId: t.id } },
              h("span", { class: "task-title" }, t.title),
              timeElement(t.updated_at, "task-time"),
            ),
          ),
        ),
      );
    }
    const offline = S.isOffline(state);
    create.disabled = creating || offline;
    create.title = offline ? "Offline: waiting for the server" : "";
    banner.update(offline, retryAt);
  }

  function showError(text) {
    error.hidden = !text;
    error.textContent = text ?? "";
  }

  const ws = new Connection({
    url: socketUrl(env.location),
    WebSocketImpl: env.WebSocket,
    onStatus: (status, info) => {
      retryAt = info?.retryAt ?? null;
      const wasOffline = S.isOffline(state);
      state = S.setConnection(state, status);
      if (wasOffline && status === "open") showError(null); // stale: it described the outage
      render();
    },
    onOpen: () => refreshTasks(),
  });

  async function refreshTasks() {
    try {
      const { tasks } = await ws.request("task.list", {});
      state = S.replaceTasks(state, tasks);
      render();
    } catch {
      // the list shown stays; the next connection or tick tries again
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
      task = await ws.request("task.create", { title: text });
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

  // Drop a one-time `?token=` from the address bar; the cookie carries auth from here on.
  const url = new URL(env.location.href);
  if (url.searchParams.has("token")) {
    url.searchParams.delete("token");
    env.history.replaceState(null, "", url.pathname + url.search + url.hash);
  }

  render();
  if (!env.matchMedia?.("(pointer: coarse)").matches) title.focus();
  ws.start();
  env.setInterval(() => {
    if (ws.isOpen && env.document.visibilityState !== "hidden") refreshTasks();
  }, TASK_REFRESH_MS);
  env.addEventListener("pagehide", () => ws.stop());
  env.addEventListener("pageshow", (event) => {
    if (event.persisted) ws.start();
  });
}
