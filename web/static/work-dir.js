// Where the selected session's agent works (DESIGN.md §12): its worktree's branch, then the
// path (on a phone one line each, the path cut at its start); hidden without a project.

import { h } from "./dom.js";

export function createWorkDir() {
  const el = h("p", { class: "work-dir", dataset: { testid: "work-dir" }, hidden: true });

  /** `place`: turn-changes-state.js's workplace, {path, branch?} or null. */
  function update(place) {
    el.hidden = !place;
    const shown = place ? JSON.stringify(place) : "";
    if (el.dataset.shown !== shown) {
      el.dataset.shown = shown;
      el.replaceChildren(
        place?.branch ? h("span", { class: "work-branch" }, `Own worktree, branch ${place.branch}`) : "",
        place ? h("span", { class: "work-where" }, "Works in ", h("span", { class: "work-path", title: place.path }, h("bdi", {}, place.path))) : "",
      );
    }
    el.dataset.path = place?.path ?? "";
  }

  return { el, update };
}
