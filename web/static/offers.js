// What the session's agent offers beyond a turn (DESIGN.md §19), as the page holds and words it:
// its options (model, mode, effort, ...), its slash commands and its context usage, folded into
// the session's row from the session.*.changed notifications; and the words of the usage badge,
// the command menu and the agent picker's cancel figures (DESIGN.md §18). Pure: no DOM here.

/** The categories shown in the composer's row; the others wait behind "More". */
export const PRIMARY_CATEGORIES = ["mode", "model", "reasoning_effort"];

/**
 * Folds session.options.changed / session.commands.changed / session.usage.changed into the
 * session's row (only a row the page already holds: no partial rows). Other actions: `state`.
 */
export function applyOffersNotification(state, action, payload) {
  const p = payload && typeof payload === "object" ? payload : {};
  const field = { "session.options.changed": "options", "session.commands.changed": "commands", "session.usage.changed": "usage" }[action];
  const row = field && typeof p.session_id === "string" ? state.sessions?.[p.session_id] : undefined;
  if (!row) return state;
  const value = field === "usage" ? (p.usage && typeof p.usage === "object" ? p.usage : null) : Array.isArray(p[field]) ? p[field] : [];
  return { ...state, sessions: { ...state.sessions, [row.id]: { ...row, [field]: value } } };
}

/** The options a row offers, as {shown, more}: the composer's row, and those behind "More". */
export function splitOptions(options) {
  const list = (Array.isArray(options) ? options : []).filter((o) => o && typeof o.id === "string" && Array.isArray(o.choices));
  const shown = list.filter((o) => PRIMARY_CATEGORIES.includes(o.category));
  // An agent whose options are all of other kinds still gets them in the row.
  if (shown.length === 0) return { shown: list, more: [] };
  return { shown, more: list.filter((o) => !shown.includes(o)) };
}

/** The label a phone has room for (the select keeps the agent's full name as its accessible name). */
export function shortOptionName(option) {
  const name = String(option?.name || option?.id || "");
  const short = { reasoning_effort: "Effort", approval_policy: "Approvals" }[option?.category];
  return short && name.length > short.length ? short : name;
}

/** What a `session.option.set` answer says to the person ("now": nothing, the select shows it). */
export function appliedHint(names) {
  return names.length ? `${names.join(", ")}: from the next turn` : null;
}

// --- Usage -------------------------------------------------------------------------------------

function isCount(n) {
  return typeof n === "number" && Number.isFinite(n) && n >= 0;
}

/** 950, 1.2k, 12.3k, 123k, 1.2M: a token count the way a badge has room for. */
export function compactCount(n) {
  if (n < 1000) return String(Math.round(n));
  const [value, unit] = n < 1e6 ? [n / 1000, "k"] : [n / 1e6, "M"];
  const shown = value < 100 ? value.toFixed(1).replace(/\.0$/, "") : String(Math.round(value));
  return `${shown}${unit}`;
}

/** $0.01, <$0.01, 1.20 EUR. */
export function costText(cost) {
  if (!cost || typeof cost.amount !== "number" || !Number.isFinite(cost.amount)) return null;
  const currency = typeof cost.currency === "string" ? cost.currency.toUpperCase() : "";
  const small = cost.amount > 0 && cost.amount < 0.005;
  const amount = small ? "0.01" : cost.amount.toFixed(2);
  if (currency === "USD" || currency === "") return `${small ? "<" : ""}$${amount}`;
  return `${small ? "<" : ""}${amount} ${currency}`;
}

/**
 * The usage badge: {text, title} ("Context 42% · 12.3k tokens · $0.01"; the title has the exact
 * figures), or null when there is nothing to say (no usage yet, or every figure unknown).
 */
