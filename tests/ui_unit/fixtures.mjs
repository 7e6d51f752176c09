// What the server sends, as the UI unit tests build it: a session DTO and a task page's boot
// state (DESIGN.md §8, §9). Not a test file itself: `node --test tests/ui_unit/` runs only
// *.test.mjs.

export const T = "task-1";

/** A session DTO of task T, running, nothing pending or queued; `extra` overrides fields. */
export function session(id, extra = {}) {
  return {
    id,
    task_id: T,
    state: "RUNNING",
    agent: "mock",
    created_at: "2026-08-03T10:00:00Z",
    updated_at: "2026-08-03T10:00:00Z",
    cancellation_pending: false,
    cancellation_revision: 0,
    queued_count: 0,
    auto_run: true,
    ...extra,
  };
}

/** The boot state of task T's page with these sessions, the first one selected. */
export function boot(sessions, extra = {}) {
  return {
    page: "task",
    task: { id: T, workspace_id: "default", title: "A task" },
    sessions,
    selected_session_id: sessions[0]?.id ?? null,
    messages: [],
    agents: ["mock", "mock-codex"],
    default_agent: "mock",
    ...extra,
  };
}
