// The `turn-changes` card (DESIGN.md §12, §15) after a turn that changed files: each file with
// its +/− counts opens its unified diff (turn.diff {path}), drawn by diff2html (diff-view.js).
// The card's `revert-turn-button` asks the page to revert the turn.

import { renderDiff } from "./diff-view.js";
import { h } from "./dom.js";
import { sortFiles, totals } from "./turn-changes-state.js";

const STATUS_MARK = { added: "A", modified: "M", deleted: "D", renamed: "R" };

/**
 * A row per file: a <details> whose first opening fetches the diff with `loadDiff(path)`.
 * Used by the turn card and the session's changes view alike.
 */
export function fileList(files, loadDiff) {
  return h(
    "ul",
    { class: "changed-files" },
    sortFiles(files).map((f) => {
      const body = h("div", { class: "changed-file-diff" }, "Loading the diff…");
      const item = h(
        "details",
        { class: "changed-file", dataset: { testid: "changed-file", path: f.path, status: f.status } },
        h(
          "summary",
          { class: "changed-file-summary" },
          h("span", { class: `file-status file-status--${f.status}`, title: f.status }, STATUS_MARK[f.status] ?? "?"),
          h("span", { class: "diff-path" }, f.old_path ? `${f.old_path} → ${f.path}` : f.path),
          f.outside ? h("span", { class: "outside-badge", title: "Also changed outside this session's turns: by hand or by another session", dataset: { testid: "changed-outside" } }, "also changed outside") : null,
          f.binary ? h("span", { class: "diff-stat" }, "binary") : h("span", { class: "diff-stat" }, h("span", { class: "diff-add" }, `+${f.additions}`), " ", h("span", { class: "diff-del" }, `−${f.deletions}`)),
        ),
        body,
      );
      let loaded = false;
      item.addEventListener("toggle", async () => {
        if (!item.open || loaded) return;
        loaded = true;
        try {
          const text = await loadDiff(f.path);
          body.replaceChildren(text ? await renderDiff(text) : h("p", { class: "muted" }, "No textual diff."));
        } catch (err) {
          loaded = false;
          body.replaceChildren(h("p", { class: "form-error", role: "alert" }, `Could not load the diff. ${err?.message ?? ""}`.trim()));
        }
      });
      return h("li", {}, item);
    }),
  );
}

/** A revert's undo, after its status message (turn-changes-state.js withChangeCards). */
function renderUndo({ revert_id: revertId, undone, kept }, ctx) {
  const button = h(
    "button",
    { type: "button", class: "btn btn-secondary btn-small", disabled: undone, dataset: { testid: "undo-revert-button", turnId: revertId } },
    undone ? "Revert undone" : "Undo this revert",
  );
  button.addEventListener("click", () => ctx.onUndoRevert?.(revertId, button));
  return h(
    "div",
    { class: "revert-undo", dataset: { testid: "revert-undo", revertId, undone: undone ? "true" : "false" } },
    kept.length ? h("span", { class: "muted", dataset: { testid: "revert-kept" } }, `Kept as you had them: ${kept.join(", ")}`) : null,
    button,
  );
}

/**
 * The card of a `turn_changes` message (turn-changes-state.js); ctx: {loadTurnDiff, onRevert,
 * onUndoRevert}.
 */
export function renderTurnChanges(message, ctx) {
  if (message.metadata?.undo) return renderUndo(message.metadata.undo, ctx);
  const { files = [], skipped = [], reverted = false } = message.metadata ?? {};
  const sum = totals(files);
  const revert = h(
    "button",
    { type: "button", class: "btn btn-secondary btn-small", disabled: reverted, dataset: { testid: "revert-turn-button", turnId: message.turn_id } },
    reverted ? "Reverted" : "Revert this turn",
  );
  revert.addEventListener("click", () => ctx.onRevert?.(message.turn_id, revert));
  return h(
    "section",
    { class: "turn-changes", "aria-label": "Files this turn changed", dataset: { testid: "turn-changes", turnId: message.turn_id, reverted: reverted ? "true" : "false" } },
    h(
      "div",
      { class: "turn-changes-head" },
      h("span", { class: "turn-changes-title" }, `${files.length} file${files.length === 1 ? "" : "s"} changed`, " ", h("span", { class: "diff-add" }, `+${sum.additions}`), " ", h("span", { class: "diff-del" }, `−${sum.deletions}`)),
      revert,
    ),
    fileList(files, (path) => ctx.loadTurnDiff(message.turn_id, path)),
    skipped.length ? h("p", { class: "muted turn-changes-skipped" }, `Not saved (cannot be reverted): ${skipped.map((s) => `${s.path} (${s.reason})`).join(", ")}`) : null,
  );
}
