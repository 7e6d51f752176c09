// The stop receipt (`stop-receipt`, DESIGN.md §18): a card under a stopped turn, drawn from its
// status message's `metadata.receipt` (updated in place once the files and the processes left
// are known). It says what the stop did in one line (stop-text.js) and offers what is left to do:
// Undo the turn's files (the page's revert flow, when `revertible`), Resume the parked queue,
// stop a subagent still running (the page's subagent stop), end the processes still running in
// the agent's group (`kill-strays-button`: session.kill_strays).

import { h } from "./dom.js";
import { isOffline } from "./state.js";
import { humanizeError } from "./status.js";
import * as SA from "./subagents-state.js";
import { killedText, receiptParts, stillRunning } from "./stop-text.js";

/**
 * getState() is the page's state; changes is session-changes.js's (revert, and what it knows was
 * reverted); actions is turn-actions.js's (queueAction, stopSubagent); ws asks session.kill_strays.
 * Returns {render(message) -> the card, refresh()}: refresh() redraws the cards whose view moved
 * (a subagent stopped, the queue resumed, the files put back), as the page renders.
 */
export function createStopReceipts({ ws, getState, changes, actions }) {
  const cards = new Map(); // turn id -> {el, message, signature}
  const kills = new Map(); // turn id -> {busy} | {answer} | {error}: what its kill button did

  /** What a card shows now: the receipt's parts and the page's own knowledge around them. */
  function viewOf(message) {
    const receipt = message.metadata.receipt;
    const state = getState();
    const sid = message.session_id ?? state.selectedSessionId;
    const turnId = String(receipt.turn_id ?? message.metadata.turn_id ?? message.id);
    const children = Array.isArray(state.sessions[sid]?.subagents) ? state.sessions[sid].subagents : [];
    // Children seen to end since the receipt was written are no longer said to run.
    const ended = children.filter((c) => !SA.ACTIVE.has(c.state) && c.state !== "cancelling").map((c) => c.id);
    const subagents = stillRunning(receipt, ended).map((id) => {
      const child = children.find((c) => c.id === id);
      const working = !child || SA.ACTIVE.has(child.state);
      return { id, title: child?.title || id, label: child ? SA.stateLabel(child.state) : "Running", canStop: working && child?.cancellable !== false && !isOffline(state) };
    });
    return {
      sid,
      turnId,
      parts: receiptParts(receipt, { ended }),
      reverted: Boolean(changes.of(sid)?.[turnId]?.reverted),
      resumed: state.queues?.[sid]?.autoRun === true,
      subagents,
      strays: Array.isArray(receipt.strays) ? receipt.strays : [],
      kill: kills.get(turnId) ?? null,
    };
  }

  function draw(card, view) {
    const line = h("p", { class: "stop-receipt-line", dataset: { testid: "stop-receipt-line" } });
    view.parts.forEach((part, i) => {
      if (i > 0) line.append(h("span", { class: "stop-receipt-sep", "aria-hidden": "true" }, " · "));
      // A part and its button stay on one line together.
      const span = h("span", { class: "stop-receipt-part", dataset: { part: part.key } }, part.text);
      line.append(span);
      if (part.action === "undo" && !view.reverted) span.append(" ", button("stop-receipt-undo", "Undo", "Put this turn's files back", (b) => changes.revert(view.turnId, b)));
      if (part.action === "undo" && view.reverted) span.append(h("span", { class: "stop-receipt-done" }, " (put back)"));
      if (part.action === "resume" && !view.resumed) span.append(" ", button("stop-receipt-resume", "Resume", "Run the queued messages", () => actions.queueAction("queue.set_auto_run", { auto_run: true }, "Could not resume the queue.")));
    });
    const extra = [];
    if (view.subagents.length) {
      extra.push(h(
        "ul",
        { class: "stop-receipt-list", "aria-label": "Subagents still running", dataset: { testid: "stop-receipt-subagents" } },
        view.subagents.map((s) => h(
          "li",
          { class: "stop-receipt-item" },
          h("span", { class: "stop-receipt-what" }, s.title),
          h("span", { class: "stop-receipt-state" }, s.label),
          s.canStop ? button("stop-receipt-subagent-stop", "Stop", `Stop ${s.title}`, (b) => {
            b.disabled = true;
            actions.stopSubagent(s.id);
          }) : null,
        )),
      ));
    }
    if (view.strays.length) {
      extra.push(h(
        "ul",
        { class: "stop-receipt-list", "aria-label": "Processes still running", dataset: { testid: "stop-receipt-strays" } },
        view.strays.map((p) => h("li", { class: "stop-receipt-item" }, h("code", { class: "stop-receipt-pid" }, String(p.pid)), h("code", { class: "stop-receipt-what" }, String(p.command ?? "")))),
      ));
    }
    const kill = view.kill;
    if (view.strays.length || kill) {
      const said = kill?.answer ? killedText(kill.answer) : kill?.error ?? "";
      const end = view.strays.length && !kill?.answer
        ? button("kill-strays-button", kill?.busy ? "Ending…" : "End them", "End the processes still running", () => killStrays(view))
        : null;
      if (end && kill?.busy) end.disabled = true;
      extra.push(h("div", { class: "stop-receipt-actions" }, end, h("span", { class: "stop-receipt-note", "aria-live": "polite", dataset: { testid: "kill-strays-result" } }, said)));
    }
    card.replaceChildren(line, ...extra);
  }

  function button(testid, text, title, onClick) {
    // The name stays the word shown (what a voice user says); the title says more.
    const b = h("button", { type: "button", class: "btn btn-secondary btn-small", dataset: { testid }, title, "aria-label": title.startsWith(text) ? title : null }, text);
    b.addEventListener("click", () => {
      if (!b.disabled) onClick(b);
    });
    return b;
  }

  async function killStrays(view) {
    kills.set(view.turnId, { busy: true });
    refresh();
    try {
      const answer = await ws.request("session.kill_strays", { session_id: view.sid });
      kills.set(view.turnId, { answer });
    } catch (err) {
      kills.set(view.turnId, { error: `Could not end them. ${humanizeError(err?.message) ?? ""}`.trim() });
    }
    refresh();
  }

  function update(card) {
    const view = viewOf(card.message);
    const signature = JSON.stringify(view);
    if (signature === card.signature) return;
    card.signature = signature;
    draw(card.el, view);
  }

  function render(message) {
    const turnId = String(message.metadata.receipt.turn_id ?? message.metadata.turn_id ?? message.id);
    let card = cards.get(turnId);
    if (!card) {
      const el = h("div", { class: "stop-receipt", role: "group", "aria-label": "What the stop did", dataset: { testid: "stop-receipt", turnId } });
      card = { el, message, signature: null };
      cards.set(turnId, card);
    }
    card.message = message;
    update(card);
    return card.el;
  }

  /** Redraws the cards on the page whose view moved; forgets those no longer shown. */
  function refresh() {
    for (const [turnId, card] of cards) {
      if (card.el.isConnected) update(card);
      else if (card.message.session_id !== getState().selectedSessionId) cards.delete(turnId);
    }
  }

  return { render, refresh };
}
