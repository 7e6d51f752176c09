// Controller of `/tasks/{id}`: owns the one state object, folds socket traffic into it through
// state.js, and re-renders synchronously after every change. Synchronous matters: a click on the
// cancel control must leave the button disabled before the request is even sent (AC .1).

import { createComposer, COMPACT_QUERY } from "./composer.js";
import { h } from "./dom.js";
import { createMessageList } from "./messages.js";
import { createSessionList, sessionHref, stateText } from "./session-list.js";
import * as S from "./state.js";
import { Connection, newRequestId, socketUrl } from "./ws.js";

const LAUNCH_TIMEOUT_MS = 60_000; // a real agent CLI may take a while to initialize

/** Text for a failed agent.cancel: the request's own error stays visible (spec, state machine). */
function cancelErrorText(err) {
  switch (err?.code) {
    case "TIMEOUT":
      return "No answer to the cancel request within 15 s. You can try again.";
    case "DISCONNECTED":
      return "The connection dropped before the cancel was confirmed. You can try again.";
    default:
      return `Cancel failed: ${err?.message ?? "unknown error"}`;
  }
}

function connectionText(status) {
  return { open: "Live", connecting: "Connecting…", reconnecting: "Reconnecting…" }[status] ?? status;
}

function mostRecentlyUpdated(state) {
  const rows = S.orderedSessions(state);
  let best = null;
  for (const row of rows) {
    if (!best || Date.parse(row.updated_at ?? "") >= Date.parse(best.updated_at ?? "")) best = row;
  }
  return best?.id ?? null;
}

