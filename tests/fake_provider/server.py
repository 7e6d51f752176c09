"""A fake model provider on 127.0.0.1 for the real agent CLIs.

One threaded stdlib HTTP server speaks the five streaming wire formats the
agents use (see ``formats``).  What a streamed answer looks like is chosen by a
marker in the latest user message of the request:

``SLOW``   ``n_tokens`` text tokens, one every ``token_interval_s`` (cancel it)
``WAIT``   the stream opens, then nothing for ``wait_s`` (cancel before output)
``TOOL``   a shell tool call (the agent asks for approval); once the request
           carries the tool's result, a short text answer
``EDIT``   the file edits of ``FakeProvider.edit_plan``, one tool call of the
           agent's own edit tool per request, then a short text (``edits``)
``TASK``   (Anthropic) a call of Claude's subagent tool (``Agent``, formerly
           ``Task``) whose prompt is ``SLOW``: the subagent streams slowly; once
           the request carries the tool's result, a short text answer
``STEPS``  (Responses, Anthropic) the shell commands of ``FakeProvider.step_commands``,
           one call of the agent's own shell tool per request (the next once the
           request carries the earlier ones' results; counted from the request
           itself, as ``EDIT`` counts), then a short text.  Recorded as modes
           ``step1``, ``step2``, ... and ``quick``
``SPAWN``  (Codex) a call of Codex's ``spawn_agent`` (multi-agent tools) whose task
           is ``SLOW``: the child thread streams slowly; once its output names the
           child, a ``wait_agent`` call on it; once that returns, a short text
           answer (``formats.responses_spawn_step``)
``QUICK``  (or no marker) three tokens at once

The marker written last in that message counts.

Only the agent's main requests (the ones offering tools; for Codex and Auggie,
every one) follow the markers; side requests (titles, token counts, routing)
get a short answer at once.

Every streamed answer is a ``StreamRecord``; a client that goes away before the
stream's end is noticed between two tokens (the socket turns readable at EOF)
or by a failed write, and recorded as ``aborted``.
"""

from __future__ import annotations

import json
import re
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from . import edits, formats

__all__ = ["FakeProvider", "StreamRecord"]


@dataclass
class StreamRecord:
    id: int
    api: str  # responses | anthropic | gemini | auggie | chat
    mode: str  # slow | wait | tool | quick | side
    path: str
    started: float = field(default_factory=time.monotonic)
    tokens_sent: int = 0
    ended: float | None = None
    #: The stream reached its natural end.
    completed: bool = False
    #: The client went away before the end.
    aborted: bool = False

    @property
    def open(self) -> bool:
        return self.ended is None


class ClientGone(Exception):
    pass


