// The page's one WebSocket to `/ws` (DESIGN.md §4): request/response matching by id, a bounded
// wait per request, reconnection with exponential backoff, and a connection "epoch" counter that
// state.js uses to compare cancellation revisions only within one backend incarnation.
//
// The socket class, timers and randomness are injectable so tests/ui_unit/ can drive it without a
// browser or a server.

export const DEFAULT_REQUEST_TIMEOUT_MS = 15_000;
export const BACKOFF_INITIAL_MS = 250;
export const BACKOFF_MAX_MS = 8_000;

/**
 * Delay before reconnect attempt `attempt` (0-based): doubling from BACKOFF_INITIAL_MS up to
 * BACKOFF_MAX_MS, with "equal jitter" (half fixed, half random) so many tabs reconnecting after a
 * server restart do not arrive in lockstep.
 */
export function backoffDelay(attempt, random = Math.random) {
  const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_INITIAL_MS * 2 ** Math.max(0, attempt));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/** An error answer, a timeout or a lost connection; `code` is the envelope's code or a local one. */
export class RequestError extends Error {
  constructor(code, message) {
    super(message);
    this.name = "RequestError";
    this.code = code;
  }
}

/** `ws://host/ws` or `wss://host/ws` for the page's own origin (the token goes in `protocols`). */
export function socketUrl(location) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/ws`;
}

let idCounter = 0;
const idPrefix = Math.random().toString(36).slice(2, 10);

/** A request id unique in this page (crypto.randomUUID needs a secure context; this does not). */
export function newRequestId() {
  idCounter += 1;
  return `c-${idPrefix}-${idCounter}`;
}

export function envelope(id, action, payload, now = new Date()) {
  return { id, type: "request", action, payload: payload ?? {}, timestamp: now.toISOString() };
}

const OPEN = 1;

export class Connection {
  /**
   * onNotification(action, payload, epoch); onOpen(epoch) after every (re)connect, where the
   * page resubscribes; onStatus("connecting" | "open" | "reconnecting", info) where info is
   * {retryAt} (a Date.now() time) while a reconnect is scheduled, else {}.
   */
  constructor({
    url,
    protocols = [],
    onNotification = () => {},
    onOpen = () => {},
    onStatus = () => {},
    WebSocketImpl = globalThis.WebSocket,
    setTimer = (fn, ms) => setTimeout(fn, ms),
    clearTimer = (handle) => clearTimeout(handle),
    random = Math.random,
  }) {
    this.url = url;
    this.protocols = protocols; // credential.js socketProtocols(): the token rides the handshake
    this.onNotification = onNotification;
    this.onOpen = onOpen;
    this.onStatus = onStatus;
    this.WebSocketImpl = WebSocketImpl;
    this.setTimer = setTimer;
    this.clearTimer = clearTimer;
    this.random = random;
    this.socket = null;
    this.epoch = 0; // 0 = nothing from the socket yet (the boot state's epoch)
    this.attempt = 0;
    this.reconnectTimer = null;
    this.stopped = false;
    this.pending = new Map(); // id -> {action, resolve, reject, timer, sent}
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  /** Closes for good (page unload); pending requests fail. */
  stop() {
    this.stopped = true;
    if (this.reconnectTimer !== null) this.clearTimer(this.reconnectTimer);
    this.reconnectTimer = null;
    const socket = this.socket;
    this.socket = null;
    if (socket) {
      try {
        socket.close();
      } catch {
        // already closing; nothing to release
      }
    }
    this.failPending(() => true, "DISCONNECTED", "Connection closed");
  }

  get isOpen() {
    return this.socket !== null && this.socket.readyState === OPEN;
  }

  connect() {
    // "connecting" only for the very first try; once a try failed or a socket was lost the page
    // is offline until a socket opens again.
    this.onStatus(this.epoch === 0 && this.attempt === 0 ? "connecting" : "reconnecting", {});
    let socket;
    try {
      socket = this.protocols.length ? new this.WebSocketImpl(this.url, this.protocols) : new this.WebSocketImpl(this.url);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.socket = socket;
    socket.onopen = () => {
      if (this.socket !== socket) return;
      this.attempt = 0;
      this.epoch += 1;
      this.onStatus("open", {});
      this.onOpen(this.epoch);
      this.flushQueued();
    };
    socket.onmessage = (event) => {
      if (this.socket === socket) this.receive(event.data);
    };
    socket.onclose = () => {
      if (this.socket !== socket) return;
      this.socket = null;
      // A sent request's fate is unknown once its connection is gone: fail it, so an optimistic
      // cancel flag clears and the resubscribe snapshot tells what the backend really did.
      this.failPending((p) => p.sent, "DISCONNECTED", "Connection lost");
      if (!this.stopped) this.scheduleReconnect();
    };
    socket.onerror = () => {
      // onclose follows every error; reconnecting happens there.
    };
  }

  scheduleReconnect() {
    if (this.stopped || this.reconnectTimer !== null) return;
    const delay = backoffDelay(this.attempt, this.random);
    this.onStatus("reconnecting", { retryAt: Date.now() + delay });
    this.attempt += 1;
    this.reconnectTimer = this.setTimer(() => {
      this.reconnectTimer = null;
      if (!this.stopped) this.connect();
    }, delay);
  }

  /** Skips the rest of the backoff wait (the offline banner's "Retry now"). */
  retryNow() {
    if (this.stopped || this.reconnectTimer === null) return;
    this.clearTimer(this.reconnectTimer);
    this.reconnectTimer = null;
    this.connect();
  }

  /**
   * Sends a request and resolves with the response payload, or rejects with RequestError on an
   * error envelope, a lost connection, or `timeoutMs`. While the socket is down the request waits
   * (within the same bound) and goes out on the next open. `holdWhile`, asked when the bound
   * passes, keeps waiting another `timeoutMs` while it says true: a request the backend is known
   * to be working on (a stop it holds) keeps its answer, success or error, instead of being
   * dropped unanswered.
   */
  request(action, payload, { id = newRequestId(), timeoutMs = DEFAULT_REQUEST_TIMEOUT_MS, holdWhile = null } = {}) {
    return new Promise((resolve, reject) => {
      const entry = { action, payload, resolve, reject, timer: null, sent: false };
      const expire = () => {
        if (this.pending.get(id) !== entry) return;
        if (holdWhile?.()) {
          entry.timer = this.setTimer(expire, timeoutMs);
          return;
        }
        this.pending.delete(id);
        const seconds = Math.round(timeoutMs / 1000);
        reject(new RequestError("TIMEOUT", `No answer within ${seconds} s`));
      };
      entry.timer = this.setTimer(expire, timeoutMs);
      this.pending.set(id, entry);
      if (this.isOpen) this.send(id, entry);
    });
  }

  send(id, entry) {
    try {
      this.socket.send(JSON.stringify(envelope(id, entry.action, entry.payload)));
      entry.sent = true;
    } catch {
      // The socket is closing; onclose will retry on the next connection.
    }
  }

  flushQueued() {
    for (const [id, entry] of this.pending) {
      if (!entry.sent && this.isOpen) this.send(id, entry);
    }
  }

  failPending(which, code, message) {
    for (const [id, entry] of [...this.pending]) {
      if (!which(entry)) continue;
      this.pending.delete(id);
      this.clearTimer(entry.timer);
      entry.reject(new RequestError(code, message));
    }
  }

  receive(data) {
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      return; // not ours to fix; the server never sends this
    }
    if (!frame || typeof frame !== "object") return;
    if (frame.type === "notification") {
      this.onNotification(frame.action, frame.payload ?? {}, this.epoch);
      return;
    }
    if (frame.type !== "response" && frame.type !== "error") return;
    const entry = this.pending.get(frame.id);
    if (!entry) return; // a late answer to a request that already timed out
    this.pending.delete(frame.id);
    this.clearTimer(entry.timer);
    if (frame.type === "response") {
      entry.resolve(frame.payload ?? {});
    } else {
      const p = frame.payload ?? {};
      entry.reject(new RequestError(p.code ?? "INTERNAL_ERROR", p.message ?? "Request failed"));
    }
  }
}
