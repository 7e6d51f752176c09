// Unit tests of the WebSocket client (web/static/ws.js) with a fake socket and a manual clock:
// request/response matching, the bounded wait, failure on a lost connection, backoff and epochs.

import assert from "node:assert/strict";
import { beforeEach, describe, it } from "node:test";

import { backoffDelay, BACKOFF_MAX_MS, Connection, envelope, RequestError, socketUrl } from "../../web/static/ws.js";

class FakeSocket {
  static instances = [];
  constructor(url) {
    this.url = url;
    this.readyState = 0;
    this.sent = [];
    FakeSocket.instances.push(this);
  }
  send(text) {
    this.sent.push(JSON.parse(text));
  }
  close() {
    this.readyState = 3;
  }
  // test helpers
  open() {
    this.readyState = 1;
    this.onopen?.();
  }
  drop() {
    this.readyState = 3;
    this.onclose?.();
  }
  reply(frame) {
    this.onmessage?.({ data: JSON.stringify(frame) });
  }
}

function manualClock() {
  let now = 0;
  let next = 1;
  const timers = new Map();
  return {
    setTimer(fn, ms) {
      const id = next++;
      timers.set(id, { fn, at: now + ms });
      return id;
    },
    clearTimer(id) {
      timers.delete(id);
    },
    advance(ms) {
      now += ms;
      for (const [id, t] of [...timers].sort((a, b) => a[1].at - b[1].at)) {
        if (t.at <= now && timers.has(id)) {
          timers.delete(id);
          t.fn();
        }
      }
    },
    pending: () => timers.size,
  };
}

function connect(overrides = {}) {
  const clock = manualClock();
  const notes = [];
  const opens = [];
  const statuses = [];
  const conn = new Connection({
    url: "ws://example.test/ws",
    WebSocketImpl: FakeSocket,
    setTimer: clock.setTimer,
    clearTimer: clock.clearTimer,
    random: () => 0.5,
    onNotification: (action, payload, epoch) => notes.push({ action, payload, epoch }),
    onOpen: (epoch) => opens.push(epoch),
    onStatus: (s) => statuses.push(s),
    ...overrides,
  });
  conn.start();
  return { conn, clock, notes, opens, statuses, socket: () => FakeSocket.instances.at(-1) };
}

beforeEach(() => {
  FakeSocket.instances = [];
});

describe("envelope", () => {
  it("has the DESIGN §4 shape", () => {
    const e = envelope("c-1", "agent.cancel", { session_id: "s" }, new Date("2026-08-03T10:00:00Z"));
    assert.deepEqual(e, {
      id: "c-1",
      type: "request",
      action: "agent.cancel",
      payload: { session_id: "s" },
      timestamp: "2026-08-03T10:00:00.000Z",
    });
  });

  it("uses the page's own origin and scheme", () => {
    assert.equal(socketUrl({ protocol: "http:", host: "127.0.0.1:8080" }), "ws://127.0.0.1:8080/ws");
    assert.equal(socketUrl({ protocol: "https:", host: "tv.example" }), "wss://tv.example/ws");
  });
});

