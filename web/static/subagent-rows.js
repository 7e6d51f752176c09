// A running turn's subagents (DESIGN.md §13): one `subagent-row` per child session, its title,
// its task (`subagent-task`) and last activity (`subagent-activity`), its state and its own Stop (`subagent-stop-button`), under the turn's live row. What to show is
// subagents-state.js's `subagentRows`; onStop(id) sends `subagent.cancel` for that child only.

import { h } from "./dom.js";

export function createSubagentRows({ onStop }) {
  const el = h("ul", { class: "subagent-rows", "aria-label": "Subagents", hidden: true, dataset: { testid: "subagent-rows" } });
  const rows = new Map(); // id -> {li, title, state, stop}

  function rowFor(id) {
    let row = rows.get(id);
    if (row) return row;
    const title = h("span", { class: "subagent-title" });
    // What it was asked, and what it does now (its last tool, or the end of its text).
    const task = h("span", { class: "subagent-task", dataset: { testid: "subagent-task" } });
    const activity = h("span", { class: "subagent-activity", dataset: { testid: "subagent-activity" } });
    const what = h("span", { class: "subagent-what" }, title, task, activity);
    const state = h("span", { class: "subagent-state" });
    const stop = h("button", { type: "button", class: "btn btn-secondary btn-small", dataset: { testid: "subagent-stop-button" } }, "Stop");
    stop.addEventListener("click", () => {
      if (stop.disabled) return;
      stop.disabled = true; // once: the row says "Stopping…" until the child ends
      onStop(id);
    });
    const li = h("li", { class: "subagent-row", dataset: { testid: "subagent-row", subagentId: id } }, what, state, stop);
    row = { li, title, task, activity, state, stop };
    rows.set(id, row);
    return row;
  }

  return {
    el,
    update(views) {
      const shown = new Set();
      const items = views.map((v) => {
        shown.add(v.id);
        const row = rowFor(v.id);
        if (row.title.textContent !== v.title) row.title.textContent = v.title;
        if (row.state.textContent !== v.label) row.state.textContent = v.label;
        if (row.task.textContent !== v.task) row.task.textContent = v.task;
        row.task.hidden = !v.task;
        if (row.activity.textContent !== v.activity) row.activity.textContent = v.activity;
        row.activity.hidden = !v.activity;
        row.activity.title = v.activity;
        row.li.dataset.state = v.state;
        row.stop.hidden = !v.canStop && v.state !== "cancelling";
        row.stop.disabled = !v.canStop;
        row.stop.setAttribute("aria-label", `Stop ${v.title}`);
        return row.li;
      });
      for (const id of [...rows.keys()]) if (!shown.has(id)) rows.delete(id);
      const same = items.length === el.children.length && items.every((li, i) => el.children[i] === li);
      if (!same) el.replaceChildren(...items);
      el.hidden = items.length === 0;
    },
  };
}
