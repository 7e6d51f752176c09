// The chat transcript of the selected session. Rendering is keyed by message id: a streamed
// update rebuilds only its own row, so the rest of the list (and the reader's scroll position)
// stays put while an agent writes.

import { formatTime, h } from "./dom.js";

const TOOL_STATUS_TEXT = {
  pending: "Pending",
  in_progress: "Running",
  inProgress: "Running",
  completed: "Done",
  failed: "Failed",
  cancelled: "Cancelled",
};

function timeEl(message) {
  if (!message.created_at) return null;
  return h("time", { class: "msg-time", datetime: message.created_at, title: message.created_at }, formatTime(message.created_at));
}

function textBlock(content) {
  return h("div", { class: "msg-text" }, typeof content === "string" ? content : JSON.stringify(content, null, 2));
}

function renderToolCall(message) {
  const status = String(message.metadata?.status ?? "pending");
  return h(
    "div",
    { class: "tool-call", dataset: { testid: "tool-call", status } },
    h("span", { class: "tool-icon", "aria-hidden": "true" }, "⚙"),
    h("span", { class: "tool-title" }, message.content || "Tool call"),
    h("span", { class: `chip chip--${status}` }, TOOL_STATUS_TEXT[status] ?? status),
  );
}

function optionClass(kind) {
  if (String(kind).startsWith("allow")) return "btn btn-allow";
  if (String(kind).startsWith("reject")) return "btn btn-reject";
  return "btn";
}

function renderPermission(message, onPermission) {
  const meta = message.metadata ?? {};
  const status = meta.status ?? "pending";
  const options = Array.isArray(meta.options) ? meta.options : [];
  const open = status === "pending";
  const chosen = options.find((o) => o.option_id === meta.option_id);
  const outcome =
    status === "cancelled"
      ? "Cancelled with the turn"
      : status === "selected"
        ? `Answered: ${chosen?.name ?? meta.option_id ?? "selected"}`
        : null;
  return h(
    "div",
    { class: `permission-card permission-card--${status}`, dataset: { testid: "permission-card", status, requestId: meta.request_id ?? "" } },
    h("p", { class: "permission-kicker" }, "Permission requested"),
    h("p", { class: "permission-title" }, message.content || "The agent asks for permission"),
    open
      ? h(
          "div",
          { class: "permission-actions" },
          options.map((o) =>
            h(
              "button",
              {
                type: "button",
                class: optionClass(o.kind),
                dataset: { testid: "permission-option", optionId: o.option_id, optionKind: o.kind ?? "" },
                onclick: (event) => {
                  // One answer per card: disable the row at once, the update re-renders it.
                  for (const b of event.currentTarget.parentElement.querySelectorAll("button")) b.disabled = true;
                  onPermission(meta.request_id, o.option_id);
                },
              },
              o.name ?? o.option_id,
            ),
          ),
        )
      : h("p", { class: "permission-outcome" }, outcome ?? status),
  );
}

function renderStatus(message) {
  const variant = message.metadata?.variant ?? "info";
  return h(
    "div",
    { class: `status-message badge badge--${variant}`, dataset: { testid: "status-message", variant } },
    variant === "warning" ? h("span", { class: "badge-icon", "aria-hidden": "true" }, "⚠") : null,
    h("span", {}, message.content),
  );
}

function renderBody(message, onPermission) {
  switch (message.kind) {
    case "tool_call":
      return renderToolCall(message);
    case "permission":
      return renderPermission(message, onPermission);
    case "status":
      return renderStatus(message);
    case "plan":
      return h("div", { class: "plan" }, h("p", { class: "plan-kicker" }, "Plan"), textBlock(message.content));
    default:
      return h("div", { class: "bubble" }, textBlock(message.content), timeEl(message));
  }
}

function renderMessage(message, onPermission) {
  return h(
    "li",
    {
      class: `msg msg--${message.role ?? "agent"} msg--kind-${message.kind ?? "text"}`,
      dataset: { messageId: String(message.id), role: message.role ?? "", kind: message.kind ?? "" },
    },
    renderBody(message, onPermission),
  );
}

/** {el, update(messages | undefined)}: undefined means "still loading". */
export function createMessageList({ onPermission }) {
  const list = h("ol", { class: "message-list", dataset: { testid: "message-list" }, role: "log", "aria-label": "Conversation" });
  const empty = h("li", { class: "message-empty" });
  const rows = new Map(); // id -> {signature, node}

  function nearBottom() {
    return list.scrollHeight - list.scrollTop - list.clientHeight < 48;
  }

  function update(messages, emptyText) {
    const stick = nearBottom();
    if (!Array.isArray(messages) || messages.length === 0) {
      rows.clear();
      empty.textContent = Array.isArray(messages) ? emptyText : "Loading messages…";
      list.replaceChildren(empty);
      return;
    }
    const seen = new Set();
    if (empty.parentNode) empty.remove();
    // Walk the wanted order with a cursor over the current children: a row already in place
    // advances the cursor, any other row is moved (or inserted) before it.
    let cursor = list.firstChild;
    for (const message of messages) {
      const id = String(message.id);
      seen.add(id);
      const signature = JSON.stringify(message);
      let row = rows.get(id);
      if (!row || row.signature !== signature) {
        const node = renderMessage(message, onPermission);
        if (row) {
          if (cursor === row.node) cursor = node;
          row.node.replaceWith(node);
        }
        row = { signature, node };
        rows.set(id, row);
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
    if (stick) list.scrollTop = list.scrollHeight;
  }

  return { el: list, update, scrollToEnd: () => (list.scrollTop = list.scrollHeight) };
}
