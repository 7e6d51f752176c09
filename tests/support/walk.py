"""The cancel's fast path, measured: every cross-module call it makes, recorded with
``sys.setprofile`` (tests/web/test_cancel_walk.py asserts ceilings on it,
``python -m bench.cancel_walk`` prints it).

The path: an ``agent.cancel`` received by the real server's WebSocket gateway
(``web.server.serve`` in this process; a WebSocket client of this module's own
over TCP, on a session it launched and subscribed to) while a turn runs that
sends nothing (the mock agent's ``/tool``: a tool call that runs for minutes
and stops at the cancel), through the protocol cancel written to the agent,
the agent's confirmation, the turn's close, to the cancel's answer written to
the client's socket.

What is counted (``Walk``):

- **A cross-module call** is a profiler ``call`` event whose callee's module
  and caller's module are both product modules (``supervisor``, ``protocols``,
  ``web`` and below) and differ.  The caller is the nearest product frame
  below the callee: a call that passes through a library (``contextlib``,
  ``functools``, Trio's ``to_thread``) is still a call of the product module
  that made it, and the edge names the library (``via``) instead of being
  dropped.  A call event whose nearest product frame below is in the same
  module is not cross-module; one with no product frame below (a task's root
  resumed by Trio's scheduler, a thread's entry) has no caller and is not
  counted either: these are scheduler wake-ups, not calls (``roots`` keeps them).
  A dataclass's generated ``__init__`` is a call into the class's module.
- A **resumption** is a call event of a suspended coroutine or generator
  continuing (the profiler reports it as a call; Python 3.11's ``RESUME`` with
  a non-zero argument): a product coroutine awaiting another module's coroutine
  across a checkpoint is re-entered through that edge, and each ``next()`` of
  another module's generator is one too.  They are counted (the path pays for
  them) and also reported on their own.
- A **back-edge** is a cross-module call that goes up: the callee's module
  imports the caller's module, directly or through other product modules
  (``imports``: every ``import`` statement in the modules' own source, those in
  functions and under ``TYPE_CHECKING`` included, as the import-linter contracts
  count them), or the caller is in a lower layer than the callee (``LAYERS``,
  pyproject.toml's layers contract: ``web`` uses ``supervisor`` uses
  ``protocols``; this catches an interface matched by structure, such as the
  bus's ``Sink``, whose implementer need not import it).  Either way the lower
  module calls up, through a callback, a closure or an interface it was handed.
- **The way back** starts at the step (a task's run between two suspensions,
  from a Trio instrument) that read the agent's answer: the second server step
  the run loop woke for I/O in the window (the first read the cancel's frame).
  **Publishes per close** are the calls into ``supervisor/bus.py``'s
  ``publish*`` functions on the way back (one turn closes in the window).

Where the window starts and ends: the profiler is installed just before the
client sends the cancel's frame (the client is this module's code, wsproto and
Trio: no product module, so nothing of it is counted; the tests' ``WsClient``
would be, as it checks frames with ``web.contract``), and it is removed at the
first write (``os.write`` or a socket ``send``) after which the client's socket
holds the cancel's answer (a ``MSG_PEEK`` of the client's socket after each such
write: on loopback TCP the bytes are in the peer's queue when the write returns).
So the window ends exactly where the answer is written, whatever function
writes it; what runs after that write is not in it.  Should the kernel deliver
the bytes later, the write is not seen as the answer's (``stopped_at_write`` is
then False) and the walk is measured again.

What makes the count the same every run (each was measured to vary without it):

- The agent's process group is stopped (SIGSTOP) from before the cancel's frame
  until the server has done all the cancel makes it do before the agent's
  answer (no task runnable for 50 ms), and the server reads the answer only
  once the agent has written all of it (the bytes in its stdout stay the same
  for ``SETTLE_S``; Codex answers in three lines).  The mock agent answers
  within a millisecond, often inside the outbox writer's two rounds, and the
  answer then leaves with the writer instead of from the closing step.
- Trio's order within a batch of runnable tasks is fixed to the order they
  were scheduled in (``_InOrder``).
- Only the Trio thread is profiled (``sys.setprofile`` is per thread, and
  Python 3.11 cannot set it on running threads): a hop to a worker thread
  (``trio.to_thread.run_sync``) is listed in ``thread_hops`` with the function
  it runs; the fast path has none, and the test keeps it so.
"""

