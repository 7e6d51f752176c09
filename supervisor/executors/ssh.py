"""The ssh executor: each session's agent behind a ``turnvisor agentctl`` on an
SSH host, reached through a forwarded unix socket over one shared connection.

Per execution (``launch_ssh``)::

    connect  the host's shared connection (ssh_host.SshHost: host key checked)
    start    ``REMOTE_TURNVISOR agentctl --detach INSTANCE/SESSION ... -- COMMAND``
             on the host: the token and the profile's environment go over
             ssh's stdin (never on a command line, so ``ps`` on neither host
             shows them); agentctl runs detached (its own session: a dropped
             connection does not stop it) on a unix socket in a 0700 directory
             of the host's data dir (web/agentctl/detached.py), and answers
             where it listens
    forward  a local unix socket (0700 directory under the data dir) to that
             one, over the shared connection (``ssh -O forward``)
    connect  an AgentctlAdapter over the local socket, exactly as the agentctl
             executor connects (same cancel path, join window, escalation)
    teardown close the adapter; ``turnvisor hosts stop`` on the host (SIGTERM:
             agentctl stops its agent; SIGKILL of its group after a grace),
             the forward cancelled; shielded, bounded

A lost connection (the shared connection gone, or the host not answering) is
waited out, not taken for a crashed agent: the link re-opens its event stream
through the local socket by itself (``AgentctlLink(reconnect=True)``: down and
up through its ``reachable`` signal, a cancel meanwhile held and sent first on
its return), and ``ssh_host.keep_forwarded`` brings the shared connection
back and forwards the socket again; the host's agentctl, detached, runs on
meanwhile.
A session whose execution ended while its host was unreachable leaves that
agentctl running: its next start finds it (same run name) and re-attaches by
owner.

A backend restart (DESIGN.md §20) is waited out as with ``agentctl_url``: at
shutdown a session whose turn runs is handed over (``LaunchedAgent.handover``:
its host's agentctl is left running, only the forward and the link closed),
and the next backend takes the turn over (same run name, re-attached by owner,
``TurnHandover``).  The run's token is derived from a key in the data dir
(``RUN_KEY``, 0600; the data dir is hidden from every agent), so a later
backend of the same data dir presents the same one.  A session's own end (and
its deletion) still stops its host's agentctl.  What each run was started
from is recorded in the data dir (``LAUNCH_RECORDS``, launch_record.py) and
compared at a re-attach: a profile changed since is said, the run kept.
At start ``sweep_ssh`` stops the runs of this data dir whose session no
longer exists (deleted, or not in the store), as leftover local agent groups
are; another data dir's are not ours.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import trio

from ..config import Config
from ..models import Session
from ..profiles import AgentProfile
from ..ssh_target import SshTarget
from .agentctl_adapter import AgentctlAdapter
from .agentctl_strays import AgentctlStrays
from .base import LaunchedAgent, TurnHandover
from .container import backend_instance
from .launch_record import SSH_FIELDS, RecordFiles, changed, record
from .ssh_host import SshHost, control_dir, keep_forwarded, ssh_error

__all__ = ["SshHosts", "launch_ssh", "sweep_ssh"]

log = logging.getLogger(__name__)

_RUN_SEGMENT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: The key each run's token is derived from, in the data dir.
RUN_KEY: Final = "ssh-run.key"
#: What each run was started from (launch_record.py), in the data dir.
LAUNCH_RECORDS: Final = "ssh-launch"


@dataclass(eq=False)
class SshHosts:
    """This backend's SSH hosts (one shared connection each) and the key of the
    tokens of the agentctls it starts on them (the same for a later backend of
    this data dir: it re-attaches to them after a restart)."""

    config: Config
    hosts: dict[str, SshHost] = field(default_factory=dict)
    _key: bytes | None = None

    def host(self, target: SshTarget) -> SshHost:
        host = self.hosts.get(target.key)
        if host is None:
            host = SshHost(target, control_dir(self.config.data_dir),
                           connect_s=self.config.timeouts.agentctl_connect_s)
            self.hosts[target.key] = host
        return host

    async def token(self, name: str) -> str:
        """Run ``name``'s token: an HMAC of its name under the data dir's key."""
        if self._key is None:
            self._key = await trio.to_thread.run_sync(_run_key, self.config.data_dir / RUN_KEY)
        return hmac.new(self._key, name.encode(), hashlib.sha256).hexdigest()


def _run_key(path: Path) -> bytes:
    """The data dir's run key, made (0600, 32 random bytes) on first use."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        key = path.read_bytes()
        if len(key) < 32 or path.is_symlink():
            raise OSError(f"{path}: not a run key of this data dir (remove it)") from None
        return key
    key = secrets.token_bytes(32)
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    return key