export function mountTaskPage(root, boot, env = globalThis) {
  let state = S.hydrate(boot);
  const task = state.task ?? { id: "", title: "Task" };
  const taskId = task.id;
  if (state.selectedSessionId && !state.sessions[state.selectedSessionId]) {
    state = S.selectSession(state, mostRecentlyUpdated(state));
  }
  let launching = false;
  let connection = "connecting";
  let pageError = null;

  // --- DOM skeleton -------------------------------------------------------------------------
  const connectionBadge = h("span", { class: "connection", dataset: { testid: "connection-status" } });
  const errorBanner = h("div", { class: "page-error", role: "alert", dataset: { testid: "page-error" }, hidden: true });
  const sessionList = createSessionList({ taskId, onSelect: (id) => select(id, { push: true }) });
  const agentSelect = h(
    "select",
    { id: "agent-select", class: "agent-select", dataset: { testid: "agent-select" } },
    state.agents.map((a) => h("option", { value: a, selected: a === state.defaultAgent }, a)),
  );
  const launchButton = h(
    "button",
    { type: "submit", class: "btn btn-secondary", dataset: { testid: "new-session-button" } },
    "New session",
  );
  const launchForm = h(
    "form",
    { class: "launch-form", "aria-label": "Start a session" },
    h("label", { for: "agent-select", class: "field-label" }, "Agent"),
    h("div", { class: "launch-row" }, agentSelect, launchButton),
    h("p", { class: "sandbox-warning", role: "note", dataset: { testid: "sandbox-warning" },
             hidden: !state.sandboxWarning }, state.sandboxWarning ?? ""),
  );
  launchForm.addEventListener("submit", (event) => {
    event.preventDefault();
    launch(agentSelect.value, null);
  });

  const chatTitle = h("h2", { class: "chat-title" });
  const chatState = h("span", { class: "state-badge", dataset: { testid: "selected-session-state" } });
  const messageList = createMessageList({ onPermission: respondPermission });
  const composerSlot = h("div", { class: "composer-slot" });

  root.replaceChildren(
    h(
      "div",
      { class: "page page--task" },
      h(
        "header",
        { class: "topbar" },
        h("a", { href: "/", class: "back-link" }, "← Tasks"),
        h("h1", { class: "topbar-title" }, task.title),
        connectionBadge,
      ),
      errorBanner,
      h(
        "div",
        { class: "task-layout" },
        h("aside", { class: "sidebar", "aria-label": "Sessions" }, h("h2", { class: "sidebar-title" }, "Sessions"), sessionList.el, launchForm),
        h("main", { class: "chat" }, h("div", { class: "chat-header" }, chatTitle, chatState), messageList.el, composerSlot),
      ),
    ),
  );
  env.document.title = `${task.title} · Turnvisor`;

  // --- Composer: one mounted at a time, chosen by viewport width -----------------------------
  const compactQuery = env.matchMedia(COMPACT_QUERY);
  let composer = null;
  function mountComposer() {
    const layout = compactQuery.matches ? "compact" : "desktop";
    if (composer && composer.layout === layout) return;
    const draft = composer?.draft ?? "";
    const focused = composer?.hasFocus() ?? false;
    composer = createComposer({ layout, onSend: send, onCancel: cancel });
    composer.draft = draft;
    composerSlot.replaceChildren(composer.el);
    composer.update(S.composerView(state));
    if (focused) composer.focus();
  }
  compactQuery.addEventListener("change", mountComposer);

  // --- Render --------------------------------------------------------------------------------
  function render() {
    const sid = state.selectedSessionId;
    const row = sid ? state.sessions[sid] : undefined;
    const ordered = S.orderedSessions(state);
    sessionList.update(ordered, sid);
    const index = ordered.findIndex((r) => r.id === sid);
    chatTitle.textContent = row ? `Session ${index + 1} · ${row.agent ?? ""}` : "No session selected";
    chatState.hidden = !row;
    chatState.textContent = row ? stateText(row.state) : "";
    chatState.className = `state-badge state-badge--${String(row?.state ?? "").toLowerCase()}`;
    messageList.update(
      row ? state.messages[sid] : [],
      row ? "No messages yet. Send a prompt to start a turn." : "Start a session: pick an agent, or just type a prompt.",
    );
    composer.update(S.composerView(state));
    launchButton.disabled = launching;
    agentSelect.disabled = launching;
    connectionBadge.textContent = connectionText(connection);
    connectionBadge.dataset.status = connection;
    errorBanner.hidden = !pageError;
    errorBanner.textContent = pageError ?? "";
  }

  function setState(next) {
    state = typeof next === "function" ? next(state) : next;
    render();
  }

  function showError(text) {
    pageError = text;
    render();
  }

  // --- Socket --------------------------------------------------------------------------------
  const ws = new Connection({
    url: socketUrl(env.location),
    WebSocketImpl: env.WebSocket,
    onStatus: (status) => {
      connection = status;
      render();
    },
    onOpen: () => {
      // A new connection may face a restarted backend: resubscribe, and let the snapshot and a
      // fresh listing repair whatever was missed while away.
      follow(state.selectedSessionId);
      refreshSessions();
    },
    onNotification: (action, payload, epoch) => setState((s) => S.applyNotification(s, action, payload, epoch)),
  });

  async function follow(sid) {
    if (!sid || !ws.isOpen) return; // onOpen follows the selected session once connected
    try {
      await ws.request("session.subscribe", { session_id: sid });
      const { messages } = await ws.request("message.list", { session_id: sid });
      setState((s) => S.replaceMessages(s, sid, messages));
    } catch (err) {
      if (err?.code !== "DISCONNECTED") showError(`Could not follow the session: ${err.message}`);
    }
  }

  async function refreshSessions() {
    let sessions;
    try {
      ({ sessions } = await ws.request("session.list", { task_id: taskId }));
    } catch {
      return; // only a refresh; the subscription snapshot still repairs the selected session
    }
    const epoch = ws.epoch;
    setState((s) => S.replaceSessions(s, sessions, epoch));
    if (!state.selectedSessionId && state.sessionOrder.length) {
      // Another tab started the first session of this task: show it here too.
      const sid = mostRecentlyUpdated(state);
      setState((s) => S.selectSession(s, sid));
      env.history.replaceState({ session: sid }, "", sessionHref(taskId, sid));
      follow(sid);
    }
  }

  // --- Actions -------------------------------------------------------------------------------
  function select(sid, { push }) {
    if (!sid || sid === state.selectedSessionId) return;
    const previous = state.selectedSessionId;
    setState((s) => S.selectSession(s, sid));
    if (push) env.history.pushState({ session: sid }, "", sessionHref(taskId, sid));
    if (previous && ws.isOpen) ws.request("session.unsubscribe", { session_id: previous }).catch(() => {});
    follow(sid);
    refreshSessions(); // the list only hears about the session it follows; refresh the others
  }

  async function launch(agent, prompt) {
    if (launching) return false;
    launching = true;
    pageError = null;
    render();
    try {
      const payload = { task_id: taskId, agent };
      if (prompt) payload.prompt = prompt;
      const dto = await ws.request("session.launch", payload, { timeoutMs: LAUNCH_TIMEOUT_MS });
      const epoch = ws.epoch;
      setState((s) => S.upsertSession(s, dto, epoch));
      select(dto.id, { push: true });
      return true;
    } catch (err) {
      showError(`Could not start a session: ${err.message}`);
      return false;
    } finally {
      launching = false;
      render();
    }
  }

  async function send(text) {
    const sid = state.selectedSessionId;
    if (!sid || !state.sessions[sid]) return launch(agentSelect.value, text);
    try {
      const message = await ws.request("message.add", { session_id: sid, content: text });
      setState((s) => S.addMessage(S.clearComposerError(s, sid), sid, message));
      return true;
    } catch (err) {
      setState((s) => S.setComposerError(s, sid, `Could not send: ${err.message}`));
      return false;
    }
  }

  function cancel() {
    const sid = state.selectedSessionId;
    const requestId = newRequestId();
    const begun = S.beginCancel(state, sid, requestId, ws.epoch);
    if (!begun.send) return; // duplicate activation, or nothing running
    setState(begun.state); // disabled + spinner now, before the request leaves
    ws.request("agent.cancel", { session_id: sid, task_id: taskId }, { id: requestId, timeoutMs: S.CANCEL_REQUEST_TIMEOUT_MS }).then(
      () => setState((s) => S.settleCancel(s, sid, requestId, { ok: true })),
      (err) => setState((s) => S.settleCancel(s, sid, requestId, { ok: false, error: cancelErrorText(err) })),
    );
  }

  function respondPermission(requestId, optionId) {
    const sid = state.selectedSessionId;
    ws.request("permission.respond", { session_id: sid, request_id: requestId, option_id: optionId }).catch((err) =>
      showError(`Could not answer the permission request: ${err.message}`),
    );
  }

  // --- URL -----------------------------------------------------------------------------------
  // Drop a one-time `?token=` from the address bar (the cookie carries auth from here on) and
  // name the selected session, so a reload shows the same one.
  const url = new URL(env.location.href);
  url.searchParams.delete("token");
  if (state.selectedSessionId) url.searchParams.set("session", state.selectedSessionId);
  env.history.replaceState({ session: state.selectedSessionId }, "", url.pathname + url.search + url.hash);
  env.addEventListener("popstate", () => {
    const sid = new URL(env.location.href).searchParams.get("session");
    if (sid && state.sessions[sid]) select(sid, { push: false });
  });

  mountComposer();
  render(); // first paint: straight from the boot state, spinner included if pending
  ws.start();
  // Close cleanly on unload; a page restored from the back/forward cache reconnects and the
  // resubscribe snapshot repairs whatever happened meanwhile.
  env.addEventListener("pagehide", () => ws.stop());
  env.addEventListener("pageshow", (event) => {
    if (event.persisted) ws.start();
  });
}