from __future__ import annotations

import ast
import dis
import fcntl
import json
import os
import random
import signal
import socket
import struct
import sys
import termios
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Final

import trio
import trio.testing
from trio._core import _run as _trio_run
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    Ping,
    Request,
    TextMessage,
)

from tests.support.server import Server, running_server

__all__ = ["DIALECTS", "Edge", "Walk", "back_edge", "imports", "measure"]

#: The product's packages: a module of one of these (or below) is a product module.
PRODUCT: Final = ("supervisor", "protocols", "web")
#: The layers, top first (pyproject.toml's import-linter layers contract).
LAYERS: Final = ("web", "supervisor", "protocols")
#: The mock agent's profile per dialect (supervisor/profiles.py).
DIALECTS: Final = {"acp": "mock", "codex": "mock-codex"}
#: The turn the cancel stops: one tool call that runs for ten minutes and stops
#: at the cancel; after its start the agent sends nothing (no streamed text
#: whose arrival could fall into the window).
PROMPT: Final = "/tool 600000"
CANCEL_ID: Final = "walk-cancel"
MOCK: Final = b"protocols.mock_agent"
#: How long the agent's stdout must stay the same for its answer to be whole.
SETTLE_S: Final = 0.05
#: Writes after which the client's socket is peeked for the answer.
_WRITES: Final = frozenset({"write", "send", "sendall", "sendmsg", "writev"})
_RESUME: Final = dis.opmap["RESUME"]
_TO_THREAD: Final = ("trio._threads", "to_thread_run_sync")
_ROOT: Final = str(Path(__file__).resolve().parents[2])


def _is_product(module: str) -> bool:
    return module.partition(".")[0] in PRODUCT


def _is_product_file(path: str) -> bool:
    """A source file of the product's packages (this checkout's)."""
    return any(path.startswith(f"{_ROOT}/{package}/") for package in PRODUCT)


def _where(frame: FrameType) -> str:
    module = frame.f_globals.get("__name__", "?")
    return f"{module.replace('.', '/')}:{frame.f_code.co_qualname}"


@dataclass(frozen=True, order=True)
class Edge:
    """One cross-module call: ``caller`` → ``callee`` (``module/path:qualname``)."""

    caller: str
    callee: str
    #: The library between them (its module), if the call passed through one.
    via: str = ""
    #: A suspended coroutine or generator continued, not a fresh call.
    resumed: bool = False

    @property
    def modules(self) -> tuple[str, str]:
        return (self.caller.partition(":")[0].replace("/", "."),
                self.callee.partition(":")[0].replace("/", "."))

    def __str__(self) -> str:
        via = f" (via {self.via})" if self.via else ""
        return f"{self.caller} → {self.callee}{via}{' [resumed]' if self.resumed else ''}"


