// Line diffs for tool-call cards: ACP sends a file edit as {path, oldText, newText}; Codex sends a
// unified diff text per changed file. Pure functions (tests/ui_unit/diff.test.mjs).

/** Above this many line pairs the edit is shown as "all old lines out, all new lines in". */
export const MAX_DIFF_CELLS = 2_000_000;

function lines(text) {
  if (text === null || text === undefined || text === "") return [];
  const out = String(text).split("\n");
  if (out[out.length - 1] === "") out.pop(); // a final newline ends the last line, adds none
  return out;
}

/**
 * [{op: " " | "-" | "+", text}] turning oldText into newText, by longest common subsequence of
 * lines (common prefix and suffix trimmed first, so a small edit in a big file stays cheap).
 */
export function lineDiff(oldText, newText) {
  const a = lines(oldText);
  const b = lines(newText);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start += 1;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA -= 1;
    endB -= 1;
  }
  const head = a.slice(0, start).map((text) => ({ op: " ", text }));
  const tail = a.slice(endA).map((text) => ({ op: " ", text }));
  const x = a.slice(start, endA);
  const y = b.slice(start, endB);
  let middle;
  if (x.length * y.length > MAX_DIFF_CELLS) {
    middle = [...x.map((text) => ({ op: "-", text })), ...y.map((text) => ({ op: "+", text }))];
  } else {
    // lcs[i][j] = length of the LCS of x[i..] and y[j..]
    const lcs = Array.from({ length: x.length + 1 }, () => new Uint32Array(y.length + 1));
    for (let i = x.length - 1; i >= 0; i -= 1) {
      for (let j = y.length - 1; j >= 0; j -= 1) {
        lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
      }
    }
    middle = [];
    let i = 0;
    let j = 0;
    while (i < x.length && j < y.length) {
      if (x[i] === y[j]) {
        middle.push({ op: " ", text: x[i] });
        i += 1;
        j += 1;
      } else if (lcs[i + 1][j] >= lcs[i][j + 1]) {
        middle.push({ op: "-", text: x[i] });
        i += 1;
      } else {
        middle.push({ op: "+", text: y[j] });
        j += 1;
      }
    }
    while (i < x.length) middle.push({ op: "-", text: x[i++] });
    while (j < y.length) middle.push({ op: "+", text: y[j++] });
  }
  return [...head, ...middle, ...tail];
}

/** Keeps `context` unchanged lines around each change; longer unchanged runs become one gap. */
export function withContext(diff, context = 3) {
  const keep = new Array(diff.length).fill(false);
  diff.forEach((d, index) => {
    if (d.op === " ") return;
    for (let k = Math.max(0, index - context); k <= Math.min(diff.length - 1, index + context); k += 1) keep[k] = true;
  });
  const out = [];
  let skipped = 0;
  diff.forEach((d, index) => {
    if (keep[index]) {
      if (skipped) out.push({ op: "…", text: `${skipped} unchanged line${skipped === 1 ? "" : "s"}` });
      skipped = 0;
      out.push(d);
    } else {
      skipped += 1;
    }
  });
  if (skipped && out.length) out.push({ op: "…", text: `${skipped} unchanged line${skipped === 1 ? "" : "s"}` });
  return out;
}

/** A unified diff text (Codex fileChange) as [{op, text}]: "+", "-", " ", "@" (hunk), "h" (header). */
export function unifiedLines(text) {
  return lines(text).map((line) => {
    if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ") || line.startsWith("index ")) return { op: "h", text: line };
    if (line.startsWith("@@")) return { op: "@", text: line };
    if (line.startsWith("+")) return { op: "+", text: line.slice(1) };
    if (line.startsWith("-")) return { op: "-", text: line.slice(1) };
    return { op: " ", text: line.startsWith(" ") ? line.slice(1) : line };
  });
}

/** Counts of added and removed lines. */
export function diffStats(diff) {
  let added = 0;
  let removed = 0;
  for (const d of diff) {
    if (d.op === "+") added += 1;
    else if (d.op === "-") removed += 1;
  }
  return { added, removed };
}
