"""The kubernetes executor: each session's agent behind its own agentctl, in a Pod.

Per execution (``launch_kube``)::

    find     the session's Pod a previous backend left (labels: this
             Turnvisor, the session), ready, with its Secret: re-attached
             to (its token read from the Secret), nothing created; its
             ``turnvisor.launch`` annotation compared with the profile now
             (launch_record.py: the settings changed since are said)
    create   else a Secret with a fresh agentctl token, then the Pod (kube_pod.py):
             the container executor's image running agentctl, labelled
             ``turnvisor.workspace`` (this Turnvisor) and ``turnvisor.session``
    ready    watch the Pod until its readiness probe (agentctl's /health)
             passes, bounded by Timeouts.agent_start_s; a Pod that never gets
             there fails the start with its events and its containers'
             waiting reasons, and is deleted
    connect  an AgentctlAdapter through the API server's Pod proxy
             (``.../pods/NAME:8765/proxy``; ``Route``: the cluster's credential
             in Authorization, agentctl's token in its own header), the same
             cancel path as every agentctl; the link re-connects through the
             proxy after a cut (reachable, a held cancel: DESIGN.md §20)
    teardown close the adapter; delete the Pod (grace: term_grace_s; agentctl
             stops its agent on SIGTERM) and its Secret, shielded, bounded —
             unless the backend, stopping, handed the running turn over
             (``TurnHandover.detach``: ``AgentctlAdapter.left``): then the Pod
             runs on with its turn for the next backend to take over, as an
             agentctl at a configured URL does (a SIGKILLed backend leaves
             every Pod: each is re-attached at its session's next start)

``sweep_kube`` is the startup sweep: this Turnvisor's labelled Pods and
Secrets in each kubernetes profile's namespace whose session the store no
longer has are deleted; another Turnvisor's (another ``turnvisor.workspace``)
are never touched.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import PurePosixPath
from typing import Final, cast

import trio
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Pod, Secret

from ..config import Config
from ..models import Session
from ..profiles import AgentProfile, KubeSettings
from . import kube_api
from .agentctl_adapter import AgentctlAdapter
from .agentctl_strays import AgentctlStrays
from .base import LaunchedAgent
from .container import AGENTCTL_PORT
from .kube_api import Cluster, KubeError, load_cluster
from .kube_pod import (
    LABEL_SESSION,
    LAUNCH_ANNOTATION,
    TOKEN_KEY,
    label_value,
    pod_manifest,
    secret_manifest,
    workspace_labels,
)
from .launch_record import KUBE_FIELDS, changed

__all__ = ["launch_kube", "sweep_kube"]

log = logging.getLogger(__name__)

#: How often a Pod whose link is down is looked up (is it gone for good?).
_GONE_POLL_S: Final = 2.0


def _name(owner: str | None) -> str:
    """A fresh Pod (and Secret) name: DNS-1123, the session's id in it for people."""
    part = re.sub(r"[^a-z0-9-]", "-", (owner or "x")[:12].lower()).strip("-") or "x"
    return f"turnvisor-{part}-{secrets.token_hex(3)}"


