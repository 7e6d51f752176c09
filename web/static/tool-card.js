// Tool-call cards, plans and permission cards of the transcript.
//
// A tool call's message metadata holds its id, status and kind, plus the fields of the agent's
// own payload the backend keeps (supervisor/turn/tool_details.py): ACP rawInput / rawOutput / content
// (text and `diff` items) / locations, or a Codex item's command / aggregatedOutput / exitCode /
// changes / MCP arguments and result. toolView() reads them into what the card shows (pure,
// tested under node); renderToolCard() draws it.

import { diffStats, lineDiff, unifiedLines, withContext } from "./diff.js";
import { fullTime, h } from "./dom.js";
import { formatDuration } from "./status.js";

export const TOOL_STATUS_TEXT = {
  pending: "Pending",
  in_progress: "Running",
  inProgress: "Running",
  completed: "Done",
  failed: "Failed",
  cancelled: "Cancelled",
};

const KIND_TEXT = {
  read: "Read",
  edit: "Edit",
  delete: "Delete",
  move: "Move",
  search: "Search",
  execute: "Command",
  think: "Think",
  fetch: "Fetch",
  switch_mode: "Mode",
  other: "Tool",
};

function asText(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) return value.join(" ");
  return JSON.stringify(value, null, 2);
}

/** Text of ACP content items of type "content" ({type:"text", text}). */
function contentText(items) {
  const parts = [];
  for (const item of Array.isArray(items) ? items : []) {
    if (item?.type === "content" && item.content?.type === "text" && typeof item.content.text === "string") {
      parts.push(item.content.text);
    }
  }
  return parts.join("\n");
}

/**
 * {title, kind, kindText, status, statusText, durationMs, input, output, diffs, locations}.
 * diffs: [{path, lines: [{op, text}], added, removed}].
 */
export function toolView(message) {
  const meta = message?.metadata ?? {};
  const status = String(meta.status ?? "pending");
  const kind = String(meta.kind ?? "other");
  let durationMs = typeof meta.durationMs === "number" ? meta.durationMs : null;
  if (durationMs === null && meta.finished_at && message?.created_at) {
    const d = Date.parse(meta.finished_at) - Date.parse(message.created_at);
    if (Number.isFinite(d) && d >= 0) durationMs = d;
  }

  let input = "";
  if (meta.command !== undefined) input = asText(meta.command);
  else if (meta.rawInput !== undefined) {
    const raw = meta.rawInput;
    input = raw && typeof raw === "object" && typeof raw.command === "string" && Object.keys(raw).length <= 2 ? raw.command : asText(raw);
  } else if (meta.arguments !== undefined) input = asText(meta.arguments);
  else if (meta.query !== undefined) input = asText(meta.query);
  if (meta.cwd && meta.command !== undefined) input = `${input}\n(in ${meta.cwd})`;

  const outputs = [];
  if (meta.aggregatedOutput) outputs.push(asText(meta.aggregatedOutput));
  const fromContent = contentText(meta.content);
  if (fromContent) outputs.push(fromContent);
  if (meta.rawOutput !== undefined && !fromContent) outputs.push(asText(meta.rawOutput));
  if (meta.result !== undefined) outputs.push(asText(meta.result));
  if (meta.error) outputs.push(asText(meta.error));
  if (typeof meta.exitCode === "number" && meta.exitCode !== 0) outputs.push(`(exit code ${meta.exitCode})`);

  const diffs = [];
  for (const item of Array.isArray(meta.content) ? meta.content : []) {
    if (item?.type === "diff" && typeof item.path === "string") {
      const lines = withContext(lineDiff(item.oldText ?? "", item.newText ?? ""));
      diffs.push({ path: item.path, lines, ...diffStats(lines), created: item.oldText === null || item.oldText === undefined });
    }
  }
  for (const change of Array.isArray(meta.changes) ? meta.changes : []) {
    if (change && typeof change.path === "string") {
      const lines = typeof change.diff === "string" ? unifiedLines(change.diff) : [];
      diffs.push({ path: change.path, lines, ...diffStats(lines), created: change.kind?.type === "add" || change.kind === "add" });
    }
  }

  const locations = (Array.isArray(meta.locations) ? meta.locations : [])
    .filter((l) => l && typeof l.path === "string")
    .map((l) => (typeof l.line === "number" ? `${l.path}:${l.line}` : l.path));

  let title = message?.content || "";
  if ((!title || title === "fileChange") && diffs.length) title = `Edit ${diffs.map((d) => d.path).join(", ")}`;
  return {
    title: title || "Tool call",
    kind,
    kindText: KIND_TEXT[kind] ?? kind,
    status,
    statusText: TOOL_STATUS_TEXT[status] ?? status,
    durationMs,
    input,
    output: outputs.join("\n"),
    diffs,
    locations,
  };
}

function diffBlock(diff) {
  return h(
    "div",
    { class: "diff", dataset: { testid: "tool-diff", path: diff.path } },
    h(
      "div",
      { class: "diff-head" },
      h("span", { class: "diff-path" }, diff.path),
      h("span", { class: "diff-stat" }, diff.created ? "new file " : "", h("span", { class: "diff-add" }, `+${diff.added}`), " ", h("span", { class: "diff-del" }, `−${diff.removed}`)),
    ),
    h(
      "pre",
      { class: "diff-body" },
      diff.lines.map((l) => {
        const cls = { "+": "add", "-": "del", "@": "hunk", h: "hdr", "…": "gap" }[l.op] ?? "ctx";
        const mark = l.op === "+" || l.op === "-" ? l.op : " ";
        return h("span", { class: `diff-line diff-line--${cls}` }, l.op === "@" || l.op === "h" || l.op === "…" ? l.text : `${mark} ${l.text}`);
      }),
    ),
  );
}