@dataclass
class Walk:
    """What one cancel's window recorded, and the path through it."""

    dialect: str
    #: Every cross-module call of the window, in the order they ran ...
    edges: list[Edge] = field(default_factory=list)
    #: ... and the step each ran in (None: outside any task step).
    edge_steps: list[int | None] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    #: The step that wrote the answer (None: its write was not seen).
    answer_step: int | None = None
    #: Product functions entered with no product frame below (scheduler wake-ups).
    roots: Counter[str] = field(default_factory=Counter)
    #: Calls into ``trio.to_thread.run_sync``: the product caller, what it runs, its step.
    thread_hops: list[tuple[str, str, int | None]] = field(default_factory=list)

    @property
    def stopped_at_write(self) -> bool:
        return self.answer_step is not None

    def answer_read(self) -> int | None:
        """The step that read the agent's answer: the second server step the run
        loop woke (for I/O) in the window; the first read the cancel's frame."""
        woken = [i for i, step in enumerate(self.steps) if step.waker is None and step.server]
        return woken[1] if len(woken) > 1 else None

    def path(self) -> list[tuple[Edge, bool]]:
        """The window's calls, in order, each with whether it is on the way back
        (from the agent's answer's read on)."""
        read = self.answer_read()
        return [(e, read is not None and s is not None and s >= read)
                for e, s in zip(self.edges, self.edge_steps, strict=True)]

    def tasks(self) -> Counter[str]:
        """The calls per task."""
        return Counter(self.steps[s].task if s is not None else "(outside a task step)"
                       for s in self.edge_steps)

    def _step(self, i: int) -> str:
        step = self.steps[i]
        mark = "*" if i in (self.answer_read(), self.answer_step) else ""
        woken = "io" if step.waker is None else str(step.waker)
        return f"{i}{mark} {step.task.rpartition('.')[2]}←{woken}"

    def back_edges(self) -> list[Edge]:
        return [e for e, _ in self.path() if back_edge(e)]

    def publishes(self, *, back_only: bool) -> int:
        """Calls into ``supervisor/bus.py``'s ``publish*`` on the path (``back_only``:
        on the way back, the turn's close)."""
        return sum(1 for e, back in self.path()
                   if (back or not back_only) and not e.resumed
                   and e.callee.startswith("supervisor/bus:")
                   and e.callee.rpartition(".")[2].startswith("publish"))

    def figures(self) -> dict[str, int]:
        path = self.path()
        edges = [e for e, _ in path]
        return {"calls": len(path),
                "calls_down": sum(1 for _, back in path if not back),
                "calls_back": sum(1 for _, back in path if back),
                "resumptions": sum(e.resumed for e in edges),
                "distinct_edges": len(set(edges)),
                "module_edges": len({e.modules for e in edges}),
                "modules": len({m for e in edges for m in e.modules}),
                "back_edges": len(self.back_edges()),
                "publishes_per_close": self.publishes(back_only=True),
                "publishes": self.publishes(back_only=False),
                "thread_hops": len(self.thread_hops)}

    def report(self) -> str:
        """The walk as a developer reads it: the figures, then every distinct edge
        sorted, with its count (B: a back-edge; ↩: on the way back, at least once),
        then the calls per task and the steps."""
        path = self.path()
        counts = Counter(e for e, _ in path)
        returning = {e for e, back in path if back}
        lines = [f"cancel walk ({self.dialect}): " + ", ".join(
            f"{k} {v}" for k, v in self.figures().items())]
        for edge in sorted(counts):
            mark = ("B" if back_edge(edge) else " ") + ("↩" if edge in returning else " ")
            lines.append(f"  {counts[edge]:3d} {mark} {edge}")
        for caller, fn, _ in self.thread_hops:
            lines.append(f"  thread hop: {caller} → to_thread.run_sync({fn})")
        lines.append("  calls per task: " + ", ".join(
            f"{task} {n}" for task, n in sorted(self.tasks().items())))
        lines.append("  steps (task ← the step that scheduled it; * the answer's read and write): "
                     + ", ".join(self._step(i) for i in range(len(self.steps))))
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        path = self.path()
        counts = Counter(e for e, _ in path)
        returning = {e for e, back in path if back}
        return {"dialect": self.dialect, "figures": self.figures(),
                "edges": [{"caller": e.caller, "callee": e.callee, "via": e.via,
                           "resumed": e.resumed, "count": n, "back_edge": back_edge(e),
                           "way_back": e in returning}
                          for e, n in sorted(counts.items())],
                "order": [str(e) for e, _ in path],
                "tasks": dict(self.tasks()),
                "thread_hops": [[c, f] for c, f, _ in self.thread_hops]}


# -- the import relation ------------------------------------------------------------


def _module_file(name: str) -> Path | None:
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    return Path(file) if file else None


