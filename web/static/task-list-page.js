// Controller of `/`: the task list and the form that creates a task. Creating keeps the person
// on the list (the new task appears at the top, a link to its page).

import { formatTime, h } from "./dom.js";
import * as S from "./state.js";
import { Connection, socketUrl } from "./ws.js";

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

  root.replaceChildren(
    h(
      "div",
      { class: "page page--tasks" },
      h("header", { class: "topbar" }, h("h1", { class: "topbar-title" }, "Turnvisor")),
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
              t.updated_at ? h("time", { class: "task-time", datetime: t.updated_at }, formatTime(t.updated_at)) : null,
            ),
          ),
        ),
      );
    }
    create.disabled = creating;
  }

  function showError(text) {
    error.hidden = !text;
    error.textContent = text ?? "";
  }

  const ws = new Connection({
    url: socketUrl(env.location),
    WebSocketImpl: env.WebSocket,
    onOpen: async () => {
      try {
        const { tasks } = await ws.request("task.list", {});
        state = S.replaceTasks(state, tasks);
        render();
      } catch {
        // the boot state's list stays; the next connection tries again
      }
    },
  });

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
    try {
      const task = await ws.request("task.create", { title: text });
      state = S.upsertTask(state, task);
      title.value = "";
    } catch (err) {
      showError(`Could not create the task: ${err.message}`);
    } finally {
      creating = false;
      render();
    }
  });

  // Drop a one-time `?token=` from the address bar; the cookie carries auth from here on.
  const url = new URL(env.location.href);
  if (url.searchParams.has("token")) {
    url.searchParams.delete("token");
    env.history.replaceState(null, "", url.pathname + url.search + url.hash);
  }

  render();
  ws.start();
  env.addEventListener("pagehide", () => ws.stop());
  env.addEventListener("pageshow", (event) => {
    if (event.persisted) ws.start();
  });
}
