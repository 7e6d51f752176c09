// The chat transcript of the selected session. Rendering is keyed by message id: a streamed
// update touches only its own row, so the rest of the list (and the reader's scroll position)
// stays put while an agent writes. Agent text is a live Markdown view (markdown.js) that renders
// only the still-open block per chunk.

import { renderMessageParts } from "./attach-tray.js";
import { h, timeElement } from "./dom.js";
import { createMarkdownView } from "./markdown.js";
import { humanizeError } from "./status.js";
import { renderPermission, renderPlan, renderToolCard } from "./tool-card.js";
import { renderSubagentTrace } from "./subagent-trace.js";

/** DESIGN.md §5's status of the person's own cancel: the turn stopped as asked. */
const USER_CANCEL = "Turn cancelled by user";

function renderStatus(message, ctx) {
  const meta = message.metadata ?? {};
  // A stall notice whose turn went on producing output is history, no longer a warning.
  const resolvedStall = Boolean(meta.stalled && meta.resolved);
  // A cancel the person asked for, and got, is information; one the agent did not answer (and
  // had to be stopped) stays a warning. The wire keeps its "warning" (DESIGN.md §5).
  const askedCancel = Boolean(meta.cancelled && !meta.escalated && message.content === USER_CANCEL);
  const variant = resolvedStall || askedCancel ? "info" : meta.variant ?? "info";
  let text = variant === "error" ? humanizeError(message.content) ?? message.content : message.content;
  // DESIGN.md §9: an escalated cancel keeps its text; say the agent had to be stopped.
  if (meta.escalated) text = `${text} (the agent did not answer and had to be stopped)`;
  if (resolvedStall) text = `${text} (then it went on)`;
  const node = h(
    "div",
    { class: `status-message badge badge--${variant}`, dataset: { testid: "status-message", variant } },
    variant === "warning" || variant === "error" ? h("span", { class: "badge-icon", "aria-hidden": "true" }, variant === "error" ? "✕" : "⚠") : null,
    h("span", {}, text),
  );
  if (text !== message.content) node.title = message.content;
  // DESIGN.md §18: a stopped turn's receipt, under its status line.
  if (meta.receipt && typeof meta.receipt === "object" && ctx.renderReceipt) return h("div", { class: "status-with-receipt" }, node, ctx.renderReceipt(message));
  return node;
}

function isMarkdown(message) {
  return message.role === "agent" && (message.kind ?? "text") === "text" && typeof message.content === "string";
}

/** A text bubble; agent text gets a Markdown view the row keeps for its streamed updates. */
function renderText(message) {
  const thought = message.metadata?.channel === "thought";
  if (isMarkdown(message)) {
    const view = createMarkdownView();
    view.set(message.content);
    const bubble = h(
      "div",
      { class: `bubble${thought ? " bubble--thought" : ""}` },
      thought ? h("p", { class: "thought-kicker" }, "Thinking") : null,
      view.el,
      timeElement(message.created_at, "msg-time"),
    );
    return { node: bubble, view };
  }
  const content = typeof message.content === "string" ? message.content : JSON.stringify(message.content, null, 2);
  // DESIGN.md §9: a message steered into the running turn, not one that started a turn.
  const steered = message.role === "user" && message.metadata?.delivery === "steer";
  return {
    node: h(
      "div",
      { class: "bubble" },
      steered ? h("p", { class: "steer-kicker", dataset: { testid: "steered-mark" } }, "Sent into the running turn") : null,
      h("div", { class: "msg-text" }, content),
      message.role === "user" ? renderMessageParts(message) : null, // DESIGN.md §19
      timeElement(message.created_at, "msg-time"),
    ),
    view: null,
  };
}

const SPEAKERS = { user: "You", agent: "Agent", system: "Turnvisor" };

function renderRow(message, ctx) {
  let body;
  let view = null;
  switch (message.kind) {
    case "tool_call":
      body = renderToolCard(message);
      break;
    case "permission":
      body = renderPermission(message, ctx);
      break;
    case "status":
      body = renderStatus(message, ctx);
      break;
    case "plan":
      body = renderPlan(message);
      break;
    case "subagent":
      body = renderSubagentTrace(message);
      break;
    case "turn_changes":
      body = ctx.renderTurnChanges(message);
      break;
    default:
      ({ node: body, view } = renderText(message));
  }
  const li = h(
    "li",
    {
      class: `msg msg--${message.role ?? "agent"} msg--kind-${message.kind ?? "text"}`,
      dataset: { messageId: String(message.id), role: message.role ?? "", kind: message.kind ?? "" },
    },
    // Who speaks, for those who hear the conversation (the bubbles' sides say it to the eye).
    h("span", { class: "visually-hidden", dataset: { testid: "speaker" } }, `${SPEAKERS[message.role] ?? "Agent"}: `),
    body,
  );
  return { node: li, view };
}

