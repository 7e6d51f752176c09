// Where the selected session's agent works (DESIGN.md §12, §15): its worktree's branch, then the
// path (on a phone one line each, the path cut at its start). A session with no project works in
// a folder of its own under the data dir: named for its task ("Default work folder · <title>"),
// its full path on hover and in the Copy button, never a bare uuid path.

import { h } from "./dom.js";

/** `request` is ws.request: project.list says where the default work folders are (once). */
export function createWorkDir({ request } = {}) {
  const el = h("p", { class: "work-dir", dataset: { testid: "work-dir" }, hidden: true });
  let root = null;
  let asked = false;
  let shownPlace = null;

  function copyButton(path) {
    const b = h("button", { type: "button", class: "btn btn-small btn-secondary work-copy", title: `Copy ${path}`, "aria-label": "Copy the folder's path", dataset: { testid: "work-dir-copy" } }, "Copy path");
    b.addEventListener("click", () => {
      navigator.clipboard?.writeText(path).then(
        () => (b.textContent = "Copied"),
        () => (b.textContent = "Copy failed"),
      );
    });
    return b;
  }

  function draw(given) {
    // A default folder's path: the server's root of them, then the workspace's and session's ids.
    const place = given && !given.path && given.under && root ? { ...given, path: `${root}/${given.under}` } : given;
    const where = place?.label
      ? h("span", { class: "work-path", title: place.path ?? "" }, h("bdi", {}, place.label))
      : h("span", { class: "work-path", title: place?.path ?? "" }, h("bdi", {}, place?.path ?? ""));
    el.replaceChildren(
      place?.branch ? h("span", { class: "work-branch" }, `Own worktree, branch ${place.branch}`) : "",
      place ? h("span", { class: "work-where" }, "Works in ", where) : "",
      place?.label && place.path ? copyButton(place.path) : "",
    );
  }

  /** `place`: turn-changes-state.js's workplace, {path, branch?, label?} or null. */
  function update(place) {
    shownPlace = place;
    el.hidden = !place;
    if (place?.label && !root && !asked && request) {
      asked = true;
      request("project.list", {}).then(
        (answer) => {
          root = answer?.work_dir ?? null;
          if (root && shownPlace) draw(shownPlace);
        },
        () => (asked = false),
      );
    }
    const shown = place ? JSON.stringify(place) : "";
    if (el.dataset.shown !== shown) {
      el.dataset.shown = shown;
      draw(place);
    }
    el.dataset.path = place?.path ?? place?.under ?? "";
  }

  return {
    el,
    update,
  };
}