@asynccontextmanager
async def launch_kube(config: Config, profile: AgentProfile, cwd: str, *,
                      owner: str | None) -> AsyncIterator[LaunchedAgent]:
    """The executor for ``executor = "kubernetes"`` profiles (module doc)."""
    t = config.timeouts
    _check_cwd(profile, cwd)
    cluster = load_cluster(profile)
    async with cluster.client(t.agent_request_s) as client:
        try:
            with trio.fail_after(t.agent_start_s):
                kept = await _kept_pod(client, config, owner)
        except trio.TooSlowError:
            raise KubeError(f"{cluster.server} did not list the session's Pods within "
                            f"{t.agent_start_s:g}s") from None
        drift: tuple[str, ...] = ()
        if kept is not None:
            name, token, recorded = kept
            log.info("kubernetes: re-attaching to Pod %s (session %s)", name, owner)
            # Kept running (a restart never kills a turn), but not silently
            # different from what its profile now says.
            drift = changed(recorded, profile, KUBE_FIELDS)
            if drift:
                log.warning("kubernetes: Pod %s (session %s) was made from another %s of "
                            "profile %r", name, owner, ", ".join(drift), profile.name)
        else:
            name, token = _name(owner), secrets.token_urlsafe(32)
            try:
                with trio.fail_after(t.agent_start_s):
                    await kube_api.create(client, cast(Secret, Secret.from_dict(
                        secret_manifest(config, profile, name, token, owner=owner))))
            except trio.TooSlowError:
                raise KubeError(f"{cluster.server} did not take Secret {name} within "
                                f"{t.agent_start_s:g}s") from None
        left = False
        try:
            if kept is None:
                await _start(client, cluster, config, profile, cwd, name, owner)
            # Reached through the API server: a Pod or a server that does not
            # answer for a while is waited out (DESIGN.md §20), not taken for a
            # crash; a Pod that is gone for good closes the link (``_watch_gone``).
            adapter = AgentctlAdapter(cluster.proxy_url(name, AGENTCTL_PORT), token,
                                      owner=owner, session_cwd=cwd,
                                      protocol=profile.protocol, timeouts=t,
                                      route=cluster.route, reconnect=True)
            try:
                async with trio.open_nursery() as watcher:
                    watcher.start_soon(_watch_gone, client, name, adapter, t.agent_request_s)
                    try:
                        yield LaunchedAgent(adapter=adapter, handover=adapter,
                                            strays=AgentctlStrays(adapter.connection),
                                            profile_changed=drift)
                    finally:
                        watcher.cancel_scope.cancel()
            finally:
                left = adapter.left
                await adapter.aclose()
        finally:
            if left:
                log.info("kubernetes: Pod %s stays for the next backend (session %s)",
                         name, owner)
            else:
                bound = t.term_grace_s + 2 * t.agent_request_s
                with trio.CancelScope(shield=True), trio.move_on_after(bound) as scope:
                    await _discard(client, name, grace_s=t.term_grace_s)
                if scope.cancelled_caught:
                    log.warning("Pod %s: not deleted within %gs (the startup sweep will once "
                                "its session is deleted)", name, bound)


def _check_cwd(profile: AgentProfile, cwd: str) -> None:
    """With a ``project_volume``, the session's cwd must be in it: anywhere
    else the agent would find an empty directory instead of the project."""
    volume = (profile.kube or KubeSettings()).project_volume
    if volume is None:
        return
    inside = PurePosixPath(cwd)
    if not (inside.is_absolute() and (inside == PurePosixPath(volume.path)
                                      or PurePosixPath(volume.path) in inside.parents)):
        raise KubeError(f"profile {profile.name!r}: the session's directory {cwd} is not in "
                        f"its project_volume ({volume.path}): the agent's Pod would not "
                        "have it (give the session a project under that path)")


async def _kept_pod(client: AsyncClient, config: Config,
                    owner: str | None) -> tuple[str, str, str | None] | None:
    """The session's Pod a previous backend left running (its name, agentctl
    token, from its Secret, and launch record), to re-attach to.  One that is not ready, or
    whose Secret is gone, is deleted (a fresh one is made)."""
    if not owner:
        return None
    labels = {**workspace_labels(config), LABEL_SESSION: label_value(owner)}
    found: tuple[str, str, str | None] | None = None
    for pod in await kube_api.labelled_pods(client, labels):
        name = pod.metadata.name if pod.metadata is not None else None
        if not name or (pod.metadata is not None and pod.metadata.deletionTimestamp):
            continue
        ready, _ = kube_api.pod_state(pod)
        token = await kube_api.secret_value(client, name, TOKEN_KEY) if ready else None
        if found is None and token:
            annotations = (pod.metadata.annotations if pod.metadata is not None else None) or {}
            found = (name, token, annotations.get(LAUNCH_ANNOTATION))
            continue
        log.info("kubernetes: deleting Pod %s of session %s (%s)", name, owner,
                 "another one is kept" if found else "not ready, or its Secret is gone")
        await _discard(client, name, grace_s=0)
    return found


