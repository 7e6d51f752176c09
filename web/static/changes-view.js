// The `changes-view` (DESIGN.md §12, §15): what the selected session's own turns changed (the sum
// of each turn's before→after: session.diff), in a panel above the conversation; a file also
// changed outside them (by hand, by another session) is marked. The diff is fetched once per
// opening; each file shows its own part of it.

import { h } from "./dom.js";
import { fileList } from "./turn-changes-card.js";

/** The part of a multi-file unified diff that is about `path` ("diff --git a/… b/<path>"). */
export function fileSection(diff, path) {
  const parts = String(diff ?? "").split(/^(?=diff --git )/m);
  return parts.find((p) => p.split("\n", 1)[0].endsWith(` b/${path}`)) ?? "";
}

/** {el, button, update(sessionId)}: `button` toggles the panel; `request` is ws.request. */
export function createChangesView({ request }) {
  let sessionId = null;
  const button = h("button", { type: "button", class: "btn btn-secondary btn-small", "aria-expanded": "false", dataset: { testid: "changes-view-button" } }, "Changes");
  const body = h("div", { class: "changes-body" });
  const el = h("section", { class: "changes-view", "aria-label": "The session's changes", hidden: true, dataset: { testid: "changes-view" } }, body);

  async function load() {
    const sid = sessionId;
    body.replaceChildren(h("p", { class: "muted" }, "Loading the session's changes…"));
    try {
      const answer = await request("session.diff", { session_id: sid });
      if (sid !== sessionId) return;
      const outside = answer.files.some((f) => f.outside);
      body.replaceChildren(
        answer.files.length
          ? fileList(answer.files, async (path) => fileSection(answer.diff, path))
          : h("p", { class: "muted", dataset: { testid: "changes-empty" } }, "No changes in this session yet."),
        outside ? h("p", { class: "muted changes-outside-note" }, "“also changed outside”: someone else (you by hand, or another session) changed that file too; the diff shows this session's part.") : null,
      );
    } catch (err) {
      if (sid !== sessionId) return;
      const text = err?.code === "NOT_FOUND" ? "No changes in this session yet." : `Could not load the changes. ${err?.message ?? ""}`.trim();
      body.replaceChildren(h("p", { class: "muted", dataset: { testid: "changes-empty" } }, text));
    }
  }

  function setOpen(open) {
    el.hidden = !open;
    button.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) load();
  }
  button.addEventListener("click", () => setOpen(el.hidden));

  function update(sid) {
    button.hidden = !sid;
    if (sid === sessionId) return;
    sessionId = sid;
    setOpen(false); // another session: its own changes when asked
  }

  return { el, button, update, reload: () => !el.hidden && load() };
}
