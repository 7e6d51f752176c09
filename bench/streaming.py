"""Phase ``streaming``: the server's CPU per streamed chunk with many sessions streaming.

N sessions (100; ``--quick`` 20) each run a long ``/delay`` turn (the mock agent
streams a chunk every 100 ms), all subscribed on one WebSocket connection.  Over a
steady window the bench reads the server process's CPU time (psutil) and counts, on
that connection:

- the message frames (``session.message.*``: added, updated, or whatever carries a
  delta) it received;
- the chunks the agents emitted: the mock agent numbers its chunks ``chunk0 chunk1
  ...``, so the highest number each session's frames carried, at the window's end
  minus at its start, counts every chunk whether a frame carries one chunk, a delta
  of several or the whole message.

``server_cpu_ms_per_chunk`` = server CPU in the window / chunks emitted in it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import psutil
import trio

from tests.support.ws import now, open_client

from .measure import cpu_s, log

if TYPE_CHECKING:
    from .harness import Bench

__all__ = ["ChunkCounter", "streaming"]

STREAM_PROMPT = "/delay 600000"
#: protocols/mock_agent.py CHUNK_INTERVAL_S: what one session streams per second.
CHUNKS_PER_S_PER_SESSION = 10
_CHUNK = re.compile(r"chunk(\d+)")
_SESSION = re.compile(r'"session_id"\s*:\s*"([^"]+)"')


class ChunkCounter:
    """Sees the raw text of every frame of one connection (``open_client(inspect=)``):
    the message frames, and the highest chunk number seen per session."""

    def __init__(self) -> None:
        self.frames = 0
        self.last: dict[str, int] = {}

    def __call__(self, text: str) -> None:
        if '"session.message.' not in text:
            return
        self.frames += 1
        numbers = _CHUNK.findall(text)
        session = _SESSION.search(text)
        if numbers and session is not None:
            sid, top = session.group(1), max(map(int, numbers))
            if top > self.last.get(sid, -1):
                self.last[sid] = top


async def streaming(bench: Bench, pool: list[str]) -> dict[str, Any]:
    """Windows in one run, alternating: the connection subscribed for
    whole-message updates (what a client that does not opt in gets), and
    re-subscribed with ``text_appends`` (what the web UI asks for).  The headline figures are the
    appends window's; ``whole_messages`` holds the other."""
    n = bench.p.streaming_sessions
    sessions = pool[:n]
    if len(sessions) < n:
        raise RuntimeError(f"the pool has {len(sessions)} sessions, the phase needs {n}")
    counter = ChunkCounter()
    conn = await open_client(bench.nursery, bench.server, keep=False, inspect=counter)
    try:
        for sid in sessions:
            await conn.call("session.subscribe", {"session_id": sid})
        try:
            async with trio.open_nursery() as nursery:
                for sid in sessions:
                    nursery.start_soon(bench.start_turn, conn, sid, STREAM_PROMPT)
            await trio.sleep(1.0)  # every turn streaming steadily
            # Alternating windows (whole, appends, whole, appends): the messages grow
            # all along, and a later window would write longer ones.
            windows: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
            for appending in (False, True, False, True):
                for sid in sessions:
                    await conn.call("session.subscribe",
                                    {"session_id": sid, "text_appends": appending})
                await trio.sleep(0.3)
                windows[appending].append(await _window(bench, counter, sessions))
            whole, appends = _merged(windows[False]), _merged(windows[True])
        finally:
            await bench.cancel_all(conn, sessions)
        for sid in sessions:
            await conn.call("session.unsubscribe", {"session_id": sid})
    finally:
        await conn.aclose()
    out = {**appends, "text_appends": True, "whole_messages": whole}
    log(f"streaming {n}: {out['chunks_per_s']} chunks/s, {out['frames_per_s']} frames/s, "
        f"server CPU {out['server_cpu_ms_per_chunk']} ms/chunk with appends, "
        f"{whole['server_cpu_ms_per_chunk']} with whole messages "
        f"({out['server_cpu_util']:.0%} of a core)")
    return out


def _merged(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """Windows of the same kind as one: totals summed, rates recomputed."""
    out = dict(windows[-1])
    for key in ("window_s", "chunks", "message_frames", "server_cpu_ms"):
        out[key] = round(sum(w[key] for w in windows), 3)
    window, chunks, frames = out["window_s"], out["chunks"], out["message_frames"]
    cpu_ms = out["server_cpu_ms"]
    out.update({
        "chunks_per_s": round(chunks / window, 1),
        "frames_per_s": round(frames / window, 1),
        "server_cpu_util": round(cpu_ms / 1000 / window, 3),
        "server_cpu_ms_per_chunk": round(cpu_ms / chunks, 4) if chunks else None,
        "server_cpu_ms_per_frame": round(cpu_ms / frames, 4) if frames else None,
        "client_cpu_util": round(sum(w["client_cpu_util"] * w["window_s"] for w in windows)
                                 / window, 3),
    })
    return out


async def _window(bench: Bench, counter: ChunkCounter, sessions: list[str]) -> dict[str, Any]:
    ps, me = bench.server.ps(), psutil.Process()
    f0, c0, t0 = counter.frames, dict(counter.last), now()
    cpu0, me0 = cpu_s(ps), cpu_s(me)
    await trio.sleep(bench.p.streaming_window_s)
    cpu1, me1 = cpu_s(ps), cpu_s(me)
    f1, c1, t1 = counter.frames, dict(counter.last), now()
    window = t1 - t0
    chunks = sum(c1.get(sid, -1) - c0[sid] for sid in sessions if sid in c0)
    frames = f1 - f0
    cpu = cpu1 - cpu0
    return {
        "sessions": len(sessions),
        "sessions_seen_streaming": sum(1 for sid in sessions if sid in c0),
        "window_s": round(window, 3),
        "chunks": chunks,
        "message_frames": frames,
        "chunks_per_s": round(chunks / window, 1),
        "expected_chunks_per_s": len(sessions) * CHUNKS_PER_S_PER_SESSION,
        "frames_per_s": round(frames / window, 1),
        "server_cpu_ms": round(cpu * 1000, 1),
        "server_cpu_util": round(cpu / window, 3),
        "server_cpu_ms_per_chunk": round(cpu * 1000 / chunks, 4) if chunks else None,
        "server_cpu_ms_per_frame": round(cpu * 1000 / frames, 4) if frames else None,
        "client_cpu_util": round((me1 - me0) / window, 3),
    }
