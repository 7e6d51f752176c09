"""Real agent CLIs in the cancel-latency benchmark (``--agent codex|auggie|claude|gemini|
codex-acp|codex-acp2``; the last two are codex-acp 2.x held to ACP 1 and ACP 2).

What ``bench.cancel_latency`` needs to measure a real agent instead of the mock
one, built from the same pieces as the tests (``tests/agents/homes.py``,
``tests/fake_provider``; nothing copied):

- ``real_setup``: the fake model provider on 127.0.0.1 (40 tokens, 200 ms
  apart) and, per agent, a throw-away home pointing the CLI at it, rendered as
  the server's ``turnvisor.toml`` (``[agents.NAME]`` overriding the built-in
  profile) and the environment to start the server with;
- ``RealTurn``: the end-to-end sample's turn: the ``SLOW`` prompt, "first
  output" = the first streamed model token reached the client, and the time
  from the ``agent.cancel`` frame to the end of the upstream HTTP stream;
- ``open_real_floor``: floor (a) for a real agent, the same CLI (another home,
  same provider) driven over its pipes by ``protocols.adapters`` in the bench
  process: cancel written → ``prompt()`` returns ``cancelled``;
- ``decline_permissions``: Auggie asks about workspace indexing right after
  ``session/new``; the benchmark declines it over the WebSocket, as a person
  would from the card.

The agents reach nothing but the provider: every CLI's config points at
127.0.0.1 and the network features that would call out at start are off.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from protocols.adapters import AcpVersion, make_adapter
from protocols.events import MessageChunk, PermissionRequested, TurnEnded
from protocols.process import start_agent_process, terminate_group
from supervisor.profiles import BUILTIN_PROFILES
from tests.agents.cli import AGENTS_DIR, find_cli
from tests.agents.harness import assert_gone, descendants
from tests.agents.homes import AGENT_NAMES, agents_toml, launch, profile_table, server_environ
from tests.fake_provider import FakeProvider
from tests.support.ws import WsClient

__all__ = [
    "REAL_AGENTS",
    "RealFloor",
    "RealSetup",
    "RealTurn",
    "decline_permissions",
    "missing",
    "not_installed_message",
    "open_real_floor",
    "protocol_of",
    "real_setup",
]

#: codex-acp 2.x speaks ACP 1 and 2: measured in each, as two profiles of one CLI.
ACP_VERSIONS: dict[str, AcpVersion] = {"codex-acp": 1, "codex-acp2": 2}
REAL_AGENTS: tuple[str, ...] = (*AGENT_NAMES, *ACP_VERSIONS)
SLOW_PROMPT = "SLOW: stream many tokens"
TOKENS = 40
INTERVAL_S = 0.2
#: A streamed model token (the fake provider's text is "tok0 tok1 ...").
_TOKEN = re.compile(r"\btok\d+ ")
Frame = dict[str, Any]


def missing(agents: Sequence[str]) -> list[str]:
    """The real agents among ``agents`` whose CLI is not installed."""
    return [a for a in agents if a in REAL_AGENTS and find_cli(_cli(a)) is None]


def protocol_of(name: str) -> str:
    """The wire protocol family of a bench profile (``acp`` or ``codex``)."""
    return BUILTIN_PROFILES[_cli(name)].protocol


def _cli(name: str) -> str:
    """The installed CLI a bench profile runs."""
    return "codex-acp" if name in ACP_VERSIONS else name


def not_installed_message(names: Sequence[str]) -> str:
    return (f"agent CLI(s) not installed in {AGENTS_DIR}: {', '.join(names)} "
            "(run scripts/install_agents.sh)")


@dataclass
class RealSetup:
    provider: FakeProvider
    tmp: Path
    #: The server data dir's turnvisor.toml.
    config_toml: str
    #: The server's environment (agents get their profile's env merged over it).
    server_env: dict[str, str]


@contextmanager
def real_setup(agents: Sequence[str]) -> Iterator[RealSetup]:
    """The fake provider, and the profiles of the real agents among ``agents``."""
    with FakeProvider(token_interval_s=INTERVAL_S, n_tokens=TOKENS, wait_s=30.0) as provider, \
            tempfile.TemporaryDirectory(prefix="turnvisor-bench-agents-") as d:
        tmp = Path(d)
        tables: dict[str, dict[str, Any]] = {}
        server_env = dict(os.environ)
        for name in agents:
            if name not in REAL_AGENTS:
                continue
            spec = launch(_cli(name), provider.url, tmp / "server" / name)
            if spec is None:
                raise RuntimeError(not_installed_message([name]))
            server_env = server_environ(spec)
            tables[name] = profile_table(spec, server_env)
            if name in ACP_VERSIONS:
                tables[name] |= {"protocol": "acp", "acp_version": ACP_VERSIONS[name]}
        yield RealSetup(provider, tmp, agents_toml(tables), server_env)


# -- end to end -----------------------------------------------------------------------

def is_streamed_token(session_id: str) -> Callable[[Frame], bool]:
    def pred(f: Frame) -> bool:
        p = f.get("payload") or {}
        msg = p.get("message") or {}
        return (f.get("action") in ("session.message.added", "session.message.updated")
                and p.get("session_id") == session_id and msg.get("role") == "agent"
                and msg.get("kind") == "text" and bool(_TOKEN.search(msg.get("content", ""))))
    return pred


async def _streams_closed(provider: FakeProvider, ids: set[int], within: float) -> list[float]:
    """When each of the streams ``ids`` ended (time.monotonic), once all have."""
    with trio.fail_after(within):
        while True:
            recs = [r for r in provider.snapshot() if r.id in ids]
            if all(r.ended is not None for r in recs):
                return [r.ended for r in recs if r.ended is not None]
            await trio.sleep(0.005)


@dataclass
class RealTurn:
    """The turn of one end-to-end sample on a real agent."""

    provider: FakeProvider
    prompt: str = SLOW_PROMPT
    _open: set[int] = field(default_factory=set)
    _t0: float = 0.0

    def first_output(self, session_id: str) -> Callable[[Frame], bool]:
        return is_streamed_token(session_id)

    def before_cancel(self) -> None:
        """Just before the ``agent.cancel`` frame is written."""
        self._open = {r.id for r in self.provider.main_streams() if r.open}
        self._t0 = time.monotonic()

    async def after_cancel(self) -> dict[str, float]:
        """Once the cancel settled: ms from the cancel to the end of the model stream."""
        if not self._open:
            return {"upstream_closed": math.nan}
        ended = await _streams_closed(self.provider, self._open, 10.0)
        return {"upstream_closed": round((max(ended) - self._t0) * 1000, 3)}


def _decline_option(options: Sequence[Any], kind_of: Callable[[Any], str],
                    id_of: Callable[[Any], str]) -> str | None:
    for kind in ("reject_once", "reject_always"):
        for o in options:
            if kind_of(o) == kind:
                return id_of(o)
    return None


async def decline_permissions(conn: WsClient, session_id: str) -> None:
    """Run for the session's life: decline every permission request over the WS."""
    answered: set[str] = set()

    async def answer(request_id: str, options: list[dict[str, Any]]) -> None:
        if request_id in answered:
            return
        answered.add(request_id)
        choice = _decline_option(options, lambda o: o["kind"], lambda o: o["option_id"])
        body: dict[str, Any] = {"session_id": session_id, "request_id": request_id}
        body.update({"cancelled": True} if choice is None else {"option_id": choice})
        await conn.call("permission.respond", body)

    def asked(f: Frame) -> bool:
        return (f.get("action") == "session.permission.requested"
                and (f.get("payload") or {}).get("session_id") == session_id)

    while True:
        watch = conn.watch(asked)
        # Asked before this connection subscribed: the page would show the card.
        listed = await conn.call("message.list", {"session_id": session_id})
        for m in listed["messages"]:
            if m["kind"] == "permission" and m["metadata"].get("status") == "pending":
                await answer(m["metadata"]["request_id"], m["metadata"]["options"])
        await watch.done.wait()
        assert watch.frame is not None
        p = watch.frame["payload"]
        await answer(p["request_id"], p["options"])


