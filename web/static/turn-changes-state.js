// What each turn changed on disk (DESIGN.md §12): session.turn.changes frames, and after a reload
// the files turn.diff lists for the turns shown. Pure functions (tests/ui_unit/changes.test.mjs);
// the task page keeps one `known` map {sessionId: {turnId: {files, skipped}}}.

/** At most this many of a session's latest ended turns are asked for their files on a reload. */
export const PROBE_TURNS = 10;

/** Folds a session.turn.changes payload (or a turn.diff answer) into `known`. */
export function applyTurnChanges(known, payload) {
  const sid = payload?.session_id;
  const tid = payload?.turn_id;
  if (!sid || !tid || !Array.isArray(payload.files)) return known;
  const entry = { files: payload.files, skipped: Array.isArray(payload.skipped) ? payload.skipped : [] };
  return { ...known, [sid]: { ...(known[sid] ?? {}), [tid]: entry } };
}

/** Marks a turn as asked (no checkpoint, or nothing changed): `null`, so it is not asked again. */
export function markProbed(known, sid, tid) {
  if (known[sid] && tid in known[sid]) return known;
  return { ...known, [sid]: { ...(known[sid] ?? {}), [tid]: null } };
}

/** Turn ids in the order the conversation shows them (first message of each). */
export function turnOrder(messages) {
  const order = [];
  const seen = new Set();
  for (const m of messages ?? []) {
    if (m.turn_id && !seen.has(m.turn_id)) {
      seen.add(m.turn_id);
      order.push(m.turn_id);
    }
  }
  return order;
}

/** The latest ended turns of a conversation whose changes are not known yet (for turn.diff). */
export function turnsToProbe(messages, knownForSession, currentTurnId) {
  const known = knownForSession ?? {};
  return turnOrder(messages)
    .filter((t) => t !== currentTurnId)
    .slice(-PROBE_TURNS)
    .filter((t) => !(t in known));
}

/** Turns after `turnId` (in the conversation's order) that changed files: a revert undoes them too. */
export function laterChangedTurns(messages, knownForSession, turnId) {
  const order = turnOrder(messages);
  const at = order.indexOf(turnId);
  if (at < 0) return [];
  return order.slice(at + 1).filter((t) => knownForSession?.[t]?.files?.length);
}

/** Paths in natural order: edit-2 before edit-10 (numbers compared as numbers). */
const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
export function naturalOrder(a, b) {
  return collator.compare(String(a), String(b)) || (String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0);
}

/** A file list in natural order of its paths (a copy). */
export function sortFiles(files) {
  return [...(files ?? [])].sort((x, y) => naturalOrder(x.path, y.path));
}

const cards = new WeakMap(); // entry -> its card message: the same entry keeps the same object

function cardFor(sid, tid, entry) {
  let card = cards.get(entry);
  if (!card) {
    card = { id: `turn-changes-${tid}`, session_id: sid, turn_id: tid, role: "system", kind: "turn_changes", content: "", metadata: entry };
    cards.set(entry, card);
  }
  return card;
}

const undoCards = new Map(); // "revert_id:undone" -> its card: unchanged, the same object

/** The ids of the reverts a later revert undid (its status says `undo_of`), from the transcript. */
export function undoneReverts(messages) {
  const undone = new Set();
  for (const m of messages ?? []) if (m.kind === "status" && m.metadata?.reverted && m.metadata.undo_of) undone.add(m.metadata.undo_of);
  return undone;
}

function undoCardFor(sid, status, undone) {
  const revertId = status.metadata.revert_id;
  const key = `${revertId}:${undone}`;
  let card = undoCards.get(key);
  if (!card) {
    card = { id: `revert-undo-${revertId}`, session_id: sid, turn_id: null, role: "system", kind: "turn_changes", content: "", metadata: { undo: { revert_id: revertId, undone, kept: status.metadata.kept_edits ?? [] } } };
    undoCards.set(key, card);
  }
  return card;
}

/**
 * The conversation with one `turn_changes` card after the last message of each turn that changed
 * files (a turn with no message shown gets its card at the end), and after each revert's status
 * message its undo (`metadata.undo`: derived from the transcript, so a reload keeps it). Cards are
 * stable objects, so the message list redraws none that did not change.
 */
export function withChangeCards(messages, sid, knownForSession) {
  if (!Array.isArray(messages)) return messages;
  const known = knownForSession ?? {};
  const undone = undoneReverts(messages);
  const last = new Map();
  messages.forEach((m, i) => {
    if (m.turn_id) last.set(m.turn_id, i);
  });
  const out = [];
  messages.forEach((m, i) => {
    out.push(m);
    if (m.turn_id && last.get(m.turn_id) === i) {
      const entry = known[m.turn_id];
      if (entry?.files?.length) out.push(cardFor(sid, m.turn_id, entry));
    }
    if (m.kind === "status" && m.metadata?.reverted && m.metadata.revert_id) out.push(undoCardFor(sid, m, undone.has(m.metadata.revert_id)));
  });
  for (const [tid, entry] of Object.entries(known)) {
    if (!last.has(tid) && entry?.files?.length) out.push(cardFor(sid, tid, entry));
  }
  return out;
}

/** "+3 −1" totals of a file list. */
export function totals(files) {
  let additions = 0;
  let deletions = 0;
  for (const f of files ?? []) {
    additions += f.additions ?? 0;
    deletions += f.deletions ?? 0;
  }
  return { additions, deletions };
}

/** The parent of an absolute path inside one of `roots`, or null at (or outside) a root. */
export function parentWithin(path, roots) {
  const clean = String(path ?? "").replace(/\/+$/, "") || "/";
  if ((roots ?? []).some((r) => r.replace(/\/+$/, "") === clean)) return null;
  const cut = clean.lastIndexOf("/");
  if (cut < 0) return null;
  const parent = cut === 0 ? "/" : clean.slice(0, cut);
  const inside = (roots ?? []).some((r) => {
    const root = r.replace(/\/+$/, "") || "/";
    return parent === root || parent.startsWith(root === "/" ? "/" : `${root}/`);
  });
  return inside ? parent : null;
}

/** A child directory's absolute path. */
export function childPath(path, name) {
  return `${String(path).replace(/\/+$/, "")}/${name}`;
}

/** Marks turns whose files a revert put back: their cards say so and offer no second revert. */
export function markReverted(known, sid, turnIds) {
  const held = known[sid];
  if (!held) return known;
  const next = { ...held };
  for (const t of turnIds) if (next[t]) next[t] = { ...next[t], reverted: true };
  return { ...known, [sid]: next };
}

/**
 * Where a session's agent works: its worktree (and branch), its cwd, or the task's project; else
 * its own default work folder, named for the task (`under`: its path below the server's
 * DATA_DIR/work, which work-dir.js learns from project.list).
 */
export function workplace(session, task) {
  if (session?.worktree) return { path: session.worktree.path, branch: session.worktree.branch };
  if (session?.cwd) return { path: session.cwd, branch: null };
  if (task?.project_dir) return { path: task.project_dir, branch: null };
  if (!session) return null;
  const under = task?.workspace_id && session.id ? `${task.workspace_id}/${session.id}` : null;
  return { path: null, under, branch: null, label: `Default work folder · ${task?.title || "this task"}` };
}