class _Handover:
    """The adapter's ``TurnHandover``, noting whether shutdown handed the turn
    over (then the host's agentctl is left running for the next backend)."""

    def __init__(self, adapter: AgentctlAdapter) -> None:
        self.adapter = adapter
        self.detached = False

    def bind_turn(self, turn_id: str) -> None:
        self.adapter.bind_turn(turn_id)

    def take(self, count: int) -> int | None:
        return self.adapter.take(count)

    def adopt(self, turn_id: str, after: int) -> None:
        self.adapter.adopt(turn_id, after)

    async def settle_adoption(self) -> bool:
        return await self.adapter.settle_adoption()

    def detach(self) -> None:
        self.detached = True
        self.adapter.detach()


def run_name(config: Config, owner: str | None) -> str:
    """``INSTANCE/SESSION``: the host's run directory for this backend's session."""
    session = owner or secrets.token_hex(8)
    if not _RUN_SEGMENT.fullmatch(session):
        session = hashlib.sha256(session.encode()).hexdigest()[:32]
    return f"{backend_instance(config)}/{session}"


def _agentctl_args(config: Config, profile: AgentProfile, cwd: str, name: str) -> list[str]:
    """``agentctl`` on the host: its own sandbox (§17 on that host), the
    profile's settings; the private home is the host's own."""
    return ["agentctl", "--detach", name, "--protocol", profile.protocol, "--cwd", cwd,
            "--cancel-join", f"{config.timeouts.cancel_join_s:g}",
            *(["--sandbox", profile.sandbox] if profile.sandbox else []),
            *(a for p in profile.sandbox_writable for a in ("--sandbox-writable", p)),
            *(a for name in profile.env for a in ("--profile-env", name)),
            *(["--network", profile.network] if profile.network else []),
            *(a for port in profile.host_ports for a in ("--host-port", str(port))),
            *(a for rel, rw in profile.home_binds
              for a in ("--home-bind", f"~/{rel}" + ("" if rw else ":ro"))),
            "--", *profile.command]


async def start_remote(host: SshHost, config: Config, profile: AgentProfile, cwd: str,
                       name: str, token: str) -> tuple[str, bool]:
    """Start (or find) the host's agentctl for run ``name``: its socket on the
    host, and whether it was already running (re-attached)."""
    assert profile.ssh is not None
    secret = json.dumps({"token": token, "env": dict(profile.env)}).encode() + b"\n"
    done = await host.run([*profile.ssh.remote_turnvisor,
                           *_agentctl_args(config, profile, cwd, name)],
                          stdin=secret, timeout_s=config.timeouts.agent_start_s
                          + config.timeouts.agentctl_connect_s)
    if done.returncode == 255:
        raise OSError(ssh_error(profile.ssh, done.stderr, done.returncode))
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    try:
        answer = json.loads(lines[-1])
        socket, attached = str(answer["socket"]), bool(answer["attached"])
    except (IndexError, ValueError, KeyError, TypeError):
        detail = done.stderr.decode(errors="replace").strip()[-1500:]
        if done.returncode == 127:
            detail = (f"{' '.join(profile.ssh.remote_turnvisor)} is not found on the host "
                      "(turnvisor hosts check says what is missing)")
        raise OSError(f"profile {profile.name!r}: agentctl did not start on {profile.ssh} "
                      f"(exit status {done.returncode}): {detail}") from None
    return socket, attached


async def stop_remote(host: SshHost, target: SshTarget, name: str, *, timeout_s: float) -> bool:
    """``hosts stop NAME`` on the host; whether it is stopped (or was gone)."""
    done = await host.run([*target.remote_turnvisor, "hosts", "stop", name],
                          timeout_s=timeout_s)
    if done.returncode != 0:
        log.warning("%s: stopping agentctl %s failed: %s", target, name,
                    ssh_error(target, done.stderr, done.returncode))
    return done.returncode == 0


