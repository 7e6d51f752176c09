"""A stand-in Kubernetes API server: the REST wire for exactly the calls Turnvisor makes.

No cluster can run on these machines, so the kubernetes executor is tested
against this: HTTPS with a CA of its own (a temporary one, ``openssl``), a
bearer token, and the real paths, bodies and formats of

    POST   /api/v1/namespaces/NS/{pods,secrets}            create (201; 409 AlreadyExists)
    GET    /api/v1/namespaces/NS/{pods,secrets}[/NAME]     get, list (labelSelector,
                                                           fieldSelector metadata.name)
    GET    /api/v1/namespaces/NS/pods?watch=true           the watch stream: one JSON
                                                           {"type", "object"} per line
    DELETE /api/v1/namespaces/NS/{pods,secrets}/NAME       delete (404 NotFound)
    GET    /api/v1/namespaces/NS/events                    list (fieldSelector
                                                           involvedObject.name)
    *      /api/v1/namespaces/NS/pods/NAME:PORT/proxy/...  the Pod proxy, HTTP and
                                                           WebSocket; ``Authorization`` is
                                                           dropped, as the real server does
                                                           once it has authenticated

Errors are ``Status`` objects.  ``set_cut(True)`` makes the Pod proxy fail as
a real one does when it cannot reach the Pod (503 ServiceUnavailable, and
its open WebSockets dropped) until ``set_cut(False)``: a link cut between the
API server and the Pod, for the link-loss tests; ``stop_listening`` and
``listen_again`` take the whole server down and up on the same address.

Every object created is checked against
Kubernetes' own OpenAPI schema (kubernetes-validate, strict: an unknown field
is an error) and refused with 422 Invalid when it does not fit; ``created``
keeps each body as it arrived, for the tests.

A Pod's container runs with Podman (tests/support/kube_kubelet.py), so
agentctl and its agent are real; the Pod's phase, conditions and events
follow what happens to it, as a kubelet reports them.
"""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import kubernetes_validate
import trio
from hypercorn.config import Config as HyperConfig
from hypercorn.trio import serve
from quart import Response, request, websocket
from quart_trio import QuartTrio
from trio_websocket import ConnectionClosed, open_websocket_url

__all__ = ["KubeStandin", "kube_standin", "now"]

_PLURAL = {"pods": "Pod", "secrets": "Secret", "events": "Event"}
#: Headers that are the hop's own, never passed through the proxy.
_HOP = {"host", "authorization", "connection", "upgrade", "keep-alive", "transfer-encoding",
        "content-length", "sec-websocket-key", "sec-websocket-version",
        "sec-websocket-extensions", "sec-websocket-accept", "te", "trailer"}


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code: int, reason: str, message: str) -> Response:
    return Response(json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Failure", "message": message, "reason": reason,
                                "code": code}),
                    status=code, content_type="application/json")


def _ok(obj: dict[str, Any], code: int = 200) -> Response:
    return Response(json.dumps(obj), status=code, content_type="application/json")


