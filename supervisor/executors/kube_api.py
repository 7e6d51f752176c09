"""The Kubernetes API, as the kubernetes executor uses it: lightkube's async client.

Why lightkube (docs/deploy.md, "Kubernetes"): its ``AsyncClient`` runs under
Trio (its HTTP stack is anyio-based), its typed resources come from
Kubernetes' OpenAPI schema (lightkube-models), and it speaks watch streams.
kr8s also reaches the API over anyio, but its port-forward is asyncio-only,
and it ships no models.

Two lightkube paths are asyncio-only and are kept off: credential ``exec``
plugins (``ExecAuth`` starts them with asyncio's subprocess: such a
kubeconfig user is refused with the reason) and a watch's retry sleep (every
watch here gives up on the first error, ``on_error_raise``).

``Cluster`` is one profile's API server: lightkube's config (kubeconfig or the
in-cluster service account), the namespace, and the ``Route`` that reaches a
Pod's agentctl through the server's Pod proxy (its credential in headers, its
CA in an SSL context).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx2
import trio
from lightkube import ApiError, AsyncClient, ConfigError, KubeConfig
from lightkube.config.client_adapter import verify_cluster
from lightkube.config.kubeconfig import SingleConfig
from lightkube.config.models import User
from lightkube.core.exceptions import LoadResourceError
from lightkube.resources.core_v1 import Event, Pod, Secret

from ..profiles import AgentProfile, KubeSettings
from .agentctl_link import Route

__all__ = ["Cluster", "KubeError", "get_pod", "labelled_pods", "load_cluster", "pod_events",
           "pod_state", "secret_value"]


class KubeError(OSError):
    """The API server refused a call, or could not be reached (the message says which)."""


@dataclass(frozen=True)
class Cluster:
    config: SingleConfig
    namespace: str
    server: str
    route: Route

    def client(self, timeout_s: float) -> AsyncClient:
        # trust_env off: a proxy or CA from the backend's environment is not the cluster's.
        return AsyncClient(self.config, namespace=self.namespace,
                           timeout=httpx2.Timeout(timeout_s), trust_env=False,
                           field_manager="turnvisor")

    def proxy_url(self, pod: str, port: int) -> str:
        """The Pod proxy's URL for ``port`` of ``pod`` (agentctl's paths go after it)."""
        return f"{self.server}/api/v1/namespaces/{self.namespace}/pods/{pod}:{port}/proxy"


def load_cluster(profile: AgentProfile) -> Cluster:
    """The profile's cluster: its ``kubeconfig`` (current context), else the
    in-cluster service account.  A config that cannot be used is one KubeError."""
    settings = profile.kube or KubeSettings()
    where = settings.kubeconfig or "the in-cluster service account"
    try:
        if settings.kubeconfig:
            config = KubeConfig.from_file(Path(settings.kubeconfig).expanduser()).get()
        else:
            config = KubeConfig.from_service_account().get()
    except (ConfigError, OSError, KeyError, ValueError) as exc:
        raise KubeError(f"profile {profile.name!r}: cannot load {where}: {exc}") from None
    if config is None:
        raise KubeError(f"profile {profile.name!r}: {where} names no current context")
    user = config.user
    if user is not None and user.exec is not None:
        raise KubeError(f"profile {profile.name!r}: {where}: the user's credential is an exec "
                        "plugin, which Turnvisor does not run; give it a token (a service "
                        "account's) or a client certificate (docs/deploy.md)")
    headers: dict[str, str] = {}
    if user is not None:
        token = user.token
        if user.token_file:
            try:
                token = Path(config.abs_file(user.token_file)).read_text().strip()
            except OSError as exc:
                raise KubeError(f"profile {profile.name!r}: {where}: cannot read its token "
                                f"file: {exc}") from None
        if token:
            headers["Authorization"] = f"Bearer {token.strip()}"
        elif user.username and user.password:
            basic = base64.b64encode(f"{user.username}:{user.password}".encode()).decode()
            headers["Authorization"] = f"Basic {basic}"
    server = config.cluster.server.rstrip("/")
    context = None
    if server.startswith("https://"):
        try:
            context = verify_cluster(config.cluster, user or User(), config.abs_file,
                                     trust_env=False)
        except (OSError, ValueError) as exc:
            raise KubeError(f"profile {profile.name!r}: {where}: bad TLS material: {exc}") \
                from None
    namespace = settings.namespace or config.namespace or "default"
    return Cluster(config=config, namespace=namespace, server=server,
                   route=Route(headers=headers, ssl_context=context))


def api_error(exc: Exception) -> str:
    """One line for a failed call: the server's Status message, or the transport's."""
    if isinstance(exc, ApiError):
        status = exc.status
        return f"{status.code} {status.reason or ''}: {status.message or ''}".strip()
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


#: What a failed call raises out of lightkube.
CALL_ERRORS = (httpx2.HTTPError, LoadResourceError, ValueError)


async def create(client: AsyncClient, obj: Pod | Secret) -> None:
    try:
        await client.create(obj)
    except CALL_ERRORS as exc:
        kind = type(obj).__name__
        raise KubeError(f"cannot create {kind} {obj.metadata and obj.metadata.name}: "
                        f"{api_error(exc)}") from None


async def delete(client: AsyncClient, kind: type[Pod] | type[Secret], name: str, *,
                 grace_s: float | None = None) -> bool:
    """Delete one object; False when it was already gone."""
    try:
        await client.delete(kind, name, grace_period=None if grace_s is None
                            else max(0, round(grace_s)))
    except ApiError as exc:
        if exc.status.code == 404:
            return False
        raise KubeError(f"cannot delete {kind.__name__} {name}: {api_error(exc)}") from None
    except CALL_ERRORS as exc:
        raise KubeError(f"cannot delete {kind.__name__} {name}: {api_error(exc)}") from None
    return True


async def labelled(client: AsyncClient, kind: type[Pod] | type[Secret],
                   labels: Mapping[str, str]) -> list[tuple[str, dict[str, str]]]:
    """(name, labels) of each object of ``kind`` that has all of ``labels``."""
    found: list[tuple[str, dict[str, str]]] = []
    try:
        async for obj in client.list(kind, labels=dict(labels)):
            meta = obj.metadata
            if meta is not None and meta.name:
                found.append((meta.name, dict(meta.labels or {})))
    except CALL_ERRORS as exc:
        raise KubeError(f"cannot list {kind.__name__}s: {api_error(exc)}") from None
    return found


async def get_pod(client: AsyncClient, name: str) -> Pod | None:
    """The Pod, or None when there is none of that name."""
    try:
        return await client.get(Pod, name)
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise KubeError(f"cannot read Pod {name}: {api_error(exc)}") from None
    except CALL_ERRORS as exc:
        raise KubeError(f"cannot read Pod {name}: {api_error(exc)}") from None


async def secret_value(client: AsyncClient, name: str, key: str) -> str | None:
    """``key`` of Secret ``name``, decoded; None when the Secret or the key is not there."""
    try:
        secret = await client.get(Secret, name)
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise KubeError(f"cannot read Secret {name}: {api_error(exc)}") from None
    except CALL_ERRORS as exc:
        raise KubeError(f"cannot read Secret {name}: {api_error(exc)}") from None
    if secret.stringData and key in secret.stringData:
        return str(secret.stringData[key])
    raw = (secret.data or {}).get(key)
    try:
        return None if raw is None else base64.b64decode(raw).decode()
    except ValueError:
        return None


async def labelled_pods(client: AsyncClient, labels: Mapping[str, str]) -> list[Pod]:
    """The Pods that have all of ``labels``."""
    try:
        return [pod async for pod in client.list(Pod, labels=dict(labels))]
    except CALL_ERRORS as exc:
        raise KubeError(f"cannot list Pods: {api_error(exc)}") from None


def pod_state(pod: Pod) -> tuple[bool, str | None]:
    """(ready, why it never will be: a finished phase, or None while it may still)."""
    status = pod.status
    if status is None:
        return False, None
    if status.phase in ("Failed", "Succeeded"):
        detail = "; ".join(
            f"{c.name}: {c.state.terminated.reason} (exit {c.state.terminated.exitCode})"
            for c in status.containerStatuses or ()
            if c.state is not None and c.state.terminated is not None)
        return False, f"the Pod {status.phase.lower()}" + (f" ({detail})" if detail else "")
    ready = any(c.type == "Ready" and c.status == "True" for c in status.conditions or ())
    return ready, None


async def watch_ready(client: AsyncClient, name: str) -> None:
    """Return once the Pod is Ready; KubeError when it finished or was deleted,
    or the watch failed.  Unbounded: the caller bounds it."""
    stream = client.watch(Pod, fields={"metadata.name": name})
    try:
        async for kind, pod in stream:
            if kind == "DELETED":
                raise KubeError(f"Pod {name} was deleted while starting")
            ready, never = pod_state(pod)
            if ready:
                return
            if never:
                raise KubeError(never)
    except CALL_ERRORS as exc:
        raise KubeError(f"watch of Pod {name} failed: {api_error(exc)}") from None
    finally:
        await _finish(stream)
    raise KubeError(f"the watch of Pod {name} ended")


async def _finish(stream: AsyncIterable[object]) -> None:
    """End a watch by cancelling its next read: each of the stacked async
    generators under it (lightkube's, the HTTP client's) then finishes with
    that exception.  Closing only the outer one would leave the inner ones to
    the garbage collector, half-read (which Trio rightly warns about)."""
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            async for _ in stream:
                pass
        except CALL_ERRORS:
            pass


async def pod_events(client: AsyncClient, name: str) -> list[str]:
    """The Pod's events, oldest first (``reason: message``), and its containers'
    waiting reasons: what a start error shows."""
    lines: list[str] = []
    try:
        events = [e async for e in client.list(Event, fields={"involvedObject.name": name})]
        events.sort(key=lambda e: str(e.lastTimestamp or e.eventTime or ""))
        lines += [f"{e.type or 'Normal'} {e.reason}: {e.message}" for e in events]
        pod = await client.get(Pod, name)
        for c in (pod.status.containerStatuses or ()) if pod.status else ():
            waiting = c.state.waiting if c.state else None
            if waiting is not None:
                lines.append(f"container {c.name} waiting: {waiting.reason}"
                             + (f" ({waiting.message})" if waiting.message else ""))
    except CALL_ERRORS as exc:
        lines.append(f"(its events could not be read: {api_error(exc)})")
    return lines