@asynccontextmanager
async def launch_ssh(hosts: SshHosts, profile: AgentProfile, cwd: str, *,
                     owner: str | None) -> AsyncIterator[LaunchedAgent]:
    """The executor for ``executor = "ssh"`` profiles (module doc)."""
    config, t = hosts.config, hosts.config.timeouts
    target = profile.ssh
    if target is None:
        raise OSError(f"profile {profile.name!r}: executor = \"ssh\" without ssh = \"user@host\"")
    host = hosts.host(target)
    await host.ensure_master()
    name = run_name(config, owner)
    token = await hosts.token(name)
    remote, attached = await start_remote(host, config, profile, cwd, name, token)
    records = RecordFiles(config.data_dir / LAUNCH_RECORDS)
    drift: tuple[str, ...] = ()
    if attached:
        log.info("ssh: re-attaching to agentctl %s on %s", name, target)
        # It runs on as it was started (a restart never kills a turn), but a
        # profile changed since is said (DESIGN.md §20).
        drift = changed(await trio.to_thread.run_sync(records.load, name), profile,
                        SSH_FIELDS)
        if drift:
            log.warning("ssh: agentctl %s on %s was started from another %s of profile %r",
                        name, target, ", ".join(drift), profile.name)
    else:
        await trio.to_thread.run_sync(records.save, name, record(profile, SSH_FIELDS))
    local = host.sockets / f"f-{hashlib.sha256(name.encode()).hexdigest()[:16]}.sock"
    handover: _Handover | None = None
    try:
        # A master a killed backend left may still hold this very forward (its
        # socket file then unlinked by ``forward``): it is dropped first.
        await host.cancel_forward(local, remote)
        await host.forward(local, remote)
        # Reached over a network: a cut is waited out (the link re-opens its
        # stream through the local socket, which ``keep_forwarded`` brings back).
        adapter = AgentctlAdapter("http://agentctl", token, owner=owner, session_cwd=cwd,
                                  protocol=profile.protocol, timeouts=t, uds=str(local),
                                  reconnect=True)
        handover = _Handover(adapter)
        given: TurnHandover = handover
        try:
            async with trio.open_nursery() as keeper:
                keeper.start_soon(keep_forwarded, host, [(local, remote)], adapter.connection)
                try:
                    yield LaunchedAgent(adapter=adapter, handover=given,
                                        strays=AgentctlStrays(adapter.connection),
                                        profile_changed=drift)
                finally:
                    keeper.cancel_scope.cancel()
        finally:
            await adapter.aclose()
    finally:
        handed_over = handover is not None and handover.detached
        with trio.CancelScope(shield=True), \
                trio.move_on_after(t.term_grace_s + t.agent_request_s + t.agentctl_connect_s) \
                as scope:
            if handed_over:
                log.info("ssh: agentctl %s on %s left running for the next backend", name,
                         target)
            else:
                try:
                    await host.ensure_master()
                    if await stop_remote(host, target, name,
                                         timeout_s=t.term_grace_s + t.agent_request_s):
                        await trio.to_thread.run_sync(records.forget, name)
                except OSError as exc:
                    log.warning("ssh: agentctl %s on %s not stopped (%s); it runs on for the "
                                "session's next start, or the backend's next start sweeps it "
                                "once the session is gone", name, target, exc)
            await host.cancel_forward(local, remote)
        if scope.cancelled_caught:
            log.warning("ssh: agentctl %s on %s: not stopped in time (the next start sweeps "
                        "it once its session is gone)", name, target)


async def sweep_ssh(config: Config,
                    sessions: Callable[[], Awaitable[Iterable[Session]]] | None = None,
                    hosts: SshHosts | None = None) -> int:
    """Stop what a previous backend of this data dir left on each ssh profile's
    host (its instance's run directories) but the runs of ``sessions`` (those
    the store still has: the next backend re-attaches to them); an unreachable
    host is logged, not fatal.  Returns how many agentctls were stopped."""
    targets = {p.ssh.key: p.ssh for p in config.profiles.values()
               if p.executor == "ssh" and p.ssh is not None}
    if not targets:
        return 0
    ssh_profiles = {n for n, p in config.profiles.items() if p.executor == "ssh"}
    # The names kept go over stdin (``--keep -``): a command line has a bound.
    keep = "".join(f"{run_name(config, s.id)}\n" for s in (await sessions() if sessions
                                                           else ()) if s.agent in ssh_profiles)
    hosts = hosts or SshHosts(config)
    records = RecordFiles(config.data_dir / LAUNCH_RECORDS)
    t = config.timeouts
    stopped = 0
    for target in targets.values():
        host = hosts.host(target)
        with trio.move_on_after(t.agent_start_s) as scope:
            try:
                await host.ensure_master()
                done = await host.run([*target.remote_turnvisor, "hosts", "sweep",
                                       backend_instance(config), "--keep", "-"],
                                      stdin=keep.encode(), timeout_s=t.agent_start_s)
            except OSError as exc:
                log.warning("startup sweep of %s skipped: %s", target, exc)
                continue
            if done.returncode != 0:
                log.warning("startup sweep of %s failed: %s", target,
                            ssh_error(target, done.stderr, done.returncode))
                continue
            for line in done.stdout.decode(errors="replace").split():
                log.warning("startup sweep: stopped agentctl %s on %s", line, target)
                await trio.to_thread.run_sync(records.forget, line)
                stopped += 1
        if scope.cancelled_caught:
            log.warning("startup sweep of %s: not done within %gs", target, t.agent_start_s)
    return stopped