class FakeProvider:
    def __init__(
        self,
        *,
        token_interval_s: float = 0.2,
        n_tokens: int = 40,
        wait_s: float = 30.0,
        tool_command: str = "touch turnvisor-approved.txt",
        step_commands: tuple[str, ...] = (),
    ) -> None:
        self.token_interval_s = token_interval_s
        self.n_tokens = n_tokens
        self.wait_s = wait_s
        self.tool_command = tool_command
        #: What ``STEPS`` prompts run, in order.
        self.step_commands = step_commands
        #: What ``EDIT`` prompts edit (set by the test once it made the project).
        self.edit_plan: edits.EditPlan | None = None
        self.streams: list[StreamRecord] = []
        #: Every request: (method, path, parsed JSON body or None).
        self.requests: list[tuple[str, str, Any]] = []
        #: Every POST's key as the agent sent it (``Authorization``, else Gemini's
        #: ``x-goog-api-key``; None: none sent).
        self.credentials: list[str | None] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.provider = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
            name="fake-provider", daemon=True,
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeProvider:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
        self._server.join_handlers(5)

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what tests look at -------------------------------------------------

    def snapshot(self) -> list[StreamRecord]:
        with self._lock:
            return [StreamRecord(**vars(r)) for r in self.streams]

    def main_streams(self) -> list[StreamRecord]:
        return [r for r in self.snapshot() if r.mode != "side"]

    def paths(self) -> list[str]:
        with self._lock:
            return [p for _, p, _ in self.requests]

    # -- used by the handler ------------------------------------------------

    def _new_record(self, api: str, mode: str, path: str) -> StreamRecord:
        with self._lock:
            rec = StreamRecord(id=len(self.streams), api=api, mode=mode, path=path)
            self.streams.append(rec)
            return rec

    def _log(self, method: str, path: str, body: Any) -> None:
        with self._lock:
            self.requests.append((method, path, body))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    provider: FakeProvider

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._handlers: list[threading.Thread] = []

    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(
            target=self.process_request_thread, args=(request, client_address), daemon=True
        )
        self._handlers.append(t)
        t.start()

    def join_handlers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for t in self._handlers:
            t.join(max(0.0, deadline - time.monotonic()))

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up is normal here; never print a traceback for it.
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-provider"
    server: _Server
    #: An idle keep-alive connection is dropped after this long.
    timeout = 10

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def provider(self) -> FakeProvider:
        return self.server.provider

    # -- plumbing -----------------------------------------------------------

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if self.headers.get("Content-Encoding") in ("gzip", "zstd", "br"):
            # No agent here compresses requests by default; if one does, treat it as opaque.
            return None
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def _json(self, obj: Any, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _open_stream(self, rec: StreamRecord, content_type: str) -> None:
        try:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            self.wfile.flush()
        except OSError:
            # The agent gave up on the request before its headers went out (a
            # cancel right after the prompt): the stream was aborted, not left open.
            rec.aborted = True
            rec.ended = time.monotonic()
            raise

    def _write(self, rec: StreamRecord, data: bytes) -> None:
        if self._client_gone():
            raise ClientGone
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            raise ClientGone from None

    def _client_gone(self) -> bool:
        """True when the client closed its end (EOF is readable)."""
        sock: socket.socket = self.connection
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            return sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _pause(self, seconds: float) -> None:
        """Sleep, but wake as soon as the client goes away or the server stops."""
        deadline = time.monotonic() + seconds
        sock: socket.socket = self.connection
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.provider._stop.is_set():
                raise ClientGone
            try:
                readable, _, _ = select.select([sock], [], [], min(left, 0.05))
            except (OSError, ValueError):
                raise ClientGone from None
            if readable and self._client_gone():
                raise ClientGone

    def _stream(self, rec: StreamRecord, events: Any) -> None:
        """Write a stream: ``events`` yields bytes to write, or a float to pause."""
        try:
            for item in events:
                if isinstance(item, float):
                    self._pause(item)
                else:
                    self._write(rec, item)
                    if isinstance(item, formats.Token):
                        rec.tokens_sent += 1
            rec.completed = True
        except ClientGone:
            rec.aborted = True
        finally:
            rec.ended = time.monotonic()

    # -- routing ------------------------------------------------------------

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self.provider._log("GET", self.path, None)
        if path.endswith("/models"):
            self._json({"object": "list", "data": [], "models": []})
        else:
            self._json({"error": {"message": f"no such path {path}"}}, 404)

    def do_POST(self) -> None:
        body = self._body()
        self.provider._log("POST", self.path, body)
        with self.provider._lock:
            self.provider.credentials.append(self.headers.get("Authorization")
                                             or self.headers.get("x-goog-api-key"))
        path = urlsplit(self.path).path
        try:
            if path.endswith("/chat/completions"):
                self._chat(body)
            elif path.endswith("/responses"):
                self._responses(body)
            elif path.endswith("/messages/count_tokens"):
                self._json({"input_tokens": 10})
            elif path.endswith("/messages"):
                self._anthropic(body)
            elif ":streamGenerateContent" in path:
                self._gemini(body, path)
            elif ":generateContent" in path:
                self._json(formats.gemini_json_answer())
            elif ":countTokens" in path:
                self._json({"totalTokens": 10})
            elif path.endswith("/chat-stream"):
                self._auggie_chat(body)
            elif path.endswith("/get-models"):
                self._json(formats.AUGGIE_GET_MODELS)
            elif path.endswith("/agents/list-remote-tools"):
                self._json({"tools": []})
            elif path.startswith("/settings/") or path.endswith("/report-error"):
                self._json({})
            else:
                self._json({"error": {"message": f"no such path {path}"}}, 404)
        except (BrokenPipeError, ConnectionResetError):
            pass

    # -- the five formats ---------------------------------------------------

    def _mode(self, text: str, has_tool_result: bool, main: bool) -> str:
        if not main:
            return "side"
        # The marker written last wins: after a cancelled turn some agents merge the
        # unanswered prompt and the next one into one user message.
        found = {m: text.rfind(m) for m in ("TOOL", "WAIT", "SLOW", "QUICK", "EDIT", "TASK",
                                      "SPAWN", "STEPS")}
        marker = max(found, key=lambda m: found[m])
        if found[marker] < 0 or marker == "QUICK":
            return "quick"
        if marker == "EDIT":
            return "edit" if self.provider.edit_plan is not None else "quick"
        if marker in ("TOOL", "TASK"):
            return "quick" if has_tool_result else marker.lower()
        return marker.lower()

    def _step(self, done: int) -> tuple[str, str | None]:
        """``STEPS`` after ``done`` tool calls: the mode to record and the shell
        command to ask for (None: every step was asked for, a short text)."""
        commands = self.provider.step_commands
        if done < len(commands):
            return f"step{done + 1}", commands[done]
        return "quick", None

    def _tokens(self, mode: str) -> tuple[int, float]:
        p = self.provider
        if mode == "slow":
            return p.n_tokens, p.token_interval_s
        return 3, 0.0

    def _responses(self, body: Any) -> None:
        text, has_result = formats.responses_last_user(body)
        mode = self._mode(text, has_result, main=True)
        plan = self.provider.edit_plan
        if mode == "edit" and plan is not None:
            done = edits.responses_steps_done(body)
            mode = edits.edit_mode(done, list(range(len(plan.edits))), plan.wait_before)
            if mode != "quick" and "apply_patch" not in formats.tool_names(body):
                mode = "no-edit-tool"  # shown in the snapshot a failing test prints
            elif mode != "quick":
                rec = self.provider._new_record("responses", mode, self.path)
                self._open_stream(rec, "text/event-stream")
                self._stream(rec, edits.responses_edit_events(plan, done,
                                                              wait_s=self.provider.wait_s))
                return
        call: tuple[str, str | None, dict[str, Any]] | None = None
        command: str | None = None
        if mode == "steps":
            mode, command = self._step(edits.responses_steps_done(body))
        if mode == "spawn":
            fn, args = formats.responses_spawn_step(body)
            if fn:
                namespace = formats.tool_namespace(body, fn)
                if namespace is None and fn not in formats.tool_names(body):
                    mode = "no-agent-tool"  # shown in the snapshot a failing test prints
                else:
                    call = (fn, namespace, args)
                    mode = "spawn" if fn == "spawn_agent" else "wait-agent"
            else:
                mode = "quick"
        rec = self.provider._new_record("responses", mode, self.path)
        self._open_stream(rec, "text/event-stream")
        self._stream(rec, formats.responses_events(
            "tool" if call is not None or command is not None else mode, *self._tokens(mode),
            wait_s=self.provider.wait_s, command=command or self.provider.tool_command,
            tools=formats.tool_names(body), escalate=formats.offers_escalation(body),
            call=call,
        ))

    def _chat(self, body: Any) -> None:
        body = body if isinstance(body, dict) else {}
        text, has_result = formats.chat_last_user(body)
        mode = self._mode(text, has_result, main=bool(body.get("tools")))
        if not body.get("stream"):
            self._json(formats.chat_message("ok", str(body.get("model", "fake"))))
            return
        rec = self.provider._new_record("chat", mode, self.path)
        self._open_stream(rec, "text/event-stream")
        self._stream(rec, formats.chat_events(
            mode, *self._tokens(mode), wait_s=self.provider.wait_s,
            command=self.provider.tool_command, body=body,
        ))

    def _anthropic(self, body: Any) -> None:
        body = body if isinstance(body, dict) else {}
        text, has_result = formats.anthropic_last_user(body)
        mode = self._mode(text, has_result, main=bool(body.get("tools")))
        if not body.get("stream"):
            self._json(formats.anthropic_message("ok"))
            return
        command: str | None = None
        # After a tool call the latest user message holds its result, not the
        # prompt: the marker of a sequence is looked for in the prompt.
        prompt, done = edits.anthropic_prompt(body)
        scripted = self._mode(prompt, False, main=True) if mode != "side" else "side"
        if scripted == "steps":
            mode, command = self._step(done)
        plan = self.provider.edit_plan
        if plan is not None and scripted == "edit":
            steps = [s[0] for s in plan.claude_steps()]
            mode = edits.edit_mode(done, steps, plan.wait_before)
            if mode != "quick":
                rec = self.provider._new_record("anthropic", mode, self.path)
                self._open_stream(rec, "text/event-stream")
                self._stream(rec, edits.anthropic_edit_events(
                    plan, done, wait_s=self.provider.wait_s,
                    model=str(body.get("model", "fake"))))
                return
        rec = self.provider._new_record("anthropic", mode, self.path)
        self._open_stream(rec, "text/event-stream")
        self._stream(rec, formats.anthropic_events(
            "tool" if command is not None else mode, *self._tokens(mode),
            wait_s=self.provider.wait_s, command=command or self.provider.tool_command,
            model=str(body.get("model", "fake")),
            tools=formats.tool_names(body),
        ))

    def _gemini(self, body: Any, path: str) -> None:
        body = body if isinstance(body, dict) else {}
        text, has_result = formats.gemini_last_user(body)
        mode = self._mode(text, has_result, main=bool(body.get("tools")))
        rec = self.provider._new_record("gemini", mode, path)
        self._open_stream(rec, "text/event-stream")
        m = re.search(r"models/([^:/]+):", path)
        self._stream(rec, formats.gemini_events(
            mode, *self._tokens(mode), wait_s=self.provider.wait_s,
            command=self.provider.tool_command, model=m.group(1) if m else "fake",
        ))

    def _auggie_chat(self, body: Any) -> None:
        text = formats.auggie_last_user(body)
        mode = self._mode(text, False, main=True)
        if mode == "tool":
            mode = "quick"
        rec = self.provider._new_record("auggie", mode, self.path)
        self._open_stream(rec, "application/x-ndjson")
        self._stream(rec, formats.auggie_events(mode, *self._tokens(mode),
                                                wait_s=self.provider.wait_s))