# -- floor (a): the same CLI over its pipes ---------------------------------------------

class RealFloor:
    """One real agent driven through ``protocols.adapters`` in the bench process."""

    def __init__(self, name: str, adapter: Any, provider: FakeProvider) -> None:
        self.name = name
        self.adapter = adapter
        self.provider = provider
        #: Per sample: ms from the cancel to the end of the model stream.
        self.upstream_ms: list[float] = []
        self._token = trio.Event()
        self._turn_ended = trio.Event()

    async def drain_events(self) -> None:
        async for ev in self.adapter.events:
            if isinstance(ev, MessageChunk) and ev.channel == "agent" \
                    and _TOKEN.search(ev.text):
                self._token.set()
            elif isinstance(ev, TurnEnded):
                self._turn_ended.set()
            elif isinstance(ev, PermissionRequested):
                await self.adapter.respond_permission(ev.request_id, _decline_option(
                    ev.options, lambda o: o.kind, lambda o: o.option_id))

    async def sample(self) -> float:
        """One cancel after the first streamed token, in milliseconds."""
        self._token = trio.Event()
        self._turn_ended = trio.Event()
        result: list[tuple[float, TurnEnded]] = []

        async def prompt() -> None:
            ended = await self.adapter.prompt(SLOW_PROMPT)
            result.append((time.perf_counter(), ended))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            with trio.fail_after(60):
                await self._token.wait()
            open_ids = {r.id for r in self.provider.main_streams() if r.open}
            t_mono = time.monotonic()
            t0 = time.perf_counter()
            await self.adapter.cancel()
        with trio.fail_after(10):
            await self._turn_ended.wait()
        ended_at, ended = result[0]
        if ended.stop_reason != "cancelled":
            raise RuntimeError(f"{self.name}: the turn ended {ended.stop_reason!r}, not cancelled")
        if open_ids:
            closed = await _streams_closed(self.provider, open_ids, 10.0)
            self.upstream_ms.append(round((max(closed) - t_mono) * 1000, 3))
        else:
            self.upstream_ms.append(math.nan)
        return (ended_at - t0) * 1000


