// The `project-picker` of the new-task form (DESIGN.md §12, §15): the directory the task's
// agents work in. It lists the server's roots and recent projects (project.list) and browses a
// root's directories (project.browse); a git repository is marked. No pick: the session's own
// default work folder. `project-root-add` adds a root now (project.root.add, DESIGN.md §15: kept
// by the server; one that holds its data dir is refused, and the reason shown).

import { h } from "./dom.js";
import { childPath, parentWithin } from "./turn-changes-state.js";

/** {el, value, load(), clear()}: `value` is the picked absolute path or null. */
export function createProjectPicker({ request }) {
  let roots = [];
  let value = null;
  let browsing = null; // the project.browse answer shown

  const chosen = h("span", { class: "project-chosen", dataset: { testid: "project-chosen" } }, "No project (default work dir)");
  const toggle = h("button", { type: "button", class: "btn btn-secondary", "aria-expanded": "false", dataset: { testid: "project-browse-button" } }, "Choose…");
  const clearButton = h("button", { type: "button", class: "btn btn-secondary", hidden: true, dataset: { testid: "project-clear-button" } }, "No project");
  const quick = h("div", { class: "project-quick", dataset: { testid: "project-recent" } });
  const here = h("div", { class: "project-here", dataset: { testid: "project-path" } });
  const up = h("button", { type: "button", class: "btn btn-secondary", dataset: { testid: "project-up" } }, "↑ Up");
  const use = h("button", { type: "button", class: "btn btn-primary", dataset: { testid: "project-use" } }, "Use this directory");
  const dirs = h("ul", { class: "project-dirs", "aria-label": "Directories" });
  const error = h("p", { class: "form-error", role: "alert", hidden: true, dataset: { testid: "project-error" } });
  const rootInput = h("input", { type: "text", class: "text-input project-root-input", placeholder: "Another folder as a root: /path/to/it", "aria-label": "A folder to add as a project root", dataset: { testid: "project-root-input" }, spellcheck: "false", autocomplete: "off" });
  const rootAdd = h("button", { type: "button", class: "btn btn-secondary", dataset: { testid: "project-root-add" } }, "Add as a root");
  const rootRow = h("div", { class: "project-root-row" }, rootInput, rootAdd);
  const panel = h("div", { class: "project-panel", hidden: true, dataset: { testid: "project-panel" } }, quick, h("div", { class: "project-bar" }, up, here, use), dirs, rootRow, error);
  const el = h(
    "div",
    { class: "project-picker", dataset: { testid: "project-picker" } },
    h("div", { class: "project-row" }, h("span", { class: "field-label" }, "Project"), chosen, toggle, clearButton),
    panel,
  );

  function gitBadge(isGit) {
    return isGit ? h("span", { class: "git-badge", dataset: { testid: "git-badge" } }, "git") : null;
  }

  function setValue(path, isGit) {
    value = path;
    // (replaceChildren would print a null as "null": only the nodes there are.)
    chosen.replaceChildren(...[path ?? "No project (default work dir)", path ? " " : "", path ? gitBadge(isGit) : null].filter((c) => c !== null));
    chosen.dataset.path = path ?? "";
    clearButton.hidden = !path;
  }

  function shortcut(label, path) {
    const b = h("button", { type: "button", class: "btn btn-chip", title: path, dataset: { testid: "project-shortcut", path } }, label);
    b.addEventListener("click", () => browse(path));
    return b;
  }

  async function load() {
    try {
      const list = await request("project.list", {});
      roots = list.roots ?? [];
      quick.replaceChildren(
        ...roots.map((r) => shortcut(`Root: ${r.split("/").filter(Boolean).pop() ?? "/"}`, r)),
        ...(list.recent ?? []).filter((p) => !roots.includes(p)).map((p) => shortcut(`Recent: ${p.split("/").pop() || p}`, p)),
      );
    } catch {
      // no projects on this server (or offline): the picker browses the first root when opened
    }
  }

  async function browse(path) {
    error.hidden = true;
    try {
      browsing = await request("project.browse", path ? { path } : {});
    } catch (err) {
      error.hidden = false;
      error.textContent = `Could not open that directory. ${err?.message ?? ""}`.trim();
      return;
    }
    here.replaceChildren(...[h("span", { class: "project-path-text" }, browsing.path), " ", gitBadge(browsing.is_git)].filter((c) => c !== null));
    here.dataset.path = browsing.path;
    up.disabled = parentWithin(browsing.path, roots) === null;
    dirs.replaceChildren(
      ...browsing.dirs.map((d) => {
        const b = h("button", { type: "button", class: "project-dir", dataset: { testid: "project-dir", name: d.name } }, h("span", { class: "folder-icon", "aria-hidden": "true" }), d.name, " ", gitBadge(d.is_git));
        b.addEventListener("click", () => browse(childPath(browsing.path, d.name)));
        return h("li", {}, b);
      }),
    );
    if (!browsing.dirs.length) dirs.replaceChildren(h("li", { class: "project-empty" }, "No subdirectories."));
  }

  function open(show) {
    panel.hidden = !show;
    toggle.setAttribute("aria-expanded", show ? "true" : "false");
    if (show && !browsing) browse(value);
  }

  toggle.addEventListener("click", () => open(panel.hidden));
  up.addEventListener("click", () => {
    const parent = browsing && parentWithin(browsing.path, roots);
    if (parent) browse(parent);
  });
  use.addEventListener("click", () => {
    if (!browsing) return;
    setValue(browsing.path, browsing.is_git);
    open(false);
    toggle.focus(); // the panel (and the focused button) is gone: not to the page's body
  });
  clearButton.addEventListener("click", () => setValue(null, false));

  async function addRoot() {
    const path = rootInput.value.trim();
    if (!path) {
      rootInput.focus();
      return;
    }
    error.hidden = true;
    rootAdd.disabled = true;
    try {
      const added = await request("project.root.add", { path });
      rootInput.value = "";
      await load();
      await browse(added.root);
      rootAdd.focus();
    } catch (err) {
      error.hidden = false;
      error.textContent = `Not added as a root: ${err?.message ?? "unknown error"}`;
      rootInput.focus();
    } finally {
      rootAdd.disabled = false;
    }
  }
  rootAdd.addEventListener("click", addRoot);
  rootInput.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault(); // (inside the new-task form: Enter adds the root, no task yet)
      addRoot();
    }
  });

  return {
    el,
    get value() {
      return value;
    },
    load,
    clear: () => setValue(null, false),
  };
}
