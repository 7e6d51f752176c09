"""The container executor: each execution's agent behind its own agentctl, in
its own container, on a Docker-API engine (Podman or Docker; ``engine_api``).

Per execution (``launch_container``)::

    create   image = the profile's (scripts/build_agent_image.sh), entrypoint
             ``turnvisor agentctl``; labels: backend instance + session id;
             CPU / memory / pids limits from the profile; a fresh agentctl token
             in the environment (never in argv); the session's working
             directory bind-mounted at the same path; agentctl's port
             published on the engine host's loopback (a local engine)
    start    then poll agentctl's /health on the published port (bounded by
             Timeouts.agent_start_s; a container that exits first is reported
             with the tail of its log)
    connect  an AgentctlAdapter, exactly as the agentctl executor connects
             (same cancel path, the lifecycle's join window and escalation)
    teardown close the adapter; stop (SIGTERM to agentctl, which stops its
             agent; SIGKILL after term_grace_s) and remove the container,
             shielded, bounded

agentctl is the container's PID 1, not an init: the engine passes the token in
the environment of PID 1, and the agent (root in the same PID namespace) could
read an init's ``/proc/1/environ``.  agentctl makes itself non-dumpable, which
hides its environment from processes without CAP_SYS_PTRACE (which containers
lack), strips the token from the agent's environment, handles SIGTERM itself
(stop is prompt), and its launcher reaps orphaned descendants.

An engine on another host (``ssh://``, as ``DOCKER_HOST`` or the profile's
``docker_host``; ssh_engine.py) is reached through a local socket forwarded
over SSH, and so is the container's agentctl: published on that host's
loopback, forwarded to a local unix socket over the same connection.

``sweep_containers`` is the container version of the process-group sweep: at
startup, containers labelled with this backend instance's id are removed
(on each engine the container profiles name).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
import shlex
import socket
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from importlib import metadata
from typing import Final

import httpx
import trio

from protocols.agentctl_wire import TOKEN_ENV

from ..config import Config
from ..profiles import AgentProfile
from .agentctl_adapter import AgentctlAdapter
from .agentctl_strays import AgentctlStrays
from .base import LaunchedAgent
from .engine_api import ContainerSpec, EngineAddress, EngineClient, EngineError
from .ssh_engine import Reached, profile_engine, reach_engine
from .ssh_host import keep_forwarded

__all__ = [
    "AGENTCTL_PORT",
    "LABEL_BACKEND",
    "LABEL_SESSION",
    "backend_instance",
    "default_image",
    "launch_container",
    "sweep_containers",
]

log = logging.getLogger(__name__)

LABEL_BACKEND: Final = "io.turnvisor.backend"
LABEL_SESSION: Final = "io.turnvisor.session"
#: agentctl's port inside the container.
AGENTCTL_PORT: Final = 8765
IMAGE_NAME: Final = "localhost/turnvisor-agent"
#: The agent's open-file and process limits.  Set explicitly: engines default to
#: values above what an unprivileged-capability host lets runc set (the
#: container's pids limit is the profile's ``pids``).
_ULIMITS: Final = {"nofile": (16384, 16384), "nproc": (32768, 32768)}
_HEALTH_POLL_S: Final = 0.05


def default_image() -> str:
    """The image scripts/build_agent_image.sh tags with this Turnvisor's version."""
    try:
        version = metadata.version("turnvisor")
    except metadata.PackageNotFoundError:
        version = "latest"
    return f"{IMAGE_NAME}:{version}"


