// A complete Turnvisor WebSocket client for Node 20+ (docs/clients.md): run one
// prompt, retry it safely, stream the answer, optionally cancel its turn.
//
//   node --experimental-websocket client.mjs URL TOKEN "prompt" [CANCEL_AFTER_SECONDS]
//
// (Node 22 has WebSocket without the flag.)  Exits 0 when the turn ended, 3 if cancelled.
import { randomUUID } from "node:crypto";

const [url, token, prompt, cancelAfter] = process.argv.slice(2);
const ws = new WebSocket(url.replace(/^http/, "ws").replace(/\/$/, "") + "/ws", {
  headers: { Authorization: `Bearer ${token}` }, // Node's WebSocket takes headers
});
const waiting = new Map();
const early = []; // notifications that came before the turn's id was known
let onNote = (frame) => early.push(frame);
let nextId = 1;

function request(action, payload) {
  const id = String(nextId++);
  ws.send(JSON.stringify({ id, type: "request", action, payload }));
  return new Promise((resolve, reject) => {
    waiting.set(id, (frame) =>
      frame.type === "error" ? reject(new Error(`${action}: ${frame.payload.message}`))
                             : resolve(frame.payload));
  });
}

ws.onmessage = (event) => {
  const frame = JSON.parse(event.data);
  const answer = waiting.get(frame.id);
  if (answer && (frame.type === "response" || frame.type === "error")) {
    waiting.delete(frame.id);
    answer(frame);
  } else if (frame.type === "notification") {
    onNote(frame);
  }
};
ws.onerror = () => { console.error("connection failed"); process.exit(1); };

ws.onopen = async () => {
  const task = await request("task.create", { title: prompt.slice(0, 80) });
  const session = await request("session.launch", { task_id: task.id });
  const sid = session.id;
  await request("session.subscribe", { session_id: sid, text_appends: true });
  // One id per message: a repeat answers the first result and runs nothing twice.
  const message = { session_id: sid, content: prompt, client_message_id: randomUUID() };
  const first = await request("message.add", message);
  const again = await request("message.add", message);
  if (!again.repeated || again.id !== first.id) throw new Error("the retry ran twice");
  const turnId = first.turn_id;
  onNote = (frame) => {
    const p = frame.payload;
    const msg = p.message ?? {};
    if (frame.action === "session.message.appended" && p.turn_id === turnId) {
      process.stdout.write(p.text);
    } else if (frame.action === "session.message.added" && msg.turn_id === turnId
               && msg.role === "agent" && msg.kind === "text") {
      process.stdout.write(msg.content); // its first text
    } else if (frame.action === "session.turn.completed" && p.turn_id === turnId) {
      console.log(`\n[turn ended: ${p.stop_reason}]`);
      ws.close();
      process.exit(p.stop_reason === "cancelled" ? 3 : 0);
    }
  };
  early.splice(0).forEach(onNote);
  if (cancelAfter !== undefined) {
    setTimeout(async () => {
      // Aimed at this turn: if it has ended, nothing else is touched.
      const answer = await request("agent.cancel", { session_id: sid, turn_id: turnId });
      console.log(`\n[cancel: ${answer.outcome}]`);
    }, Number(cancelAfter) * 1000);
  }
};