export function usageText(usage) {
  if (!usage || typeof usage !== "object") return null;
  const parts = [];
  const details = [];
  const used = isCount(usage.context_used) ? usage.context_used : null;
  const size = isCount(usage.context_size) && usage.context_size > 0 ? usage.context_size : null;
  if (used !== null && size !== null) {
    const pct = (used / size) * 100;
    parts.push(`Context ${pct > 0 && pct < 1 ? "<1" : Math.round(pct)}%`);
    details.push(`Context: ${used.toLocaleString("en-US")} of ${size.toLocaleString("en-US")} tokens`);
  } else if (used !== null) {
    parts.push(`Context ${compactCount(used)} tokens`);
    details.push(`Context: ${used.toLocaleString("en-US")} tokens`);
  }
  const input = isCount(usage.input_tokens) ? usage.input_tokens : null;
  const output = isCount(usage.output_tokens) ? usage.output_tokens : null;
  if (input !== null || output !== null) {
    parts.push(`${compactCount((input ?? 0) + (output ?? 0))} tokens`);
    details.push(`Tokens: ${input ?? "?"} in, ${output ?? "?"} out`);
  }
  const cost = costText(usage.cost);
  if (cost) {
    parts.push(cost);
    details.push(`Cost: ${usage.cost.amount} ${usage.cost.currency ?? ""}`.trim());
  }
  if (!parts.length) return null;
  return { text: parts.join(" · "), title: details.join(" · ") };
}

// --- Slash commands ----------------------------------------------------------------------------

/** A command's name without its slash (agents send either). */
export function commandName(command) {
  return String(command?.name ?? "").replace(/^\//, "");
}

/** What is typed after the slash while the text is a command name being typed, else null. */
export function commandQuery(text) {
  const m = /^\/(\S*)$/.exec(String(text ?? ""));
  return m ? m[1].toLowerCase() : null;
}

/**
 * The commands the typed text may complete to: those whose name starts with what was typed,
 * then those that contain it, each group in the agent's order. Null when the text is not a
 * command being typed (no menu).
 */
export function filterCommands(commands, text) {
  const query = commandQuery(text);
  if (query === null) return null;
  const list = (Array.isArray(commands) ? commands : []).filter((c) => commandName(c));
  const starts = list.filter((c) => commandName(c).toLowerCase().startsWith(query));
  const contains = list.filter((c) => !starts.includes(c) && commandName(c).toLowerCase().includes(query));
  return [...starts, ...contains];
}

/** Whether Enter sends ``text`` as it is although the menu is open: the whole name of a
 * command is typed already (picking would only add a space), as a person who knows the
 * command types it. */
export function typedWhole(commands, text) {
  const query = commandQuery(text);
  return query !== null && query !== "" && (Array.isArray(commands) ? commands : [])
    .some((c) => commandName(c).toLowerCase() === query.toLowerCase());
}

/** The text a picked command leaves in the input: its name and a space for its input. */
export function pickedText(command) {
  return `/${commandName(command)} `;
}

/** The input hint to show after "/name " while nothing more is typed, else null. */
export function commandHint(commands, text) {
  const m = /^\/(\S+) $/.exec(String(text ?? ""));
  if (!m) return null;
  const found = (Array.isArray(commands) ? commands : []).find((c) => commandName(c) === m[1]);
  return typeof found?.input_hint === "string" && found.input_hint ? found.input_hint : null;
}

// --- The agent picker's cancel figures (DESIGN.md §18) -------------------------------------

function ms(value) {
  return value < 1000 ? `${Math.round(value)} ms` : `${(value / 1000).toFixed(1)} s`;
}

/** "Stops in ~40 ms (p50 of 12)", with what went wrong when something did; null without cancels. */
export function cancelFiguresText(cancel) {
  const count = cancel?.count;
  if (!isCount(count) || count === 0) return null;
  const parts = [isCount(cancel.p50_ms) ? `Stops in ~${ms(cancel.p50_ms)} (p50 of ${count})` : `Stopped ${count} time${count === 1 ? "" : "s"}`];
  if (isCount(cancel.escalated) && cancel.escalated > 0) parts.push(`${cancel.escalated} had to be killed`);
  if (isCount(cancel.dropped_early) && cancel.dropped_early > 0) parts.push(`${cancel.dropped_early} ignored the first cancel`);
  return parts.join(" · ");
}

/** The picker option's tooltip: the figures in full (p95, the version measured). */
export function cancelFiguresTitle(cancel) {
  const text = cancelFiguresText(cancel);
  if (!text) return null;
  const extra = [];
  if (isCount(cancel.p95_ms)) extra.push(`p95 ${ms(cancel.p95_ms)}`);
  if (typeof cancel.version === "string" && cancel.version) extra.push(`version ${cancel.version}`);
  return extra.length ? `${text} (${extra.join(", ")})` : text;
}