def _direct_imports(name: str) -> set[str]:
    """The product modules ``name``'s source imports, anywhere in the file."""
    path = _module_file(name)
    if path is None or path.suffix != ".py":
        return set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                up = parts[:len(parts) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            found.add(base)
            # ``from pkg import mod`` imports the module ``pkg.mod`` too.
            found.update(f"{base}.{a.name}" for a in node.names
                         if f"{base}.{a.name}" in sys.modules)
    return {m for m in found if _is_product(m) and m != name}


_closure: dict[str, frozenset[str]] = {}


def imports(name: str) -> frozenset[str]:
    """Every product module ``name`` imports, directly or through others."""
    if name not in _closure:
        seen: set[str] = set()
        todo = [name]
        while todo:
            for dep in _direct_imports(todo.pop()):
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        seen.discard(name)
        _closure[name] = frozenset(seen)
    return _closure[name]


def back_edge(edge: Edge) -> bool:
    """The callee's module imports the caller's, or the caller's layer is below the
    callee's: a call up the dependencies."""
    caller, callee = edge.modules
    return (caller in imports(callee)
            or LAYERS.index(caller.partition(".")[0]) > LAYERS.index(callee.partition(".")[0]))


# -- the recorder ---------------------------------------------------------------------


@dataclass
class Step:
    """One run of one task between two suspensions (Trio's ``before_task_step`` to
    ``after_task_step``)."""

    task: str
    #: The step during which this one was scheduled (None: by the run loop, for
    #: I/O or a deadline, or before the window).
    waker: int | None
    #: The task's root coroutine is product code (not the client's, not Trio's).
    server: bool


class _Recorder(trio.abc.Instrument):
    """The profiler function and the Trio instrument for the window (see the
    module's docstring)."""

    def __init__(self, walk: Walk, answered: Callable[[], bool]) -> None:
        self.walk = walk
        self.answered = answered
        self.done = False
        self._current: int | None = None
        self._woken_by: dict[trio.lowlevel.Task, int | None] = {}

    # the instrument: who scheduled whom

    def task_scheduled(self, task: trio.lowlevel.Task) -> None:
        self._woken_by[task] = self._current

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        code = getattr(task.coro, "cr_code", None)
        module = code.co_filename if code is not None else ""
        self.walk.steps.append(Step(task.name, self._woken_by.pop(task, None),
                                    _is_product_file(module)))
        self._current = len(self.walk.steps) - 1

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self._current = None

    # the profiler

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if _is_product(module):
                self._call(frame, module)
            elif (module, frame.f_code.co_name) == _TO_THREAD:
                self._thread_hop(frame)
        elif (event == "c_return" and getattr(arg, "__name__", "") in _WRITES
              and self.answered()):
            self.walk.answer_step = self._current
            self.stop()

    def _call(self, frame: FrameType, module: str) -> None:
        below = frame.f_back
        via = ""
        while below is not None and not _is_product(below.f_globals.get("__name__", "")):
            via = via or below.f_globals.get("__name__", "?")
            below = below.f_back
        if below is None:
            self.walk.roots[_where(frame)] += 1
            return
        if below.f_globals.get("__name__") == module:
            return
        code = frame.f_code.co_code
        resumed = code[frame.f_lasti] == _RESUME and code[frame.f_lasti + 1] != 0
        self.walk.edges.append(Edge(_where(below), _where(frame), via, resumed))
        self.walk.edge_steps.append(self._current)

    def _thread_hop(self, frame: FrameType) -> None:
        below = frame.f_back
        while below is not None and not _is_product(below.f_globals.get("__name__", "")):
            below = below.f_back
        if below is not None:
            fn = frame.f_locals.get("sync_fn")
            name = getattr(fn, "__qualname__", None) or repr(fn)
            self.walk.thread_hops.append((_where(below), name, self._current))

    def start(self) -> None:
        self._random = _trio_run._r
        self._deterministic = _trio_run._ALLOW_DETERMINISTIC_SCHEDULING
        _trio_run._r = _InOrder()
        _trio_run._ALLOW_DETERMINISTIC_SCHEDULING = False  # type: ignore[misc]
        trio.lowlevel.add_instrument(self)
        sys.setprofile(self)

    def stop(self) -> None:
        if not self.done:
            self.done = True
            sys.setprofile(None)
            trio.lowlevel.remove_instrument(self)
            _trio_run._r = self._random
            _trio_run._ALLOW_DETERMINISTIC_SCHEDULING = self._deterministic  # type: ignore[misc]


class _InOrder(random.Random):
    """Trio runs each batch of runnable tasks in the order they were scheduled,
    or reversed when ``_r.random() < 0.5`` (trio/_core/_run.py: at random, so that
    no code comes to rely on an order; with Hypothesis installed, as in the
    tests, trio's plugin sorts the batch by task and shuffles it with ``_r``
    instead).  In the window it is always the order they were scheduled in, in
    the tests and the bench alike: otherwise whether the turn's own task, the
    agent reader's next round or the outbox writer's next round runs before or
    after the closing step varies from run to run, and the count with it
    (measured: ACP 129-137, Codex 140-151)."""

    def random(self) -> float:
        return 0.5


# -- the client -----------------------------------------------------------------------


class _Client:
    """A WebSocket client of the server's ``/ws`` with nothing of the product in
    it (the tests' ``WsClient`` checks frames with ``web.contract``, which would be
    counted): wsproto over a TCP socket whose stdlib object is kept for the peek."""

    def __init__(self, sock: socket.socket, stream: trio.SocketStream) -> None:
        self.sock = sock
        self.stream = stream
        self.conn = WSConnection(ConnectionType.CLIENT)
        self.frames: list[dict[str, Any]] = []
        self._n = 0

    async def _events(self) -> None:
        data = await self.stream.receive_some(1 << 20)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.conn.receive_data(data)

    async def handshake(self, host: str, token: str) -> None:
        await self.stream.send_all(self.conn.send(Request(
            host=host, target="/ws",
            extra_headers=[(b"authorization", f"Bearer {token}".encode())])))
        while True:
            await self._events()
            for event in self.conn.events():
                if isinstance(event, AcceptConnection):
                    return
                raise ConnectionError(f"not accepted: {event!r}")

    async def send(self, action: str, payload: dict[str, Any], rid: str | None = None) -> str:
        if rid is None:
            self._n += 1
            rid = f"walk-{self._n}"
        await self.stream.send_all(self.conn.send(TextMessage(data=json.dumps(
            {"id": rid, "type": "request", "action": action, "payload": payload}))))
        return rid

    async def until(self, pred: Callable[[dict[str, Any]], bool], *,
                    since: int = 0) -> dict[str, Any]:
        """Read frames until one from index ``since`` on matches ``pred`` (every
        frame is kept in ``frames``); a ping is answered."""
        seen = since
        while True:
            for frame in self.frames[seen:]:
                if pred(frame):
                    return frame
            seen = len(self.frames)
            await self._events()
            for event in self.conn.events():
                if isinstance(event, TextMessage):
                    self.frames.append(json.loads(event.data))
                elif isinstance(event, Ping):
                    await self.stream.send_all(self.conn.send(event.response()))
                elif isinstance(event, CloseConnection):
                    raise ConnectionError(f"closed: {event.code} {event.reason}")

    async def call(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        rid = await self.send(action, payload)
        frame = await self.until(lambda f: f.get("id") == rid)
        if frame["type"] != "response":
            raise RuntimeError(f"{action} failed: {frame}")
        result: dict[str, Any] = frame["payload"]
        return result

    def holds_answer(self) -> bool:
        """Whether the cancel's answer is in the socket's queue (not consumed)."""
        try:
            data = self.sock.recv(1 << 22, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        return f'{{"id":"{CANCEL_ID}","type":"response"'.encode() in data


@asynccontextmanager
async def _client(srv: Server) -> AsyncIterator[_Client]:
    host, port = srv.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    tsock = trio.socket.from_stdlib_socket(sock)
    await tsock.connect((host, int(port)))
    stream = trio.SocketStream(tsock)
    client = _Client(sock, stream)
    try:
        await client.handshake(f"{host}:{port}", srv.token)
        yield client
    finally:
        await stream.aclose()


def _is_state(sid: str, state: str) -> Callable[[dict[str, Any]], bool]:
    def pred(f: dict[str, Any]) -> bool:
        session = f.get("payload", {}).get("session", {})
        return (f.get("action") == "session.changed" and session.get("id") == sid
                and session.get("state") == state)
    return pred


def _is_tool_card(sid: str) -> Callable[[dict[str, Any]], bool]:
    def pred(f: dict[str, Any]) -> bool:
        message = f.get("payload", {}).get("message", {})
        return (f.get("action") == "session.message.added"
                and f["payload"].get("session_id") == sid
                and message.get("kind") == "tool_call")
    return pred


def _mock_agents() -> set[int]:
    """This process's children that run the mock agent (from /proc): the agent's
    launcher (protocols/leader.py), the leader of the agent's process group."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == os.getpid() and MOCK in cmdline:
            found.add(int(entry.name))
    return found


def _agent_stdout(group: int) -> int:
    """Our end of the mock agent's stdout pipe: the descriptor of this process
    that is the same pipe as the agent's descriptor 1 (from /proc)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            if os.getpgid(int(entry.name)) != group or cmdline[1:3] != [b"-m", MOCK]:
                continue
            pipe = os.readlink(entry / "fd" / "1")
        except OSError:
            continue
        for fd in Path("/proc/self/fd").iterdir():
            try:
                if os.readlink(fd) == pipe:
                    return int(fd.name)
            except OSError:
                continue
    raise RuntimeError(f"the mock agent's stdout was not found (process group {group})")


def _await_whole_answer(fd: int) -> None:
    """Block (the Trio thread too) until the agent has written its answer: the
    bytes waiting in its stdout stay the same for ``SETTLE_S``.  So the server
    reads the answer whole, as one read, however the agent's writes fall in
    time (Codex answers in three lines)."""
    deadline = time.monotonic() + 5
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        waiting = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
        if waiting != last:
            last, since = waiting, time.monotonic()
        elif waiting and time.monotonic() - since >= SETTLE_S:
            return
        time.sleep(0.002)
    raise RuntimeError("the agent wrote no answer to the cancel within 5 s")


async def _walk_once(client: _Client, sid: str, agent_group: int, dialect: str) -> Walk:
    start = len(client.frames)
    await client.call("message.add", {"session_id": sid, "content": PROMPT})
    await client.until(_is_state(sid, "RUNNING"), since=start)
    await client.until(_is_tool_card(sid), since=start)
    # Whatever the prompt's start set going (its writes, its notifications) is
    # over before the window opens: no task is runnable for 100 ms.
    await trio.testing.wait_all_tasks_blocked(cushion=0.1)
    walk = Walk(dialect)
    start = len(client.frames)
    recorder = _Recorder(walk, client.holds_answer)
    # The agent is stopped until the server has done all the cancel makes it do
    # before the agent's answer (the write, the notifications and their write,
    # the operation's first run): the mock agent answers within a millisecond,
    # often inside the outbox writer's two rounds, and the count would then
    # depend on which came first.  Real agents take longer.
    # Then the server reads the agent's answer only once all of it is written.
    stdout = _agent_stdout(agent_group)
    os.killpg(agent_group, signal.SIGSTOP)
    try:
        recorder.start()
        try:
            await client.send("agent.cancel", {"session_id": sid}, CANCEL_ID)
            await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        finally:
            os.killpg(agent_group, signal.SIGCONT)
        _await_whole_answer(stdout)
        answer = await client.until(lambda f: f.get("id") == CANCEL_ID, since=start)
    finally:
        recorder.stop()  # (the client has the answer: stopped at its write already)
    if answer["type"] != "response" or answer["payload"].get("success") is not True:
        raise RuntimeError(f"the cancel was not answered a success: {answer}")
    await client.until(_is_state(sid, "WAITING_FOR_INPUT"), since=start)
    return walk


async def measure(data_dir: Path, dialect: str, *, runs: int = 1,
                  attempts: int = 3) -> list[Walk]:
    """``runs`` walks of one cancel each, on one session of a real server in this
    process (each a new turn); a walk whose end was not seen at its write
    (``stopped_at_write``) is measured again, up to ``attempts`` times per run."""
    walks: list[Walk] = []
    async with running_server(data_dir, trace_cancels=False) as srv, _client(srv) as client:
        task = await client.call("task.create", {"title": "cancel walk"})
        before = _mock_agents()
        session = await client.call("session.launch", {"task_id": task["id"],
                                                       "agent": DIALECTS[dialect]})
        sid = session["id"]
        (leader,) = _mock_agents() - before
        agent_group = os.getpgid(leader)
        await client.call("session.subscribe", {"session_id": sid})
        for _ in range(runs):
            for _ in range(attempts):
                walk = await _walk_once(client, sid, agent_group, dialect)
                if walk.stopped_at_write:
                    break
            walks.append(walk)
    return walks