function section(label, testid, body) {
  return h("div", { class: "tool-section", dataset: { testid } }, h("p", { class: "tool-section-label" }, label), body);
}

/** The details of a tool call (input, output, diffs, locations) as nodes; [] when none. */
export function toolDetailNodes(view) {
  const nodes = [];
  if (view.input) nodes.push(section("Input", "tool-input", h("pre", { class: "tool-pre" }, view.input)));
  for (const d of view.diffs) nodes.push(diffBlock(d));
  if (view.locations.length) nodes.push(section("Files", "tool-locations", h("ul", { class: "tool-locations" }, view.locations.map((l) => h("li", {}, l)))));
  if (view.output) nodes.push(section("Output", "tool-output", h("pre", { class: "tool-pre" }, view.output)));
  return nodes;
}

/** A tool-call card: <details> so it expands by click, tap or keyboard with no script. */
export function renderToolCard(message) {
  const view = toolView(message);
  const details = toolDetailNodes(view);
  const duration = formatDuration(view.durationMs);
  const card = h(
    "details",
    { class: `tool-card tool-card--${view.status}`, dataset: { testid: "tool-call-card", status: view.status, kind: view.kind } },
    h(
      "summary",
      { class: "tool-summary" },
      h(
        "span",
        { class: "tool-call", dataset: { testid: "tool-call", status: view.status } },
        h("span", { class: "tool-kind" }, view.kindText),
        h("span", { class: "tool-title" }, view.title),
        h("span", { class: `chip chip--${view.status}`, dataset: { testid: "tool-status" } }, view.statusText),
        duration ? h("span", { class: "tool-duration", dataset: { testid: "tool-duration" } }, duration) : null,
      ),
    ),
    details.length ? h("div", { class: "tool-body" }, details) : h("div", { class: "tool-body tool-body--empty" }, "The agent sent no input or output for this call."),
  );
  if (message.created_at) card.title = `Started ${fullTime(message.created_at)}`;
  return card;
}

const PLAN_MARK = { completed: "☑", in_progress: "◐", pending: "☐" };

/** A plan as a checklist (ACP plan entries; Codex plan steps mapped the same way). */
export function renderPlan(message) {
  const entries = Array.isArray(message.metadata?.entries) ? message.metadata.entries : [];
  const done = entries.filter((e) => e.status === "completed").length;
  return h(
    "div",
    { class: "plan", dataset: { testid: "plan" } },
    h("p", { class: "plan-kicker" }, `Plan · ${done}/${entries.length} done`),
    entries.length
      ? h(
          "ul",
          { class: "plan-list" },
          entries.map((e) => {
            const status = ["completed", "in_progress"].includes(e.status) ? e.status : "pending";
            return h(
              "li",
              { class: `plan-entry plan-entry--${status}`, dataset: { testid: "plan-entry", status } },
              h("span", { class: "plan-mark", "aria-hidden": "true" }, PLAN_MARK[status]),
              h("span", { class: "visually-hidden" }, { completed: "Done: ", in_progress: "In progress: ", pending: "To do: " }[status]),
              h("span", {}, String(e.content ?? "")),
            );
          }),
        )
      : h("p", {}, message.content),
  );
}

/** "Allowed" / "Rejected" / "Cancelled with the turn" / null while open. */
export function permissionOutcome(meta) {
  const status = meta?.status ?? "pending";
  // The agent took its question back and went on: no cancel of the turn (issue 29).
  if (status === "cancelled" && meta.withdrawn) return "Withdrawn by the agent";
  if (status === "cancelled") return "Cancelled with the turn";
  if (status !== "selected") return null;
  const options = Array.isArray(meta.options) ? meta.options : [];
  const chosen = options.find((o) => o.option_id === meta.option_id);
  const kind = String(chosen?.kind ?? "");
  if (kind === "allow_always") return "Allowed for this session";
  if (kind.startsWith("allow")) return "Allowed";
  if (kind.startsWith("reject")) return "Rejected";
  return `Answered: ${chosen?.name ?? meta.option_id ?? "an option"}`;
}

function optionClass(kind) {
  if (String(kind).startsWith("allow")) return "btn btn-allow";
  if (String(kind).startsWith("reject")) return "btn btn-reject";
  return "btn";
}

/**
 * The permission card: what is asked (the title; the linked tool call's input and diff when the
 * agent announced it), the options while open, the outcome once settled.
 * `tool` is the tool-call message with the same tool_call_id, if any; `offline` disables answers.
 */
export function renderPermission(message, { tool, onPermission, offline }) {
  const meta = message.metadata ?? {};
  const status = meta.status ?? "pending";
  const options = Array.isArray(meta.options) ? meta.options : [];
  const open = status === "pending";
  const outcome = permissionOutcome(meta);
  const details = tool ? toolDetailNodes(toolView(tool)).filter((n) => n.dataset.testid !== "tool-output") : [];
  const tone = outcome === "Rejected" ? "rejected" : outcome?.startsWith("Allowed") ? "allowed" : status;
  return h(
    "div",
    {
      class: `permission-card permission-card--${status} permission-card--${tone}`,
      dataset: { testid: "permission-card", status, outcome: outcome ?? "", requestId: meta.request_id ?? "" },
    },
    h("p", { class: "permission-kicker" }, open ? "Permission requested" : "Permission"),
    h("p", { class: "permission-title" }, message.content || "The agent asks for permission"),
    details.length ? h("div", { class: "permission-details" }, details) : null,
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
                disabled: offline,
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
      : h("p", { class: "permission-outcome", dataset: { testid: "permission-outcome" } }, outcome ?? status),
  );
}
