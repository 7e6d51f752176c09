// The task's sessions, each a link to `/tasks/{task}?session={id}` (so "open in new tab" works)
// whose plain click selects in place via the page controller, and a button that opens the
// rename / archive / delete dialog (item-dialog.js).

import { h, timeElement } from "./dom.js";
import { sessionName } from "./lists.js";

const STATE_TEXT = {
  CREATED: "Created",
  STARTING: "Starting",
  RUNNING: "Running",
  WAITING_FOR_INPUT: "Waiting for input",
  COMPLETED: "Completed",
  FAILED: "Failed",
  CANCELLED: "Cancelled",
};

export function sessionHref(taskId, sessionId) {
  return `/tasks/${encodeURIComponent(taskId)}?session=${encodeURIComponent(sessionId)}`;
}

export function stateText(state) {
  return STATE_TEXT[state] ?? String(state ?? "Unknown");
}

/** "2 queued" on a session with messages waiting (DESIGN.md §9 `queued_count`). */
function queuedChip(count) {
  if (typeof count !== "number" || count <= 0) return null;
  return h("span", { class: "session-queued", dataset: { testid: "session-queued" } }, `${count} queued`);
}

/** DESIGN.md §15: a turn that ended while no page showed the session (the backend's attention). */
function endedChip(attention) {
  if (attention !== "turn_ended") return null;
  return h("span", { class: "session-news", dataset: { testid: "session-attention" }, title: "Its turn ended while no page showed it" }, "Turn ended");
}

/** The branch of a session launched in its own worktree (DESIGN.md §12). */
function branchLine(worktree) {
  if (!worktree?.branch) return null;
  return h(
    "span",
    { class: "session-branch", dataset: { testid: "session-branch" }, title: `Own worktree: ${worktree.path ?? ""}` },
    h("span", { "aria-hidden": "true" }, "⎇ "),
    h("span", { class: "visually-hidden" }, "Branch "),
    worktree.branch,
  );
}

/**
 * {el, update(sessions, selectedId)}; each session row may carry `status` (status.sessionStatus)
 * for its badge. onSelect(id) gets plain left clicks; onManage(id) the row's actions button
 * (rename, archive, delete). Archived sessions go in a collapsed "Archived" group; every session
 * keeps its number ("Session N", creation order) wherever it is shown.
 */
export function createSessionList({ taskId, onSelect, onManage = () => {} }) {
  const list = h("ul", { class: "session-list", "aria-label": "Sessions" });
  const archivedList = h("ul", { class: "session-list session-list--archived", "aria-label": "Archived sessions" });
  const archivedSummary = h("summary", { class: "archived-summary" });
  const archivedGroup = h(
    "details",
    { class: "archived-group", dataset: { testid: "archived-sessions" }, hidden: true },
    archivedSummary,
    archivedList,
  );
  const el = h("div", { class: "session-lists", dataset: { testid: "session-list" } }, list, archivedGroup);
  let drawn = null;

  function row(s, index, selectedId) {
    const selected = s.id === selectedId;
    const name = sessionName(s, index);
    const link = h(
      "a",
      {
        class: `session-item${selected ? " is-selected" : ""}${s.archived ? " is-archived" : ""}`,
        href: sessionHref(taskId, s.id),
        dataset: { testid: "session-item", sessionId: s.id, state: s.state ?? "", archived: s.archived ? "true" : "false", attention: s.attention ?? "" },
        "aria-current": selected ? "page" : null,
      },
      h("span", { class: "session-name", dataset: { testid: "session-name" } }, name),
      h("span", { class: "session-agent", dataset: { testid: "session-agent" } }, s.agent ?? ""),
      timeElement(s.created_at, "session-time"),
      h(
        "span",
        { class: "session-meta" },
        h(
          "span",
          {
            class: `state-badge state-badge--${String(s.state ?? "").toLowerCase()} tone--${s.status?.tone ?? "neutral"}`,
            dataset: { testid: "session-state", status: s.status?.key ?? "" },
            // The desktop sidebar cuts a state too long for its line: the tooltip says it whole.
            title: s.status?.reason ?? s.status?.label ?? null,
          },
          s.status?.label ?? stateText(s.state),
        ),
        queuedChip(s.queued_count),
        endedChip(s.attention),
      ),
      branchLine(s.worktree),
    );
    link.addEventListener("click", (event) => {
      // Let the browser handle new-tab / new-window clicks.
      if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
      event.preventDefault();
      onSelect(s.id);
    });
    const manage = h(
      "button",
      {
        type: "button",
        class: "btn btn-icon item-actions",
        "aria-label": `Rename, archive or delete ${name}`,
        "aria-haspopup": "dialog",
        title: "Rename, archive or delete",
        dataset: { testid: "session-actions", sessionId: s.id },
      },
      "⋯",
    );
    manage.addEventListener("click", () => onManage(s.id));
    return h("li", { class: "session-row" }, link, manage);
  }

  function update(sessions, selectedId) {
    // Redraw only when something shown changed: streaming re-renders the page every chunk, and
    // replacing a link between mousedown and mouseup would swallow the user's click.
    const signature = JSON.stringify([
      selectedId,
      sessions.map((s) => [s.id, s.state, s.agent, s.title, s.archived, s.created_at, s.status?.key, s.status?.reason, s.queued_count, s.worktree?.branch, s.attention]),
    ]);
    if (signature === drawn) return;
    drawn = signature;
    const numbered = sessions.map((s, index) => ({ s, index }));
    const active = numbered.filter(({ s }) => !s.archived);
    const archived = numbered.filter(({ s }) => s.archived);
    list.replaceChildren(
      ...(active.length === 0
        ? [h("li", { class: "session-empty" }, archived.length ? "No active sessions." : "No sessions yet.")]
        : active.map(({ s, index }) => row(s, index, selectedId))),
    );
    archivedGroup.hidden = archived.length === 0;
    archivedSummary.textContent = `Archived (${archived.length})`;
    archivedList.replaceChildren(...archived.map(({ s, index }) => row(s, index, selectedId)));
    // The selected session is archived: open the group so it can be seen.
    if (archived.some(({ s }) => s.id === selectedId)) archivedGroup.open = true;
  }

  let shownSelected = null;
  function revealSelected(selectedId) {
    // On a phone the list is a sideways strip: bring a newly selected session into view there.
    if (selectedId === shownSelected) return;
    shownSelected = selectedId;
    const item = selectedId ? el.querySelector(`[data-testid="session-item"][data-session-id="${CSS.escape(selectedId)}"]`) : null;
    const strip = item?.closest("ul");
    if (item && strip && strip.scrollWidth > strip.clientWidth) {
      const box = strip.getBoundingClientRect();
      const at = item.getBoundingClientRect();
      if (at.left < box.left || at.right > box.right) strip.scrollLeft += at.left - box.left - 12;
    }
  }

  return {
    el,
    update(sessions, selectedId) {
      update(sessions, selectedId);
      revealSelected(selectedId);
    },
    /** The actions button of a session, if shown (focus goes back there after the dialog). */
    actionsButton(sessionId) {
      return el.querySelector(`[data-testid="session-actions"][data-session-id="${CSS.escape(sessionId)}"]`);
    },
  };
}