def backend_instance(config: Config) -> str:
    """This backend's id on the engine: stable across restarts (host + data dir),
    distinct for two backends sharing an engine."""
    key = f"{socket.gethostname()}:{config.data_dir.resolve()}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def container_spec(config: Config, profile: AgentProfile, cwd: str, token: str, *,
                   owner: str | None, publish_ip: str) -> ContainerSpec:
    return ContainerSpec(
        image=profile.image or default_image(),
        cmd=["--listen", f"0.0.0.0:{AGENTCTL_PORT}", "--protocol", profile.protocol,
             "--cwd", cwd, "--cancel-join", f"{config.timeouts.cancel_join_s:g}",
             "--", *profile.command],
        env={**profile.env, TOKEN_ENV: token},
        labels={LABEL_BACKEND: backend_instance(config), LABEL_SESSION: owner or "",
                "io.turnvisor.profile": profile.name},
        binds={cwd: cwd}, working_dir=cwd, port=AGENTCTL_PORT, publish_ip=publish_ip,
        cpus=profile.cpus, memory_bytes=profile.memory, pids=profile.pids,
        ulimits=_ULIMITS)


@asynccontextmanager
async def launch_container(config: Config, profile: AgentProfile, cwd: str, *,
                           owner: str | None) -> AsyncIterator[LaunchedAgent]:
    """The executor for ``executor = "container"`` profiles (module doc)."""
    try:
        async with reach_engine(config, profile) as reached, \
                _launch(config, profile, cwd, owner, reached) as agent:
            yield agent
    except EngineError as exc:
        raise OSError(f"profile {profile.name!r}: {exc}") from None


@asynccontextmanager
async def _launch(config: Config, profile: AgentProfile, cwd: str, owner: str | None,
                  reached: Reached) -> AsyncIterator[LaunchedAgent]:
    t = config.timeouts
    address = reached.address
    token = secrets.token_urlsafe(32)
    # A TCP engine publishes on all its interfaces (its loopback is not ours); an
    # engine over SSH on its loopback, forwarded here.
    spec = container_spec(config, profile, cwd, token, owner=owner,
                          publish_ip="127.0.0.1" if address.local else "0.0.0.0")
    async with EngineClient(address, timeout_s=t.agent_start_s) as engine:
        name = f"turnvisor-{(owner or 'x')[:12]}-{secrets.token_hex(3)}"
        try:
            cid = await engine.create(spec, name=name)
        except EngineError as exc:
            hint = ""
            with contextlib.suppress(EngineError):  # (the create's error says enough)
                if exc.status == 404 and not await engine.has_image(spec.image):
                    hint = f"; {missing_image_hint(config, profile, reached.wanted)}"
            raise OSError(f"profile {profile.name!r}: cannot create a container of "
                          f"{spec.image} on {reached.wanted}: {exc}{hint}") from None
        try:
            url, uds = await _start(engine, cid, reached, t.agent_start_s)
            # Over SSH a cut is waited out, not taken for a crash: the link
            # re-connects, the forwards are brought back meanwhile.
            adapter = AgentctlAdapter(url, token, owner=owner, session_cwd=cwd,
                                      protocol=profile.protocol,
                                      timeouts=t, uds=uds, reconnect=reached.remote)
            try:
                async with trio.open_nursery() as keeper:
                    if reached.host is not None:
                        keeper.start_soon(keep_forwarded, reached.host, reached.forwards,
                                          adapter.connection)
                    try:
                        # agentctl (the container's PID 1) scans its agent's group.
                        yield LaunchedAgent(adapter=adapter,
                                            strays=AgentctlStrays(adapter.connection))
                    finally:
                        keeper.cancel_scope.cancel()
            finally:
                await adapter.aclose()
        finally:
            with trio.CancelScope(shield=True), \
                    trio.move_on_after(t.term_grace_s + t.agent_request_s
                                       + t.agentctl_connect_s) as scope:
                await reached.refresh()
                await _discard(engine, cid, grace_s=t.term_grace_s)
            if scope.cancelled_caught:
                log.warning("container %s: not removed within %gs (the startup sweep will)",
                            cid[:12], t.term_grace_s + t.agent_request_s
                            + t.agentctl_connect_s)


