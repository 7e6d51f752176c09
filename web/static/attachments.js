// Images and files for the agent (DESIGN.md §19): the rules of the composer's attachments and
// `@` mentions, and the two requests a page makes for them outside the socket (the upload, and
// the file again for a thumbnail). Pure functions first, so tests/ui_unit can check them.

import { currentToken } from "./credential.js";

export const ATTACHMENTS_URL = "/api/v1/attachments";
const IMAGES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

export function isImage(mime) {
  return IMAGES.has(String(mime ?? "").toLowerCase());
}

/** "812 B", "4.2 KB", "1.3 MB". */
export function formatSize(bytes) {
  const n = Number(bytes);
  if (!Number.isFinite(n) || n < 0) return "";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10 * 1024 ? 1 : 0)} KB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MB`;
}

/**
 * The `@` being typed at the caret: {start, query} where `start` is the index of the `@` (at the
 * start of the text or after a space) and `query` what follows it up to the caret; else null.
 */
export function mentionQuery(text, caret) {
  const s = String(text ?? "");
  const end = Math.max(0, Math.min(caret ?? s.length, s.length));
  const at = s.lastIndexOf("@", end - 1);
  if (at < 0) return null;
  if (at > 0 && !/\s/.test(s[at - 1])) return null; // an e-mail address, not a mention
  const query = s.slice(at + 1, end);
  if (/\s/.test(query)) return null;
  return { start: at, query };
}

/** The text with the `@query` at `start` (up to `caret`) replaced by `@path `; the new caret. */
export function insertMention(text, start, caret, path) {
  const s = String(text ?? "");
  const before = s.slice(0, start);
  const after = s.slice(caret).replace(/^\S*/, ""); // the rest of a word typed in the middle
  const put = `@${path}${after.startsWith(" ") ? "" : " "}`;
  return { text: before + put + after, caret: before.length + put.length };
}

/** The recorded mentions still named in the text as `@path` (the person may have deleted one). */
export function mentionsIn(text, recorded) {
  const s = String(text ?? "");
  const kept = [];
  for (const path of recorded ?? []) {
    const at = s.indexOf(`@${path}`);
    const next = s[at + path.length + 1];
    if (at >= 0 && (next === undefined || /\s/.test(next) || /[.,;:!?)]/.test(next)) && !kept.includes(path)) kept.push(path);
  }
  return kept;
}

/**
 * What blocks a send while files are attached: an upload still running, or one refused (its
 * chip stays, with its line, until removed: nothing is sent without the person knowing).
 */
export function attachmentsBlock(chips) {
  if (chips.some((c) => c.state === "uploading")) return "Wait for the files to finish uploading.";
  const failed = chips.find((c) => c.state === "failed");
  if (failed) return `Remove ${failed.name}, which could not be attached, to send.`;
  return null;
}

/** The metadata a user message carries: {attachments: [{attachment_id, name, mime, size}], mentions: [path]}. */
export function messageParts(message) {
  const meta = message?.metadata ?? {};
  const attachments = Array.isArray(meta.attachments) ? meta.attachments.filter((a) => a && typeof a.attachment_id === "string") : [];
  const mentions = Array.isArray(meta.mentions) ? meta.mentions.filter((m) => typeof m === "string") : [];
  return { attachments, mentions };
}

/** `session.files`: the session's files whose path holds `query` ([] without a session). */
export async function sessionFiles(ws, sessionId, query) {
  if (!sessionId) return [];
  return (await ws.request("session.files", { session_id: sessionId, query })).files;
}

function authHeaders(extra = {}) {
  const token = currentToken();
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

/** POST the file: its DTO, or an Error with the server's one line. */
export async function uploadAttachment(file, fetchImpl = globalThis.fetch) {
  const mime = file.type || "application/octet-stream";
  let response;
  try {
    response = await fetchImpl(`${ATTACHMENTS_URL}?${new URLSearchParams({ name: file.name || "" })}`, {
      method: "POST",
      headers: authHeaders({ "Content-Type": mime }),
      body: file,
    });
  } catch {
    throw new Error("the server could not be reached");
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) throw new Error(body?.error?.message ?? `the upload failed (HTTP ${response.status})`);
  return body;
}

const thumbs = new Map(); // attachment id -> Promise<data URL | null>

function dataUrl(blob) {
  return new Promise((resolve) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => resolve(null);
    reader.readAsDataURL(blob);
  });
}

/** A local file as a data: URL (the page's policy allows data: images, not blob:). */
export function fileDataUrl(file) {
  return dataUrl(file);
}

/** An uploaded image as a data: URL, fetched once with the page's token; null if it cannot be. */
export function attachmentDataUrl(id) {
  if (!thumbs.has(id)) {
    const got = fetch(`${ATTACHMENTS_URL}/${encodeURIComponent(id)}`, { headers: authHeaders() })
      .then((r) => (r.ok ? r.blob() : null))
      .then((blob) => (blob ? dataUrl(blob) : null))
      .catch(() => null);
    got.then((url) => {
      if (!url) thumbs.delete(id); // tried again next time
    });
    thumbs.set(id, got);
  }
  return thumbs.get(id);
}
