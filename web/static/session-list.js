// The task's sessions, each a link to `/tasks/{task}?session={id}` (so "open in new tab" works)
// whose plain click selects in place via the page controller.

import { h, timeElement } from "./dom.js";

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

/**
 * {el, update(sessions, selectedId)}; each session row may carry `status` (status.sessionStatus)
 * for its badge. onSelect(id) gets plain left clicks.
 */
export function createSessionList({ taskId, onSelect }) {
  const list = h("ul", { class: "session-list", dataset: { testid: "session-list" }, "aria-label": "Sessions" });
  let drawn = null;

  function update(sessions, selectedId) {
    // Redraw only when something shown changed: streaming re-renders the page every chunk, and
    // replacing a link between mousedown and mouseup would swallow the user's click.
    const signature = JSON.stringify([selectedId, sessions.map((s) => [s.id, s.state, s.agent, s.created_at, s.status?.key, s.status?.reason, s.queued_count])]);
    if (signature === drawn) return;
    drawn = signature;
    if (sessions.length === 0) {
      list.replaceChildren(h("li", { class: "session-empty" }, "No sessions yet."));
      return;
    }
    list.replaceChildren(
      ...sessions.map((s, index) => {
        const selected = s.id === selectedId;
        const link = h(
          "a",
          {
            class: `session-item${selected ? " is-selected" : ""}`,
            href: sessionHref(taskId, s.id),
            dataset: { testid: "session-item", sessionId: s.id, state: s.state ?? "" },
            "aria-current": selected ? "page" : null,
          },
          h("span", { class: "session-name" }, `Session ${index + 1}`),
          h("span", { class: "session-agent" }, s.agent ?? ""),
          h(
            "span",
            {
              class: `state-badge state-badge--${String(s.state ?? "").toLowerCase()} tone--${s.status?.tone ?? "neutral"}`,
              dataset: { testid: "session-state", status: s.status?.key ?? "" },
              title: s.status?.reason ?? null,
            },
            s.status?.label ?? stateText(s.state),
          ),
          queuedChip(s.queued_count),
          timeElement(s.created_at, "session-time"),
        );
        link.addEventListener("click", (event) => {
          // Let the browser handle new-tab / new-window clicks.
          if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
          event.preventDefault();
          onSelect(s.id);
        });
        return h("li", {}, link);
      }),
    );
  }

  let shownSelected = null;
  function revealSelected(selectedId) {
    // On a phone the list is a sideways strip: bring a newly selected session into view there.
    if (selectedId === shownSelected) return;
    shownSelected = selectedId;
    const item = selectedId ? list.querySelector(`[data-session-id="${CSS.escape(selectedId)}"]`) : null;
    if (item && list.scrollWidth > list.clientWidth) {
      const box = list.getBoundingClientRect();
      const at = item.getBoundingClientRect();
      if (at.left < box.left || at.right > box.right) list.scrollLeft += at.left - box.left - 12;
    }
  }

  return {
    el: list,
    update(sessions, selectedId) {
      update(sessions, selectedId);
      revealSelected(selectedId);
    },
  };
}