def missing_image_hint(config: Config, profile: AgentProfile, address: EngineAddress) -> str:
    """What puts the profile's image on its engine (``address``): the one
    command (web/images_cli.py) for an engine over ssh."""
    if address.kind == "ssh":
        return (f"the engine does not have the image: put it there with `turnvisor images "
                f"load --profile {shlex.quote(profile.name)} --data-dir "
                f"{shlex.quote(str(config.data_dir))}` (it sends the image from this "
                "machine's engine; build it here first with scripts/build_agent_image.sh)")
    return ("the engine does not have the image: build it with scripts/build_agent_image.sh, "
            "or name another image in the profile")


async def _start(engine: EngineClient, cid: str, reached: Reached,
                 start_s: float) -> tuple[str, str | None]:
    """Start the container; agentctl's URL (and the local socket that reaches it,
    for an engine over SSH) once its /health answers."""
    with trio.move_on_after(start_s):
        try:
            await engine.start(cid)
        except EngineError as exc:
            raise OSError(f"container {cid[:12]} did not start: {exc}") from None
        info = await engine.inspect(cid)
        port = info.ports.get(f"{AGENTCTL_PORT}/tcp")
        if port is None:
            raise OSError(f"container {cid[:12]}: the engine published no port for agentctl")
        url, uds = f"http://{reached.address.host}:{port}", None
        if reached.remote:
            url, uds = "http://agentctl", str(await reached.forward_port(port))
        async with httpx.AsyncClient(
                timeout=httpx.Timeout(2.0),
                transport=httpx.AsyncHTTPTransport(uds=uds) if uds else None) as http:
            while True:
                try:
                    resp = await http.get(url + "/api/v1/health")
                    if resp.status_code == 200:
                        return url, uds
                except httpx.HTTPError:
                    pass
                info = await engine.inspect(cid)
                if not info.running:
                    tail = await engine.logs(cid)
                    raise OSError(f"container {cid[:12]} exited (status {info.exit_code}) "
                                  f"before agentctl answered:\n{tail.strip()}")
                await trio.sleep(_HEALTH_POLL_S)
    raise OSError(f"container {cid[:12]}: agentctl did not answer within {start_s:g}s")


async def _discard(engine: EngineClient, cid: str, *, grace_s: float) -> None:
    try:
        await engine.stop(cid, grace_s=grace_s)
    except EngineError as exc:
        if exc.status not in (404, 304):
            log.warning("container %s: stop failed: %s", cid[:12], exc)
    try:
        await engine.remove(cid, force=True)
    except EngineError as exc:
        log.warning("container %s: remove failed: %s", cid[:12], exc)


async def sweep_containers(config: Config, *, live: Collection[str] = ()) -> int:
    """Remove this backend's labelled containers whose session is not in ``live``
    (at startup: all of them).  Without a container profile, nothing is done and
    no engine is contacted; an unreachable engine is logged, not fatal.  Returns
    how many were removed."""
    # One sweep per engine (the first profile naming it lends its ssh keys).
    engines: dict[str, AgentProfile] = {}
    for profile in config.profiles.values():
        if profile.executor == "container":
            engines.setdefault(profile.docker_host or "", profile)
    t = config.timeouts
    removed = 0
    for profile in engines.values():
        with trio.move_on_after(t.agent_start_s) as scope:
            try:
                address = profile_engine(profile)
                async with reach_engine(config, profile, address) as reached, \
                        EngineClient(reached.address, timeout_s=t.agent_request_s) as engine:
                    for c in await engine.list({LABEL_BACKEND: backend_instance(config)}):
                        if c.labels.get(LABEL_SESSION) in live:
                            continue
                        await engine.remove(c.id, force=True)
                        removed += 1
                        log.info("startup sweep: removed container %s (session %s) on %s",
                                 c.name, c.labels.get(LABEL_SESSION), address)
            except EngineError as exc:
                log.warning("startup sweep of containers skipped: %s", exc)
        if scope.cancelled_caught:
            log.warning("startup sweep of containers: not done within %gs", t.agent_start_s)
    return removed