def _matches(selector: str, values: dict[str, str]) -> bool:
    """A label or field selector (``a=b,c!=d,e``) against ``values``."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if values.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if values.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in values:
                return False
        elif term not in values:
            return False
    return True


def _fields(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata", {})
    out = {"metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", "")}
    for k, v in obj.get("involvedObject", {}).items():
        out[f"involvedObject.{k}"] = str(v)
    return out


async def _unset() -> None:
    raise RuntimeError("the stand-in is not listening yet")


@dataclass(eq=False)
class Watch:
    kind: str
    namespace: str
    labels: str
    fields: str
    send: trio.MemorySendChannel[dict[str, Any]]


@dataclass(eq=False)
class KubeStandin:
    """The server's state; ``url``, ``ca``, ``token`` once it listens."""

    tmp: Path
    token: str
    #: Runs a created Pod (kube_kubelet.Kubelet.run), in the server's nursery.
    run_pod: Callable[[KubeStandin, dict[str, Any]], Any] | None = None
    #: Removes a Pod's container (grace seconds).
    stop_pod: Callable[[dict[str, Any], int], Any] | None = None
    url: str = ""
    ca: Path = Path()
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    #: (kind, body) of every create, as it arrived.
    created: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: (method, path) of every request (proxy requests included).
    calls: list[tuple[str, str]] = field(default_factory=list)
    #: A Pod's (namespace, name) → the loopback port of each container port.
    ports: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)
    watches: list[Watch] = field(default_factory=list)
    nursery: trio.Nursery | None = None
    #: The Pod proxy cannot reach any Pod (``set_cut``).
    cut: bool = False
    #: Stop the server (its port refuses connections, its connections are
    #: closed) and start it again on the same address: an API server that is
    #: down for a while.  Set once it listens.
    stop_listening: Callable[[], Awaitable[None]] = _unset
    listen_again: Callable[[], Awaitable[None]] = _unset
    #: Set to end each proxied WebSocket open now (a cut).
    proxied: set[trio.Event] = field(default_factory=set)
    _version: int = 0

    def next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def set_cut(self, cut: bool) -> None:
        """Cut (or restore) the proxy's way to every Pod: its WebSockets open
        now are dropped, and it answers 503 until restored."""
        self.cut = cut
        if cut:
            for ended in self.proxied:
                ended.set()

    def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return [o for (kind, ns, _), o in self.objects.items()
                if kind == "Pod" and namespace in (None, ns)]

    def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        secret = self.objects.get(("Secret", namespace, name))
        if secret is None:
            return None
        if key in secret.get("stringData", {}):
            return str(secret["stringData"][key])
        raw = secret.get("data", {}).get(key)
        return None if raw is None else base64.b64decode(raw).decode()

    def notify(self, kind: str, change: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        for w in list(self.watches):
            if w.kind == kind and w.namespace == meta["namespace"] and _matches(
                    w.labels, meta.get("labels", {})) and _matches(w.fields, _fields(obj)):
                try:
                    w.send.send_nowait({"type": change, "object": obj})
                except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                    self.watches.remove(w)

    def update_pod(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        """A kubelet's status update: a new resourceVersion and a MODIFIED event."""
        meta = pod["metadata"]
        if ("Pod", meta["namespace"], meta["name"]) not in self.objects:
            return
        pod["status"] = status
        meta["resourceVersion"] = self.next_version()
        self.notify("Pod", "MODIFIED", pod)

    def record_event(self, pod: dict[str, Any], reason: str, message: str,
                     kind: str = "Normal", component: str = "kubelet") -> None:
        meta = pod["metadata"]
        stamp = now()
        self.events.append({
            "apiVersion": "v1", "kind": "Event", "type": kind, "reason": reason,
            "message": message, "count": 1, "firstTimestamp": stamp, "lastTimestamp": stamp,
            "source": {"component": component},
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}",
                         "namespace": meta["namespace"], "uid": str(uuid.uuid4()),
                         "resourceVersion": self.next_version(), "creationTimestamp": stamp},
            "involvedObject": {"kind": "Pod", "namespace": meta["namespace"],
                               "name": meta["name"], "uid": meta["uid"], "apiVersion": "v1"}})

    # -- the API ------------------------------------------------------------------------

    def create(self, kind: str, namespace: str, body: dict[str, Any]) -> Response:
        self.created.append((kind, json.loads(json.dumps(body))))
        if body.get("kind") != kind or body.get("apiVersion") != "v1":
            return status(400, "BadRequest", f"the body is not a v1 {kind}")
        try:
            kubernetes_validate.validate(body, kubernetes_validate.latest_version(),
                                         strict=True)
        except kubernetes_validate.ValidationError as exc:
            return status(422, "Invalid", f"{kind} is invalid: {exc.message}")
        meta = body["metadata"]
        name = meta.get("name", "")
        if meta.get("namespace", namespace) != namespace:
            return status(400, "BadRequest", "the namespace of the object does not match")
        if (kind, namespace, name) in self.objects:
            return status(409, "AlreadyExists", f'{kind.lower()}s "{name}" already exists')
        meta.update(namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=now(),
                    resourceVersion=self.next_version())
        if kind == "Pod":
            body["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        self.objects[(kind, namespace, name)] = body
        self.notify(kind, "ADDED", body)
        if kind == "Pod" and self.run_pod is not None and self.nursery is not None:
            self.nursery.start_soon(self.run_pod, self, body)
        return _ok(body, 201)

    async def delete(self, kind: str, namespace: str, name: str) -> Response:
        """A Pod is answered at once, Terminating (``deletionTimestamp``), and goes
        (DELETED) once its kubelet has stopped its container; the rest go at once."""
        obj = self.objects.get((kind, namespace, name))
        if obj is None:
            return status(404, "NotFound", f'{kind.lower()}s "{name}" not found')
        meta = obj["metadata"]
        if kind != "Pod" or self.stop_pod is None or self.nursery is None:
            del self.objects[(kind, namespace, name)]
            meta["resourceVersion"] = self.next_version()
            self.notify(kind, "DELETED", obj)
            return _ok(obj)
        if "deletionTimestamp" in meta:
            return _ok(obj)
        grace = request.args.get("gracePeriodSeconds")
        body = await request.get_data(as_text=True)
        if grace is None and body.strip():
            grace = json.loads(body).get("gracePeriodSeconds")
        seconds = int(grace) if grace is not None else int(
            obj["spec"].get("terminationGracePeriodSeconds", 30))
        meta.update(deletionTimestamp=now(), deletionGracePeriodSeconds=seconds,
                    resourceVersion=self.next_version())
        self.notify(kind, "MODIFIED", obj)
        self.nursery.start_soon(self._terminate, obj, seconds)
        return _ok(obj)

    async def _terminate(self, pod: dict[str, Any], grace_s: int) -> None:
        assert self.stop_pod is not None
        meta = pod["metadata"]
        await self.stop_pod(pod, grace_s)
        self.ports.pop((meta["namespace"], meta["name"]), None)
        self.objects.pop(("Pod", meta["namespace"], meta["name"]), None)
        meta["resourceVersion"] = self.next_version()
        self.notify("Pod", "DELETED", pod)

    def listing(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        labels = request.args.get("labelSelector", "")
        fields = request.args.get("fieldSelector", "")
        pool = self.events if kind == "Event" else [
            o for (k, ns, _), o in self.objects.items() if k == kind]
        return [o for o in pool if o["metadata"]["namespace"] == namespace
                and _matches(labels, o["metadata"].get("labels", {}))
                and _matches(fields, _fields(o))]


def create_app(state: KubeStandin) -> QuartTrio:
    app = QuartTrio("kube-standin", static_folder=None)

    def authorized(header: str | None) -> bool:
        return header == f"Bearer {state.token}"

    @app.before_request
    async def check() -> Response | None:
        state.calls.append((request.method, request.path))
        if not authorized(request.headers.get("Authorization")):
            return status(401, "Unauthorized", "Unauthorized")
        return None

    @app.route("/api/v1/namespaces/<ns>/<plural>", methods=["GET", "POST"])
    async def collection(ns: str, plural: str) -> Response:
        kind = _PLURAL.get(plural)
        if kind is None:
            return status(404, "NotFound", f"the server could not find {plural}")
        if request.method == "POST":
            if kind == "Event":
                return status(405, "MethodNotAllowed", "not served here")
            return state.create(kind, ns, json.loads(await request.get_data(as_text=True)))
        if request.args.get("watch") in ("true", "1"):
            return await _watch(kind, ns)
        return _ok({"kind": f"{kind}List", "apiVersion": "v1",
                    "metadata": {"resourceVersion": str(state._version)},
                    "items": state.listing(kind, ns)})

    async def _watch(kind: str, ns: str) -> Response:
        after = int(request.args.get("resourceVersion") or 0)
        timeout = float(request.args.get("timeoutSeconds") or 300)
        send, receive = trio.open_memory_channel[dict[str, Any]](1000)
        for obj in state.listing(kind, ns):
            if int(obj["metadata"]["resourceVersion"]) > after:
                send.send_nowait({"type": "ADDED", "object": obj})
        state.watches.append(Watch(kind, ns, request.args.get("labelSelector", ""),
                                   request.args.get("fieldSelector", ""), send))

        async def lines() -> AsyncIterator[bytes]:
            with trio.move_on_after(timeout):
                async with receive:
                    async for change in receive:
                        yield (json.dumps(change) + "\n").encode()

        response = Response(lines(), content_type="application/json")
        response.timeout = None
        return response

    @app.route("/api/v1/namespaces/<ns>/<plural>/<name>", methods=["GET", "DELETE"])
    async def item(ns: str, plural: str, name: str) -> Response:
        kind = _PLURAL.get(plural)
        if kind is None:
            return status(404, "NotFound", f"the server could not find {plural}")
        if request.method == "DELETE":
            return await state.delete(kind, ns, name)
        obj = state.objects.get((kind, ns, name))
        if obj is None:
            return status(404, "NotFound", f'{plural} "{name}" not found')
        return _ok(obj)

    def target(ns: str, pod_port: str) -> int | Response:
        name, _, port = pod_port.partition(":")
        pod = state.objects.get(("Pod", ns, name))
        if pod is None:
            return status(404, "NotFound", f'pods "{name}" not found')
        published = state.ports.get((ns, name), {}).get(int(port or 80))
        if published is None or pod.get("status", {}).get("phase") != "Running":
            return status(503, "ServiceUnavailable", f'pod "{name}" is not running')
        if state.cut:
            return status(503, "ServiceUnavailable", "error trying to reach service: dial tcp "
                          f"127.0.0.1:{published}: connect: connection refused")
        return published

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]

    @app.route("/api/v1/namespaces/<ns>/pods/<pod_port>/proxy/", methods=methods,
               defaults={"rest": ""})
    @app.route("/api/v1/namespaces/<ns>/pods/<pod_port>/proxy/<path:rest>", methods=methods)
    async def proxy(ns: str, pod_port: str, rest: str) -> Response:
        port = target(ns, pod_port)
        if isinstance(port, Response):
            return port
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        try:
            async with httpx.AsyncClient(timeout=httpx.Timeout(60)) as http:
                resp = await http.request(
                    request.method, f"http://127.0.0.1:{port}/{rest}",
                    params=request.query_string.decode(), headers=headers,
                    content=await request.get_data())
        except httpx.HTTPError as exc:
            return status(503, "ServiceUnavailable", f"error trying to reach service: {exc}")
        return Response(resp.content, status=resp.status_code,
                        headers={k: v for k, v in resp.headers.items()
                                 if k.lower() not in _HOP})

    @app.websocket("/api/v1/namespaces/<ns>/pods/<pod_port>/proxy/<path:rest>")
    async def proxy_ws(ns: str, pod_port: str, rest: str) -> Response | None:
        state.calls.append(("WS", websocket.path))
        if not authorized(websocket.headers.get("Authorization")):
            return status(401, "Unauthorized", "Unauthorized")
        port = target(ns, pod_port)
        if isinstance(port, Response):
            return port
        query = websocket.query_string.decode()
        headers = [(k.lower().encode(), v.encode()) for k, v in websocket.headers.items()
                   if k.lower() not in _HOP]
        url = f"ws://127.0.0.1:{port}/{rest}" + (f"?{query}" if query else "")
        cut = trio.Event()
        state.proxied.add(cut)
        try:
            await _relay(url, headers, cut)
        finally:
            state.proxied.discard(cut)
        return None

    async def _relay(url: str, headers: list[tuple[bytes, bytes]], cut: trio.Event) -> None:
        async with open_websocket_url(url, extra_headers=headers,
                                      max_message_size=64 * 1024 * 1024) as upstream:
            await websocket.accept()
            async with trio.open_nursery() as pumps:
                async def on_cut() -> None:
                    # Only the pumps: the upstream WebSocket is then closed
                    # as usual (a cancelled close would leave its socket open).
                    await cut.wait()
                    pumps.cancel_scope.cancel()

                async def down() -> None:
                    try:
                        while True:
                            await websocket.send(await upstream.get_message())
                    except ConnectionClosed:
                        pass
                    pumps.cancel_scope.cancel()

                async def up() -> None:
                    while True:
                        await upstream.send_message(await websocket.receive())

                pumps.start_soon(down)
                pumps.start_soon(up)
                pumps.start_soon(on_cut)

    return app


def _certificates(tmp: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 signed by it (openssl)."""
    tmp.mkdir(parents=True, exist_ok=True)
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=tmp, check=True, capture_output=True,
                       timeout=60)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=kube-standin-ca")
    run("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    (tmp / "san.ext").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.ext")
    return tmp / "ca.crt", tmp / "server.crt", tmp / "server.key"


@asynccontextmanager
async def kube_standin(tmp: Path, token: str, *,
                       run_pod: Callable[[KubeStandin, dict[str, Any]], Any] | None = None,
                       stop_pod: Callable[[dict[str, Any], int], Any] | None = None,
                       ) -> AsyncIterator[KubeStandin]:
    """The stand-in on a free loopback port over HTTPS, in a nursery of its own."""
    ca, cert, key = _certificates(tmp)
    state = KubeStandin(tmp=tmp, token=token, run_pod=run_pod, stop_pod=stop_pod, ca=ca)
    hc = HyperConfig()
    hc.bind = ["127.0.0.1:0"]
    hc.certfile, hc.keyfile = str(cert), str(key)
    hc.accesslog = None
    hc.graceful_timeout = 1.0
    app = create_app(state)
    async with trio.open_nursery() as nursery:
        state.nursery = nursery

        async def listen() -> None:
            stop, done = trio.Event(), trio.Event()

            async def run(*, task_status: trio.TaskStatus[list[str]]) -> None:
                try:
                    await serve(app, hc, shutdown_trigger=stop.wait,
                                task_status=task_status)
                finally:
                    done.set()

            binds: list[str] = await nursery.start(run)
            state.url = binds[0]
            # Again on the same address after a stop (``stop_listening``).
            hc.bind = [binds[0].removeprefix("https://")]

            async def stop_listening() -> None:
                stop.set()
                await done.wait()

            state.stop_listening = stop_listening

        state.listen_again = listen
        await listen()
        try:
            yield state
        finally:
            await state.stop_listening()
            nursery.cancel_scope.deadline = trio.current_time() + 5


def kubeconfig(path: Path, standin: KubeStandin, namespace: str, *,
               token: str | None = None) -> Path:
    """A kubeconfig for the stand-in (JSON is YAML): its CA inline, a token user."""
    ca = base64.b64encode(standin.ca.read_bytes()).decode()
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "standin",
        "clusters": [{"name": "standin", "cluster": {"server": standin.url,
                                                     "certificate-authority-data": ca}}],
        "users": [{"name": "turnvisor", "user": {"token": token or standin.token}}],
        "contexts": [{"name": "standin", "context": {"cluster": "standin",
                                                     "user": "turnvisor",
                                                     "namespace": namespace}}]}))
    return path
