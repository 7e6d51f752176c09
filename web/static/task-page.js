// Controller of `/tasks/{id}`: owns the one state object, folds socket traffic into it through
// state.js, and re-renders synchronously after every change. Synchronous matters: a click on the
// cancel control must leave the button disabled before the request is even sent (AC .1).

import { createComposer, COMPACT_QUERY } from "./composer.js";
import { createChangesView } from "./changes-view.js";
import { createConnectionBanner } from "./connection-banner.js";
import { h } from "./dom.js";
import { createMessageList } from "./messages.js";
import { createAgentPicker } from "./agent-picker.js";
import { sessionFiles } from "./attachments.js";
import { createItemDialog } from "./item-dialog.js";
import { createRevertDialog } from "./revert-dialog.js";
import * as L from "./lists.js";
import { createSessionActions } from "./session-actions.js";
import { createSessionList, sessionHref } from "./session-list.js";
import { createSessionSync } from "./session-sync.js";
import { createQueueList } from "./queue-list.js";
import { addQueuedEntry, messageAddOutcome, queueView } from "./queue-state.js";
import * as S from "./state.js";
import { createShortcutHelp } from "./shortcut-help.js";
import { TASK_KEYS, installTaskShortcuts } from "./shortcuts.js";
import { createStallNotice } from "./stall-notice.js";
import { createStopReceipts } from "./stop-receipt.js";
import { createSubagentRows } from "./subagent-rows.js";
import * as SA from "./subagents-state.js";
import { createEscalationCountdown, createWorkingIndicator } from "./working-indicator.js";
import { createPageAttention } from "./page-attention.js";
import { taskPageEntries } from "./attention.js";
import { createFailedStartHelp, FAILED_EMPTY, failedComposerView, withoutRepeatedFailure } from "./failed-start.js";
import { createLoginCard } from "./login-card.js";
import { createSeenSender } from "./seen.js";
import { createPhoneMenu } from "./phone-menu.js";
import { humanizeError, sessionStatus, stallNotice, titleMark } from "./status.js";
import { socketProtocols } from "./credential.js";
import { Connection, newRequestId, socketUrl } from "./ws.js";
import * as C from "./turn-changes-state.js";
import { renderTurnChanges } from "./turn-changes-card.js";
import { createSessionChanges } from "./session-changes.js";
import { createTurnActions } from "./turn-actions.js";
import { createTurnClock } from "./turn-clock.js";
import { createSessionLauncher } from "./session-launch.js";
import { createWorkDir } from "./work-dir.js";

function connectionText(status) {
  return { open: "Live", connecting: "Connecting…", reconnecting: "Offline" }[status] ?? status;
}