describe("requests", () => {
  it("matches responses by id", async () => {
    const { conn, socket } = connect();
    socket().open();
    const a = conn.request("task.list", {}, { id: "A" });
    const b = conn.request("session.list", { task_id: "t" }, { id: "B" });
    assert.deepEqual(socket().sent.map((f) => [f.id, f.action, f.type]), [["A", "task.list", "request"], ["B", "session.list", "request"]]);
    socket().reply({ id: "B", type: "response", action: "session.list", payload: { sessions: [] } });
    socket().reply({ id: "A", type: "response", action: "task.list", payload: { tasks: [1] } });
    assert.deepEqual(await a, { tasks: [1] });
    assert.deepEqual(await b, { sessions: [] });
  });

  it("rejects with the error envelope's code and message", async () => {
    const { conn, socket } = connect();
    socket().open();
    const p = conn.request("agent.cancel", { session_id: "s" }, { id: "X" });
    socket().reply({ id: "X", type: "error", action: "agent.cancel", payload: { code: "CONFLICT", message: "still running" } });
    await assert.rejects(p, (err) => err instanceof RequestError && err.code === "CONFLICT" && err.message === "still running");
  });

  it("times out after the bound and ignores the late answer", async () => {
    const { conn, clock, socket } = connect();
    socket().open();
    const p = conn.request("agent.cancel", {}, { id: "T", timeoutMs: 15_000 });
    clock.advance(14_999);
    clock.advance(1);
    await assert.rejects(p, (err) => err.code === "TIMEOUT" && /15 s/.test(err.message));
    socket().reply({ id: "T", type: "response", action: "agent.cancel", payload: { success: true } });
    assert.equal(conn.pending.size, 0);
  });

  it("waits on past the bound while holdWhile says the backend works on it, and keeps its answer", async () => {
    const { conn, clock, socket } = connect();
    socket().open();
    let held = true;
    const p = conn.request("agent.cancel", {}, { id: "H", timeoutMs: 15_000, holdWhile: () => held });
    clock.advance(15_000);
    clock.advance(15_000);
    assert.equal(conn.pending.size, 1, "held twice over the bound");
    socket().reply({ id: "H", type: "error", action: "agent.cancel", payload: { code: "CONFLICT", message: "the agent did not take the cancel" } });
    await assert.rejects(p, (err) => err.code === "CONFLICT" && /did not take/.test(err.message));
    held = false;
  });

  it("times out at the next bound once holdWhile says false", async () => {
    const { conn, clock, socket } = connect();
    socket().open();
    let held = true;
    const p = conn.request("agent.cancel", {}, { id: "G", timeoutMs: 15_000, holdWhile: () => held });
    clock.advance(15_000);
    held = false;
    clock.advance(14_999);
    assert.equal(conn.pending.size, 1);
    clock.advance(1);
    await assert.rejects(p, (err) => err.code === "TIMEOUT");
    assert.equal(conn.pending.size, 0);
  });

  it("fails sent requests when the connection drops (their fate is unknown)", async () => {
    const { conn, socket } = connect();
    socket().open();
    const p = conn.request("agent.cancel", {}, { id: "D" });
    socket().drop();
    await assert.rejects(p, (err) => err.code === "DISCONNECTED");
  });

  it("queues a request made while disconnected and sends it on open", async () => {
    const { conn, socket } = connect();
    const p = conn.request("task.create", { title: "x" }, { id: "Q" });
    assert.equal(socket().sent.length, 0);
    socket().open();
    assert.deepEqual(socket().sent.map((f) => f.id), ["Q"]);
    socket().reply({ id: "Q", type: "response", action: "task.create", payload: { id: "t1" } });
    assert.deepEqual(await p, { id: "t1" });
  });

  it("ignores malformed frames", () => {
    const { socket } = connect();
    socket().open();
    socket().onmessage({ data: "not json" });
    socket().onmessage({ data: "42" });
  });
});

describe("notifications and reconnection", () => {
  it("delivers notifications tagged with the connection epoch", () => {
    const { notes, socket, opens } = connect();
    socket().open();
    socket().reply({ id: "n", type: "notification", action: "session.cancellation_changed", payload: { session_id: "s" } });
    assert.deepEqual(opens, [1]);
    assert.deepEqual(notes, [{ action: "session.cancellation_changed", payload: { session_id: "s" }, epoch: 1 }]);
  });

  it("reconnects with backoff, then calls onOpen again with a new epoch", () => {
    const { clock, socket, opens, statuses } = connect();
    socket().open();
    socket().drop();
    assert.equal(FakeSocket.instances.length, 1, "waits before reconnecting");
    clock.advance(backoffDelay(0, () => 0.5));
    assert.equal(FakeSocket.instances.length, 2);
    socket().drop(); // the second attempt fails too: the delay grows
    clock.advance(backoffDelay(0, () => 0.5));
    assert.equal(FakeSocket.instances.length, 2);
    clock.advance(backoffDelay(1, () => 0.5));
    assert.equal(FakeSocket.instances.length, 3);
    socket().open();
    assert.deepEqual(opens, [1, 2]);
    assert.equal(statuses.at(-1), "open");
    assert.ok(statuses.includes("reconnecting"));
  });

  it("stop() ends reconnecting and fails what is pending", async () => {
    const { conn, clock, socket } = connect();
    socket().open();
    const p = conn.request("task.list", {}, { id: "S" });
    conn.stop();
    await assert.rejects(p, (err) => err.code === "DISCONNECTED");
    clock.advance(60_000);
    assert.equal(FakeSocket.instances.length, 1);
  });
});

describe("backoffDelay", () => {
  it("doubles, is capped, and jitters within [ceiling/2, ceiling]", () => {
    assert.equal(backoffDelay(0, () => 0), 125);
    assert.equal(backoffDelay(0, () => 1), 250);
    assert.equal(backoffDelay(1, () => 1), 500);
    assert.equal(backoffDelay(2, () => 1), 1000);
    assert.equal(backoffDelay(30, () => 1), BACKOFF_MAX_MS);
    assert.equal(backoffDelay(30, () => 0), BACKOFF_MAX_MS / 2);
  });
});