async def _watch_gone(client: AsyncClient, name: str, adapter: AgentctlAdapter,
                      request_s: float) -> None:
    """While the link is down, ask the API server every few seconds whether
    the Pod is still there: one deleted or finished will not answer again,
    and closes the link (the agent is gone); a server that does not answer
    either is waited out."""
    link = adapter.connection
    while not link.closed.is_set():
        if link.reachable:
            await link.until_changed()
            continue
        gone: str | None = None
        # Shielded (bounded): a read cancelled half-way would leave its
        # connection to the garbage collector.
        with trio.CancelScope(shield=True), trio.move_on_after(request_s):
            try:
                pod = await kube_api.get_pod(client, name)
            except KubeError:
                pod = None
                gone = ""
            else:
                if pod is None or (pod.metadata is not None
                                   and pod.metadata.deletionTimestamp):
                    gone = f"Pod {name} was deleted"
                else:
                    gone = kube_api.pod_state(pod)[1] or ""
        if gone:
            link.close(f"{gone}: its agent is gone")
            return
        with trio.move_on_after(_GONE_POLL_S):
            await link.until_changed()


async def _start(client: AsyncClient, cluster: Cluster, config: Config, profile: AgentProfile,
                 cwd: str, name: str, owner: str | None) -> None:
    """Create the Pod and wait until it is ready (module doc)."""
    start_s = config.timeouts.agent_start_s
    where = f"Pod {name} in {cluster.namespace} on {cluster.server}"
    with trio.move_on_after(start_s) as scope:
        await kube_api.create(client, cast(Pod, Pod.from_dict(
            pod_manifest(config, profile, cwd, name, owner=owner))))
        try:
            await kube_api.watch_ready(client, name)
        except KubeError as exc:
            raise KubeError(f"{where} did not start: {exc}\n"
                            + "\n".join(await _events(client, name, config))) from None
    if scope.cancelled_caught:
        raise KubeError(f"{where} was not ready within {start_s:g}s; its events:\n"
                        + "\n".join(await _events(client, name, config)))


async def _events(client: AsyncClient, name: str, config: Config) -> list[str]:
    with trio.move_on_after(config.timeouts.agent_request_s):
        return await kube_api.pod_events(client, name) or ["(none)"]
    return ["(its events could not be read in time)"]


async def _discard(client: AsyncClient, name: str, *, grace_s: float) -> None:
    for kind, grace in ((Pod, grace_s), (Secret, None)):
        try:
            await kube_api.delete(client, kind, name, grace_s=grace)
        except KubeError as exc:
            log.warning("%s", exc)


async def sweep_kube(config: Config,
                     sessions: Callable[[], Awaitable[Iterable[Session]]] | None = None,
                     ) -> int:
    """Delete this Turnvisor's labelled Pods and Secrets whose session is not
    one of ``sessions()`` (the store's: a deleted session's Pod goes, a kept
    session's stays for its takeover or its next start; without ``sessions``,
    all of them), in each kubernetes profile's cluster and
    namespace.  Without such a profile neither the store nor a cluster is
    asked; one that cannot be reached is logged, not fatal.  Returns how many
    Pods went."""
    t = config.timeouts
    clusters: dict[tuple[str, str], Cluster] = {}
    for profile in config.profiles.values():
        if profile.executor != "kubernetes":
            continue
        try:
            cluster = load_cluster(profile)
        except KubeError as exc:
            log.warning("startup sweep of Pods skipped for %s", exc)
            continue
        clusters.setdefault((cluster.server, cluster.namespace), cluster)
    if not clusters:
        return 0
    mine = workspace_labels(config)
    live_labels = {label_value(s.id) for s in (await sessions() if sessions else ())}
    removed = 0
    for cluster in clusters.values():
        with trio.move_on_after(t.agent_start_s) as scope:
            try:
                async with cluster.client(t.agent_request_s) as client:
                    for kind in (Pod, Secret):
                        for name, labels in await kube_api.labelled(client, kind, mine):
                            if labels.get(LABEL_SESSION) in live_labels:
                                continue
                            if await kube_api.delete(client, kind, name, grace_s=0) \
                                    and kind is Pod:
                                removed += 1
                                log.info("startup sweep: deleted Pod %s (session %s)", name,
                                         labels.get(LABEL_SESSION))
            except KubeError as exc:
                log.warning("startup sweep of Pods in %s on %s skipped: %s",
                            cluster.namespace, cluster.server, exc)
        if scope.cancelled_caught:
            log.warning("startup sweep of Pods in %s on %s: not done within %gs",
                        cluster.namespace, cluster.server, t.agent_start_s)
    return removed