/** A touch screen: focusing the input there pops a keyboard up, so the page does not do it. */
function coarsePointer(env) {
  return Boolean(env.matchMedia?.("(pointer: coarse)").matches);
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
  const steerRefused = new Set(); // sessions whose agent answered a steer with steer_unsupported
  const composerNotes = {}; // session id -> words about its last send that are no error
  let pageError = null;

  // --- DOM skeleton -------------------------------------------------------------------------
  const connectionBadge = h("span", { class: "connection", dataset: { testid: "connection-status" } });
  const errorBanner = h("div", { class: "page-error", role: "alert", dataset: { testid: "page-error" }, hidden: true });
  const banner = createConnectionBanner({ onRetry: () => ws.retryNow(), env });
  const sessionList = createSessionList({
    taskId,
    onSelect: (id) => select(id, { push: true }),
    onManage: (id) => sessionActions.manage(id),
  });
  const dialog = createItemDialog();
  const revertDialog = createRevertDialog();
  const picker = createAgentPicker({
    agents: boot.agents,
    availability: boot.agent_availability,
    defaultAgent: state.defaultAgent, env,
    serverInfo: () => ws.request("server.info", {}), // each agent's cancel figures (DESIGN.md §18)
  });
  const agentSelect = picker.select;
  const launchButton = h(
    "button",
    { type: "submit", class: "btn btn-secondary", dataset: { testid: "new-session-button" } },
    "New session",
  );
  // DESIGN.md §12: on a git project a session may work in a git worktree of its own.
  const worktreeToggle = h("input", { type: "checkbox", id: "worktree-toggle", dataset: { testid: "worktree-toggle" } });
  const worktreeOption = h(
    "label",
    { class: "worktree-option", for: "worktree-toggle", hidden: !boot.project_is_git,
      title: "The session gets its own git worktree and branch: parallel sessions never touch each other's files" },
    worktreeToggle,
    h("span", {}, "Own worktree"),
    h("span", { class: "worktree-hint" }, "(own branch)"),
  );
  const launchForm = h(
    "form",
    { class: "launch-form", "aria-label": "Start a session" },
    h("label", { for: "agent-select", class: "field-label" }, "Agent"),
    h("div", { class: "launch-row" }, agentSelect, launchButton, worktreeOption),
    h("p", { class: "sandbox-warning", role: "note", dataset: { testid: "sandbox-warning" },
             hidden: !state.sandboxWarning }, state.sandboxWarning ?? ""),
    picker.note,
  );
  launchForm.addEventListener("submit", (event) => {
    event.preventDefault();
    launcher.launch(picker.value, null, { worktree: worktreeWanted() });
  });
  function worktreeWanted() {
    return !worktreeOption.hidden && worktreeToggle.checked;
  }

  const chatTitle = h("h2", { class: "chat-title" });
  const chatState = h("span", { class: "state-badge", dataset: { testid: "selected-session-state" } });
  const chatReason = h("p", { class: "chat-reason", dataset: { testid: "session-status-reason" }, hidden: true });
  // A session whose agent did not start: start one again with the same agent (issue 29).
  const retryButton = h("button", { type: "button", class: "btn btn-secondary", hidden: true, dataset: { testid: "retry-start-button" } }, "Retry start");
  retryButton.addEventListener("click", () => {
    const row = state.sessions[state.selectedSessionId];
    if (row) launcher.launch(row.agent, null, { worktree: Boolean(row.worktree) || worktreeWanted() });
  });
  // DESIGN.md §15: what needs the person (the backend's attention); issue 41 and §19: what to do
  // when an agent did not start, or needs a login.
  const attention = createPageAttention({ env, onOpen: (sid) => select(sid, { push: true }) });
  const failedHelp = createFailedStartHelp();
  const loginCard = createLoginCard({ request: (action, payload, options) => ws.request(action, payload, options) });
  const messageList = createMessageList({
    onPermission: (requestId, optionId) => actions.respondPermission(requestId, optionId),
    renderTurnChanges: (message) => renderTurnChanges(message, changes.cardContext), // diffs, revert, undo
    renderReceipt: (message) => receipts.render(message), // DESIGN.md §18
  });
  const changesView = createChangesView({ request: (action, payload) => ws.request(action, payload) });
  // Where the agent works (DESIGN.md §12): the worktree and its branch, the project, or its own.
  const workDir = createWorkDir({ request: (action, payload) => ws.request(action, payload) });
  // The stall notice and the queue of messages waiting for the turn (DESIGN.md §9) sit right
  // above the composer, the same for both composer layouts.
  const stall = createStallNotice({ onCancel: () => actions.cancel() });
  const queueList = createQueueList({
    onUpdate: (entryId, content) => actions.queueAction("queue.update", { entry_id: entryId, content }, "Could not edit the queued message."),
    onRemove: (entryId) => actions.queueAction("queue.remove", { entry_id: entryId }, "Could not remove the queued message."),
    onMove: (entryId, position) => actions.queueAction("queue.move", { entry_id: entryId, position }, "Could not move the queued message."),
    onSendNow: (entryId) => actions.queueAction("queue.send_now", { entry_id: entryId }, "Could not send the message now."),
    onSetAutoRun: (autoRun) => actions.queueAction("queue.set_auto_run", { auto_run: autoRun }, autoRun ? "Could not resume the queue." : "Could not pause the queue."),
  });
  // DESIGN.md §15: the running turn's live row, and the late cancel's countdown.
  const working = createWorkingIndicator();
  // DESIGN.md §13: the running turn's subagents, each with its own Stop.
  const subagents = createSubagentRows({ onStop: (subId) => actions.stopSubagent(subId) });
  const countdown = createEscalationCountdown({ onStopNow: () => actions.stopNow() });
  const queueSlot = h("div", { class: "queue-slot" }, countdown.el, stall.el, queueList.el);
  const composerSlot = h("div", { class: "composer-slot" });
  const menuSlot = h("span"); // the phone's header menu (phone-menu.js), made once the page is

  const topTitle = h("h1", { class: "topbar-title" }, task.title);
  // Shown instead of the task's sessions once the task was deleted (from this tab or another).
  const goneNotice = h(
    "div",
    { class: "task-gone", role: "alert", dataset: { testid: "task-gone" }, hidden: true },
    h("p", {}, "This task was deleted."),
    h("a", { href: "/", class: "btn btn-primary" }, "Back to tasks"),
  );
  root.replaceChildren(
    dialog.el,
    revertDialog.el,
    createShortcutHelp(env.document, TASK_KEYS).el,
    h(
      "div",
      { class: "page page--task" },
      h(
        "header",
        { class: "topbar" },
        h("a", { href: "/", class: "back-link" }, "← Tasks"),
        topTitle,
        attention.badge,
        attention.toggle,
        connectionBadge,
      ),
      banner.el,
      errorBanner,
      goneNotice,
      h(
        "div",
        { class: "task-layout" },
        h("aside", { class: "sidebar", "aria-label": "Sessions" }, h("h2", { class: "sidebar-title" }, "Sessions"), sessionList.el, launchForm),
        h(
          "main",
          { class: "chat" },
          h("div", { class: "chat-header" }, h("div", { class: "chat-heading" }, chatTitle, chatState, changesView.button, menuSlot), workDir.el, h("div", { class: "chat-reason-row" }, chatReason, retryButton, failedHelp.el), loginCard.el),
          changesView.el,
          messageList.el,
          working.el,
          subagents.el,
          h("div", { class: "composer-stack" }, queueSlot, composerSlot),
        ),
      ),
    ),
  );

  // --- Composer: one mounted at a time, chosen by viewport width -----------------------------
  const compactQuery = env.matchMedia(COMPACT_QUERY);
  let composer = null;
  function mountComposer() {
    const layout = compactQuery.matches ? "compact" : "desktop";
    if (composer && composer.layout === layout) return;
    const carried = composer?.carried ?? null; // the draft, its files and mentions, the focus
    composer = createComposer({
      layout,
      onSend: send,
      onCancel: () => actions.cancel(),
      onCancelRevert: () => changes.cancelAndUndo(), // asks first (DESIGN.md §15)
      onStopAfterStep: () => actions.cancel({ when: "after_step" }), // DESIGN.md §18
      onSetOption: (payload) => ws.request("session.option.set", payload), // DESIGN.md §19
      onListFiles: (query) => sessionFiles(ws, state.sessions[state.selectedSessionId]?.id, query),
      // With the phone's keyboard up, the conversation gets the room the header took.
      onTyping: (typing) => pageEl.classList.toggle("is-typing", typing && layout === "compact"),
    });
    composerSlot.replaceChildren(composer.el);
    composer.update(composerViewNow());
    if (carried) composer.carried = carried;
  }
  compactQuery.addEventListener("change", mountComposer);
  const layout = root.querySelector(".task-layout");
  const pageEl = root.querySelector(".page--task");
  menuSlot.replaceWith(createPhoneMenu({ page: pageEl, sidebar: root.querySelector(".sidebar"), header: root.querySelector(".chat-header") }).button);

  /** The composer's view, plus whether the turn can be undone (checkpoints need a project). */
  function composerViewNow() {
    const sid = state.selectedSessionId;
    const row = state.sessions[sid];
    const view = S.composerView(state);
    // Codex steers (turn/steer); an ACP agent may (the steering extension): offered until it
    // refuses one, then the §9 fallback says why the message was queued instead.
    const steers = Boolean(row) && (row.protocol === "codex" || !steerRefused.has(sid));
    return { ...failedComposerView(view, row), revertable: Boolean(row), steer: { visible: view.running && steers }, note: composerNotes[sid] ?? failedComposerView(view, row).note ?? null, session: row ?? null };
  }

  // --- Render --------------------------------------------------------------------------------
  // The control that last had the focus: when it acted and is gone (Allow, Send now, Resume…
  // are disabled, hidden or replaced), the focus would fall to the page's body; it goes to the
  // composer instead (not on touch screens, where that pops the keyboard up).
  let lastFocused = null;
  env.document.addEventListener("focusin", (event) => {
    lastFocused = event.target;
  });
  function render() {
    draw();
    const active = env.document.activeElement;
    const was = lastFocused;
    // A control just hidden or disabled may still be the active element until the browser's
    // next rendering step blurs it (no render follows that): count it as lost already.
    const lost = !active || active === env.document.body || active.disabled || active.closest?.("[hidden]");
    if (!lost) return;
    if (!was || (was.isConnected && !was.disabled && !was.closest("[hidden]"))) return; // left on purpose
    if (coarsePointer(env) || env.document.querySelector("dialog[open]")) return;
    composer.focus();
  }

  function draw() {
    const sid = state.selectedSessionId;
    const row = sid ? state.sessions[sid] : undefined;
    const ordered = S.orderedSessions(state);
    const offline = S.isOffline(state);
    sessionList.update(ordered.map((r) => ({ ...r, status: sessionStatus(state, r.id) })), sid);
    const index = ordered.findIndex((r) => r.id === sid);
    const status = row ? sessionStatus(state, sid) : null;
    chatTitle.textContent = row ? L.sessionHeading(row, index) : "No session selected";
    chatState.hidden = !row;
    // Offline, the state shown is the last one heard: say so rather than claim it is current.
    chatState.textContent = status ? (offline ? `${status.label} (last known)` : status.label) : "";
    chatState.className = `state-badge state-badge--${String(row?.state ?? "").toLowerCase()} tone--${status?.tone ?? "neutral"}`;
    chatState.dataset.status = status?.key ?? "";
    chatReason.hidden = !status?.reason;
    chatReason.textContent = status?.reason ?? "";
    chatReason.dataset.tone = status?.tone ?? "neutral"; // an asleep agent is no error
    retryButton.hidden = !status?.retry || Boolean(state.launching);
    retryButton.disabled = offline;
    failedHelp.update(row, state.messages[sid]);
    loginCard.update(row, offline);

    workDir.update(C.workplace(row, state.task));
    changesView.update(row ? sid : null);
    messageList.update(
      row ? C.withChangeCards(withoutRepeatedFailure(state.messages[sid], row), sid, changes.of(sid)) : [],
      row ? (row.state === "FAILED" ? FAILED_EMPTY : "No messages yet. Send a prompt to start a turn.") : "Start a session: pick an agent, or just type a prompt.",
      { offline },
    );
    const composerView = composerViewNow();
    composer.update(composerView);
    stall.update(stallNotice(state, sid), composerView.cancel);
    subagents.update(SA.subagentRows(state, sid, { offline }));
    receipts.refresh();
    clock.render();
    queueList.update(queueView(state, sid, { offline }));
    const launching = Boolean(state.launching);
    launchButton.disabled = launching || offline || !picker.launchable;
    agentSelect.disabled = launching;
    worktreeToggle.disabled = launching;
    connectionBadge.textContent = connectionText(state.connection);
    connectionBadge.dataset.status = state.connection;
    banner.update(offline, retryAt);
    errorBanner.hidden = !pageError;
    errorBanner.textContent = pageError ?? "";
    renderLists(offline);
    const names = new Map(ordered.map((r, i) => [r.id, L.sessionName(r, i)]));
    const entries = (lookingAt) => taskPageEntries(ordered, { task: state.task ?? task, names, lookingAt });
    attention.update(entries(lookingAt()), { all: entries(null), lookingAt: lookingAt() });
    seen.check(lookingAt() ? row : null);
    const title = `${attention.mark() || titleMark(state)}${state.task?.title ?? task.title} · Turnvisor`;
    if (env.document.title !== title) env.document.title = title;
  }

  /** The task's own title, the deleted-task notice and the dialogs (lists.js). */
  function renderLists(offline) {
    const name = state.task?.title ?? task.title;
    if (topTitle.textContent !== name) topTitle.textContent = name;
    goneNotice.hidden = !state.taskGone;
    layout.hidden = Boolean(state.taskGone);
    dialog.setOffline(offline);
    const open = dialog.openFor;
    if (open && (state.taskGone || !state.sessions[open])) dialog.close(); // removed meanwhile
    // The revert's question is about the session shown: it goes if another one is shown now.
    const asking = revertDialog.openFor;
    if (asking && (state.taskGone || asking !== state.selectedSessionId)) revertDialog.close();
  }

  /**
   * Folds a list change in, then repairs the selection: the shown session was removed (here, in
   * another tab, or while offline), or another tab started this task's first one. The next
   * session is shown, or the empty state.
   */
  function applyLists(fn) {
    const before = state.selectedSessionId;
    setState(fn);
    if (state.selectedSessionId || state.taskGone) return;
    const next = L.nextSelection(state);
    if (next) {
      select(next, { push: false });
      env.history.replaceState({ session: next }, "", sessionHref(taskId, next));
    } else if (before) {
      env.history.replaceState({ session: null }, "", new URL(env.location.href).pathname);
    }
  }

  function setState(next) {
    state = typeof next === "function" ? next(state) : next;
    render();
  }

  function showError(text) {
    pageError = text;
    render();
  }

  function setPageError(text) {
    pageError = text;
  }

  /** Not on touch screens, where focusing the input pops the keyboard up. */
  function focusComposer() {
    if (!coarsePointer(env)) composer.focus();
  }

  // --- Socket --------------------------------------------------------------------------------
  let retryAt = null;
  const ws = new Connection({
    url: socketUrl(env.location),
    protocols: socketProtocols(),
    WebSocketImpl: env.WebSocket,
    onStatus: (status, info) => {
      retryAt = info?.retryAt ?? null;
      const wasOffline = S.isOffline(state);
      state = S.setConnection(state, status);
      // Back online: what failed during the outage is stale; the snapshot tells the truth.
      if (wasOffline && status === "open") pageError = null;
      render();
    },
    onOpen: () => {
      // A new connection may face a restarted backend: resubscribe, and let the snapshot and a
      // fresh listing repair whatever was missed while away.
      follow(state.selectedSessionId);
      refreshSessions();
      refreshTask();
      picker.refreshFigures();
    },
    onNotification: (action, payload, epoch) => {
      clock.notice(action, payload);
      handleNotification(action, payload, epoch);
    },
  });

  /** The session the person is looking at: the one shown, in a tab that is visible. */
  function lookingAt() {
    return env.document.visibilityState === "hidden" ? null : state.selectedSessionId;
  }
  const seen = createSeenSender({
    env,
    request: (action, payload) => ws.request(action, payload),
    isOpen: () => ws.isOpen,
    onSeen: (sid, value) => setState((s) => S.applyNotification(s, "session.attention", { session_id: sid, attention: value }, ws.epoch)),
  });

  function handleNotification(action, payload, epoch) {
      if (action === "session.subagent.changed") setState((s) => SA.applySubagentChanged(s, payload));
      if (action === "session.turn.changes") changes.apply(payload);
      applyLists((s) => L.applyPageNotification(s, action, payload, epoch, taskId));
      // An append did not fit (a lost frame): list the messages again (state.js). Any later
      // notification retries one that failed, or one whose replay still found a gap.
      resyncMessages(state.selectedSessionId);
  }

  // The selected session's turn: its changes (DESIGN.md §12), the requests that act on it, and
  // the clock of its working indicator and escalation countdown (DESIGN.md §15).
  const changes = createSessionChanges({ ws, getState: () => state, render, showError, changesView, askRevert: revertDialog.ask, cancelTurn: (o) => actions.cancel(o) });
  const actions = createTurnActions({
    ws,
    taskId,
    getState: () => state,
    setState,
    showError,
    setPageError,
    focusComposer,
    changes,
  });
  const receipts = createStopReceipts({ ws, getState: () => state, changes, actions });
  const launcher = createSessionLauncher({
    ws,
    taskId,
    picker,
    getState: () => state,
    setState,
    applyLists,
    select,
    focusComposer,
    showError,
    setPageError,
    worktreeWanted,
  });
  const clock = createTurnClock({ env, working, countdown, timeouts: boot.cancel_timeouts, getState: () => state });

  const sessionActions = createSessionActions({
    ws,
    dialog,
    taskId,
    getState: () => state,
    apply: applyLists,
    actionsButton: (id) => sessionList.actionsButton(id),
    fallbackFocus: () => launchButton,
  });

  // What the page holds of the task and the followed session, listed again when it may be behind.
  const { follow, resyncMessages, refreshSessions, refreshTask } = createSessionSync({
    ws, taskId, getState: () => state, setState, applyLists, changes, showError,
  });

  // --- Actions -------------------------------------------------------------------------------
  function select(sid, { push }) {
    if (!sid || sid === state.selectedSessionId) return;
    const previous = state.selectedSessionId;
    pageError = null; // it was about the view left behind
    setState((s) => S.selectSession(s, sid));
    messageList.scrollToEnd(); // another conversation: start at its latest message
    if (push) env.history.pushState({ session: sid }, "", sessionHref(taskId, sid));
    if (previous && ws.isOpen) ws.request("session.unsubscribe", { session_id: previous }).catch(() => {});
    follow(sid);
  }

  async function send(text, delivery = "auto", parts = {}) {
    const sid = state.selectedSessionId;
    if (!sid || !state.sessions[sid]) return launcher.launch(picker.value, text);
    delete composerNotes[sid];
    try {
      // "auto": starts a turn when the agent is free, else joins the queue (DESIGN.md §9).
      // One client_message_id per message (DESIGN.md §14): sent again after a lost connection,
      // the backend answers what the first attempt made and runs nothing twice.
      const payload = { session_id: sid, content: text, delivery, client_message_id: `m-${newRequestId()}-${Date.now()}`, ...parts }; // + files, @mentions (§19)
      const outcome = messageAddOutcome(await sendOnce(payload));
      if (outcome.steerUnsupported) {
        steerRefused.add(sid);
        composerNotes[sid] = "This agent cannot take a message into a running turn: it was queued and runs when the turn ends.";
      }
      setState((s) => {
        let next = S.clearComposerError(s, sid);
        if (outcome.message) next = S.addMessage(next, sid, outcome.message);
        if (outcome.delivery === "queued" && outcome.entry) next = addQueuedEntry(next, sid, outcome.entry);
        return next;
      });
      return true;
    } catch (err) {
      setState((s) => S.setComposerError(s, sid, `Could not send. ${humanizeError(err.message)}`));
      return false;
    }
  }

  /** message.add, retried with the same id while its connection drops before the answer. */
  async function sendOnce(payload, attempts = 3) {
    for (let i = 1; ; i += 1) {
      try {
        return await ws.request("message.add", payload);
      } catch (err) {
        if (err.code !== "DISCONNECTED" || i >= attempts) throw err;
      }
    }
  }

  // --- URL -----------------------------------------------------------------------------------
  // Name the selected session in the address, so a reload shows the same one.
  const url = new URL(env.location.href);
  if (state.selectedSessionId) url.searchParams.set("session", state.selectedSessionId);
  env.history.replaceState({ session: state.selectedSessionId }, "", url.pathname + url.search + url.hash);
  env.addEventListener("popstate", () => {
    const sid = new URL(env.location.href).searchParams.get("session");
    if (sid && state.sessions[sid]) select(sid, { push: false });
  });

  // The page's keys (shortcuts.js): Esc cancels, as in the input; Alt+… for the rest.
  installTaskShortcuts({
    env,
    sessionIds: () => S.orderedSessions(state).filter((r) => !r.archived).map((r) => r.id),
    selected: () => state.selectedSessionId,
    select: (sid) => select(sid, { push: true }),
  });

  // Back to a tab whose shown session had news: it is seen now (seen.js, after the render).
  env.document.addEventListener("visibilitychange", () => render());

  mountComposer();
  render(); // first paint: straight from the boot state, spinner included if pending
  focusComposer();
  ws.start();
  // Close cleanly on unload; a page restored from the back/forward cache reconnects and the
  // resubscribe snapshot repairs whatever happened meanwhile.
  env.addEventListener("pagehide", () => ws.stop());
  env.addEventListener("pageshow", (event) => {
    if (event.persisted) ws.start();
  });
}
