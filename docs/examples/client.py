"""A complete Turnvisor WebSocket client (docs/clients.md): run one prompt,
retry it safely, stream the answer, optionally cancel the turn it started.

    python client.py URL TOKEN "prompt" [--cancel-after SECONDS]

Needs trio and trio-websocket.  Exits 0 when the turn ended, 3 if cancelled.
"""

import argparse
import itertools
import json
import uuid

import trio
from trio_websocket import open_websocket_url

ids = itertools.count(1)


async def request(ws, waiting, action, payload):
    """Send a request; the reader hands its answer over by id."""
    rid = str(next(ids))
    send, receive = trio.open_memory_channel(1)
    waiting[rid] = send
    await ws.send_message(json.dumps(
        {"id": rid, "type": "request", "action": action, "payload": payload}))
    frame = await receive.receive()
    if frame["type"] == "error":
        raise RuntimeError(f"{action}: {frame['payload']}")
    return frame["payload"]


async def main(url, token, prompt, cancel_after):
    ws_url = url.replace("http", "ws", 1).rstrip("/") + "/ws"
    headers = [(b"Authorization", f"Bearer {token}".encode())]
    async with open_websocket_url(ws_url, extra_headers=headers) as ws, \
            trio.open_nursery() as nursery:
        waiting = {}
        notes_in, notes = trio.open_memory_channel(1000)

        async def reader():
            while True:
                frame = json.loads(await ws.get_message())
                if frame["type"] in ("response", "error") and frame["id"] in waiting:
                    waiting.pop(frame["id"]).send_nowait(frame)
                elif frame["type"] == "notification":
                    await notes_in.send(frame)

        nursery.start_soon(reader)
        task = await request(ws, waiting, "task.create", {"title": prompt[:80]})
        session = await request(ws, waiting, "session.launch", {"task_id": task["id"]})
        sid = session["id"]
        await request(ws, waiting, "session.subscribe", {"session_id": sid,
                                                         "text_appends": True})
        # One id per message: sending it again (after a dropped connection, say)
        # answers the first result and runs nothing twice.
        message = {"session_id": sid, "content": prompt,
                   "client_message_id": str(uuid.uuid4())}
        first = await request(ws, waiting, "message.add", message)
        again = await request(ws, waiting, "message.add", message)
        assert again["repeated"] and again["id"] == first["id"]
        turn_id = first["turn_id"]

        async def cancel_later():
            await trio.sleep(cancel_after)
            # Aimed at this turn: if it has ended, nothing else is touched.
            answer = await request(ws, waiting, "agent.cancel",
                                   {"session_id": sid, "turn_id": turn_id})
            print(f"\n[cancel: {answer['outcome']}]", flush=True)

        if cancel_after is not None:
            nursery.start_soon(cancel_later)
        async for frame in notes:
            p = frame["payload"]
            msg = p.get("message", {})
            if frame["action"] == "session.message.appended" and p["turn_id"] == turn_id:
                print(p["text"], end="", flush=True)
            elif (frame["action"] == "session.message.added" and msg["turn_id"] == turn_id
                  and msg["role"] == "agent" and msg["kind"] == "text"):
                print(msg["content"], end="", flush=True)  # its first text
            elif frame["action"] == "session.turn.completed" and p["turn_id"] == turn_id:
                print(f"\n[turn ended: {p['stop_reason']}]", flush=True)
                nursery.cancel_scope.cancel()
                return 3 if p["stop_reason"] == "cancelled" else 0
    return 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("token")
    parser.add_argument("prompt")
    parser.add_argument("--cancel-after", type=float, default=None)
    args = parser.parse_args()
    raise SystemExit(trio.run(main, args.url, args.token, args.prompt, args.cancel_after))