/**
 * {el, update(messages | undefined, emptyText, {offline}), scrollToEnd}: undefined messages
 * means "still loading". `el` wraps the list and its "jump to latest" button.
 */
export function createMessageList({ onPermission, renderTurnChanges, renderReceipt }) {
  const list = h("ol", { class: "message-list", dataset: { testid: "message-list" }, role: "log", "aria-label": "Conversation" });
  const empty = h("li", { class: "message-empty" });
  const jump = h(
    "button",
    { type: "button", class: "btn jump-latest", dataset: { testid: "jump-to-latest" }, hidden: true, "aria-label": "Jump to the latest message" },
    "↓ Latest",
  );
  const wrap = h("div", { class: "message-pane" }, list, jump);
  // id -> {message, signature, node, view}; `message` is the object last drawn (the state never
  // mutates one, so the same object means nothing changed and no work is done).
  const rows = new Map();

  // Whether the view follows new output. Only scrolling changes it (the reader's, or ours to the
  // end): content growing under a pinned view, even between two updates, keeps it pinned.
  let pinned = true;
  // Where the last scroll left the view. A scroll event arrives after the fact: when it is our own
  // scroll to the end and the content grew in between, the view is no longer near the bottom, yet
  // the reader did not move. Only a move up (or any move while unpinned) decides again.
  let lastTop = 0;
  function nearBottom() {
    return list.scrollHeight - list.scrollTop - list.clientHeight < 48;
  }
  function scrollToEnd() {
    pinned = true;
    list.scrollTop = list.scrollHeight;
    lastTop = list.scrollTop;
    jump.hidden = true;
  }
  list.addEventListener("scroll", () => {
    const top = list.scrollTop;
    if (!pinned || top < lastTop - 1) pinned = nearBottom();
    lastTop = top;
    jump.hidden = pinned;
  });
  jump.addEventListener("click", scrollToEnd);

  function update(messages, emptyText, { offline = false } = {}) {
    const stick = pinned;
    if (!Array.isArray(messages) || messages.length === 0) {
      pinned = true;
      rows.clear();
      empty.textContent = Array.isArray(messages) ? emptyText : "Loading messages…";
      list.replaceChildren(empty);
      jump.hidden = true;
      return;
    }
    const tools = new Map();
    for (const m of messages) if (m.kind === "tool_call" && m.metadata?.tool_call_id) tools.set(m.metadata.tool_call_id, m);
    const seen = new Set();
    if (empty.parentNode) empty.remove();
    // Walk the wanted order with a cursor over the current children: a row already in place
    // advances the cursor, any other row is moved (or inserted) before it.
    let cursor = list.firstChild;
    for (const message of messages) {
      const id = String(message.id);
      seen.add(id);
      let row = rows.get(id);
      const tool = message.kind === "permission" ? tools.get(message.metadata?.tool_call_id) : undefined;
      if (!row || row.message !== message || row.tool !== tool || (message.kind === "permission" && row.offline !== offline)) {
        const signature = JSON.stringify([message, tool ?? null, message.kind === "permission" ? offline : null]);
        if (row && row.signature === signature) {
          row.message = message;
        } else if (row && row.view && isMarkdown(message) && row.kind === "text" && row.thought === (message.metadata?.channel === "thought")) {
          // Streamed agent text: feed the live view, keep the row.
          row.view.set(message.content);
          row.message = message;
          row.signature = signature;
        } else {
          const drawn = renderRow(message, { tool, onPermission, offline, renderTurnChanges, renderReceipt });
          if (row) {
            // A tool card the reader opened stays open through its status updates.
            const wasOpen = row.node.querySelector("details.tool-card")?.open; // a trace too
            if (wasOpen) drawn.node.querySelector("details.tool-card")?.setAttribute("open", "");
            if (cursor === row.node) cursor = drawn.node;
            row.node.replaceWith(drawn.node);
          }
          row = { message, signature, node: drawn.node, view: drawn.view, kind: message.kind ?? "text", thought: message.metadata?.channel === "thought" };
          rows.set(id, row);
        }
        row.tool = tool;
        row.offline = offline;
      }
      if (row.node === cursor) cursor = cursor.nextSibling;
      else list.insertBefore(row.node, cursor);
    }
    for (const [id, row] of rows) {
      if (!seen.has(id)) {
        row.node.remove();
        rows.delete(id);
      }
    }
    if (stick) {
      scrollToEnd();
      // A Markdown view draws its open block on the next frame: follow it there too.
      requestAnimationFrame(() => {
        if (pinned) {
          list.scrollTop = list.scrollHeight;
          lastTop = list.scrollTop;
        }
      });
    } else {
      jump.hidden = nearBottom();
    }
  }

  return { el: wrap, list, update, scrollToEnd };
}