async def _drain(stream: trio.abc.ReceiveStream) -> None:
    try:
        while await stream.receive_some(65536):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


@asynccontextmanager
async def open_real_floor(name: str, setup: RealSetup) -> AsyncIterator[RealFloor]:
    """The CLI started (its own home, the shared provider), initialized, with a session;
    on exit its process group is torn down and checked gone."""
    spec = launch(_cli(name), setup.provider.url, setup.tmp / "floor" / name)
    if spec is None:
        raise RuntimeError(not_installed_message([name]))
    proc = await start_agent_process(spec.command, env=spec.env, cwd=spec.cwd)
    seen: set[int] = set()
    try:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        profile = BUILTIN_PROFILES[_cli(name)]
        adapter = make_adapter(profile.protocol, proc.stdin, proc.stdout,
                               thread_params=dict(spec.thread_params),
                               acp_version=ACP_VERSIONS.get(name, profile.acp_version))
        floor = RealFloor(name, adapter, setup.provider)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(adapter.connection.run)
            nursery.start_soon(floor.drain_events)
            nursery.start_soon(_drain, proc.stderr)
            with trio.fail_after(60):
                await adapter.initialize()
                await adapter.new_session(spec.cwd)
            seen |= descendants(proc.pid)
            yield floor
            seen |= descendants(proc.pid)
            nursery.cancel_scope.cancel()
    finally:
        seen |= descendants(proc.pid)
        with trio.CancelScope(shield=True):
            await terminate_group(proc, grace_s=2.0)
            await assert_gone(proc.pid, seen | {proc.pid})
