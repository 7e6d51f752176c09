"""A small typed client for the Docker Engine API (Docker, or Podman's
``podman system service``), over httpx: no shelling out per operation.

The engine is chosen like the docker CLI chooses it, from ``DOCKER_HOST``:

- ``unix:///path/to.sock`` (default: ``/var/run/docker.sock`` if it exists, else
  Podman's rootful ``/run/podman/podman.sock``);
- ``tcp://HOST:PORT``: plain HTTP, or TLS when ``DOCKER_TLS_VERIFY`` is set
  (the engine's certificate checked against ``ca.pem``, the client's own
  ``cert.pem``/``key.pem`` presented; all three in ``DOCKER_CERT_PATH``, default
  ``~/.docker``);
- ``ssh://user@host[:port][/path/to/socket]``: the engine of another host,
  reached over SSH (supervisor/executors/ssh_engine.py forwards its socket to
  a local one and this client speaks to that; without a path, the host's
  ``/var/run/docker.sock`` or ``/run/podman/podman.sock``, whichever exists).

Only what the container executor needs: ping, create, start, inspect, stop,
remove, list by label, wait, logs; and for ``turnvisor images load``
(image_load.py): whether an image is there, an image's archive read as a
stream, and an archive loaded from a stream.  Every call is bounded by the
client's timeout (a stream: each read and write, and the whole transfer by
its own bound); an engine error becomes ``EngineError`` with the engine's
message.
"""

from __future__ import annotations

import json
import os
import re
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import httpx
import trio

__all__ = [
    "API_VERSION",
    "ContainerInfo",
    "ContainerSpec",
    "EngineAddress",
    "EngineClient",
    "EngineError",
    "SshEngine",
    "engine_address",
]

#: The API version spoken: Docker 20.10+ and Podman 3+ serve it.
API_VERSION: Final = "v1.41"
_DEFAULT_SOCKETS: Final = ("/var/run/docker.sock", "/run/podman/podman.sock")


class EngineError(Exception):
    """The engine refused a request, or could not be reached."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class SshEngine:
    """An engine behind ``ssh://``: the host, and its socket there (None: look)."""

    destination: str
    port: int | None = None
    socket: str | None = None


@dataclass(frozen=True, slots=True)
class EngineAddress:
    kind: Literal["unix", "tcp", "ssh"]
    #: The socket's path (unix), ``host:port`` (tcp) or the URL (ssh).
    where: str
    tls: ssl.SSLContext | None = None
    ssh: SshEngine | None = None

    @property
    def host(self) -> str:
        """Where the engine's published ports are reached from here."""
        if self.kind == "unix":
            return "127.0.0.1"
        return urlsplit("//" + self.where).hostname or "127.0.0.1"

    @property
    def local(self) -> bool:
        return self.kind == "unix"

    def __str__(self) -> str:
        if self.kind == "ssh":
            return self.where
        return f"unix://{self.where}" if self.kind == "unix" else (
            f"{'https' if self.tls else 'tcp'}://{self.where}")


def engine_address(env: Mapping[str, str] | None = None) -> EngineAddress:
    """The engine ``DOCKER_HOST`` (and the TLS variables) name; see the module doc."""
    env = os.environ if env is None else env
    raw = env.get("DOCKER_HOST", "").strip()
    if not raw:
        for path in _DEFAULT_SOCKETS:
            if os.path.exists(path):
                return EngineAddress("unix", path)
        return EngineAddress("unix", _DEFAULT_SOCKETS[0])
    parts = urlsplit(raw)
    if parts.scheme == "unix":
        if not parts.path:
            raise EngineError(f"DOCKER_HOST={raw}: no socket path")
        return EngineAddress("unix", parts.path)
    if parts.scheme == "tcp":
        if not parts.hostname or parts.port is None:
            raise EngineError(f"DOCKER_HOST={raw}: want tcp://HOST:PORT")
        where = f"{parts.hostname}:{parts.port}"
        if env.get("DOCKER_TLS_VERIFY", "") not in ("", "0"):
            return EngineAddress("tcp", where, _tls_context(env))
        return EngineAddress("tcp", where)
    if parts.scheme == "ssh":
        return EngineAddress("ssh", raw, ssh=_ssh_engine(raw))
    raise EngineError(f"DOCKER_HOST={raw}: want unix://, tcp:// or ssh://")


_SSH_DESTINATION = re.compile(r"([A-Za-z0-9_][A-Za-z0-9._-]*@)?[A-Za-z0-9_][A-Za-z0-9._-]*")


def _ssh_engine(raw: str) -> SshEngine:
    """``ssh://user@host[:port][/path/to/socket]``; never an ssh option."""
    parts = urlsplit(raw)
    netloc = parts.netloc
    destination, _, port_text = netloc.partition(":")
    if not _SSH_DESTINATION.fullmatch(destination) or parts.query or parts.fragment or (
            port_text and not port_text.isdigit()):
        raise EngineError(f"DOCKER_HOST={raw}: want ssh://user@host[:port][/path/to/socket]")
    port = int(port_text) if port_text else None
    if port is not None and not 0 < port < 65536:
        raise EngineError(f"DOCKER_HOST={raw}: port {port} is not a port")
    return SshEngine(destination, port, parts.path or None)


def _tls_context(env: Mapping[str, str]) -> ssl.SSLContext:
    certs = Path(env.get("DOCKER_CERT_PATH") or Path.home() / ".docker")
    missing = [n for n in ("ca.pem", "cert.pem", "key.pem") if not (certs / n).is_file()]
    if missing:
        raise EngineError(f"DOCKER_TLS_VERIFY is set but {certs} lacks {', '.join(missing)}")
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(certs / "ca.pem"))
    ctx.load_cert_chain(str(certs / "cert.pem"), str(certs / "key.pem"))
    return ctx


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerSpec:
    image: str
    #: Arguments after the image's entrypoint.
    cmd: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    #: host path → container path (read-write).
    binds: Mapping[str, str] = field(default_factory=dict)
    #: A container TCP port published on ``publish_ip`` at a port the engine picks.
    port: int | None = None
    publish_ip: str = "127.0.0.1"
    working_dir: str | None = None
    cpus: float | None = None
    memory_bytes: int | None = None
    pids: int | None = None
    #: name → (soft, hard).
    ulimits: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    #: The engine's own init as PID 1 (Docker's ``--init``).
    init: bool = False

    def body(self) -> dict[str, Any]:
        host: dict[str, Any] = {
            "Binds": [f"{src}:{dst}:rw" for src, dst in self.binds.items()],
            "Init": self.init,
        }
        if self.cpus is not None:
            host["NanoCpus"] = int(self.cpus * 1e9)
        if self.memory_bytes is not None:
            host["Memory"] = self.memory_bytes
        if self.pids is not None:
            host["PidsLimit"] = self.pids
        if self.ulimits:
            host["Ulimits"] = [{"Name": n, "Soft": s, "Hard": h}
                               for n, (s, h) in self.ulimits.items()]
        body: dict[str, Any] = {
            "Image": self.image,
            "Cmd": list(self.cmd),
            "Env": [f"{k}={v}" for k, v in self.env.items()],
            "Labels": dict(self.labels),
            "HostConfig": host,
        }
        if self.working_dir is not None:
            body["WorkingDir"] = self.working_dir
        if self.port is not None:
            key = f"{self.port}/tcp"
            body["ExposedPorts"] = {key: {}}
            host["PortBindings"] = {key: [{"HostIp": self.publish_ip, "HostPort": ""}]}
        return body


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    id: str
    name: str
    labels: Mapping[str, str]
    #: created, running, exited, ...
    status: str
    exit_code: int | None = None
    #: container port ("8765/tcp") → published host port.
    ports: Mapping[str, int] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        return self.status == "running"


class EngineClient:
    """One engine, one connection pool; ``aclose`` (or ``async with``) ends it."""

    def __init__(self, address: EngineAddress, *, timeout_s: float = 30.0) -> None:
        self.address = address
        self.timeout_s = timeout_s
        if address.kind == "ssh":
            raise EngineError(f"{address}: open it with ssh_engine.reach_engine (a local "
                              "socket forwarded to it)")
        if address.kind == "unix":
            transport = httpx.AsyncHTTPTransport(uds=address.where)
            base = f"http://engine/{API_VERSION}"
        else:
            transport = httpx.AsyncHTTPTransport(verify=address.tls or True)
            base = f"{'https' if address.tls else 'http'}://{address.where}/{API_VERSION}"
        self._http = httpx.AsyncClient(transport=transport, base_url=base,
                                       timeout=httpx.Timeout(timeout_s))

    async def __aenter__(self) -> EngineClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True), trio.move_on_after(2.0):
            await self._http.aclose()

    async def _call(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                    body: Any = None, ok: tuple[int, ...] = (200,),
                    timeout_s: float | None = None) -> httpx.Response:
        limit = timeout_s if timeout_s is not None else self.timeout_s
        try:
            with trio.fail_after(limit):
                resp = await self._http.request(method, path, params=params, json=body,
                                                timeout=httpx.Timeout(limit))
        except (trio.TooSlowError, httpx.TimeoutException):
            raise EngineError(f"engine at {self.address} did not answer {method} {path} "
                              f"within {limit:g}s") from None
        except httpx.HTTPError as exc:
            raise EngineError(f"engine at {self.address} is unreachable: "
                              f"{exc or type(exc).__name__}") from None
        if resp.status_code not in ok:
            raise EngineError(f"{method} {path}: {resp.status_code} {_message(resp)}",
                              resp.status_code)
        return resp

    async def ping(self) -> None:
        await self._call("GET", "/_ping")

    async def create(self, spec: ContainerSpec, *, name: str | None = None) -> str:
        resp = await self._call("POST", "/containers/create", body=spec.body(),
                                params={"name": name} if name else None, ok=(201,))
        return str(resp.json()["Id"])

    async def start(self, cid: str) -> None:
        await self._call("POST", f"/containers/{cid}/start", ok=(204, 304))

    async def inspect(self, cid: str) -> ContainerInfo:
        data = (await self._call("GET", f"/containers/{cid}/json")).json()
        state = data.get("State") or {}
        ports: dict[str, int] = {}
        for key, binds in ((data.get("NetworkSettings") or {}).get("Ports") or {}).items():
            for b in binds or ():
                if b.get("HostPort"):
                    ports[key] = int(b["HostPort"])
                    break
        running = bool(state.get("Running"))
        return ContainerInfo(
            id=data["Id"], name=str(data.get("Name", "")).lstrip("/"),
            labels=(data.get("Config") or {}).get("Labels") or {},
            status="running" if running else str(state.get("Status") or "unknown"),
            exit_code=None if running else state.get("ExitCode"), ports=ports)

    async def stop(self, cid: str, *, grace_s: float) -> None:
        """SIGTERM, then SIGKILL after ``grace_s`` (whole seconds, rounded up)."""
        t = max(0, int(-(-grace_s // 1)))
        await self._call("POST", f"/containers/{cid}/stop", params={"t": str(t)},
                         ok=(204, 304), timeout_s=self.timeout_s + t)

    async def remove(self, cid: str, *, force: bool = True) -> None:
        await self._call("DELETE", f"/containers/{cid}",
                         params={"force": "true" if force else "false", "v": "true"},
                         ok=(200, 204, 404))

    async def list(self, labels: Mapping[str, str | None]) -> list[ContainerInfo]:
        """All containers (running or not) with these labels (None: any value)."""
        filters = {"label": [k if v is None else f"{k}={v}" for k, v in labels.items()]}
        data = (await self._call("GET", "/containers/json",
                                 params={"all": "true", "filters": json.dumps(filters)})).json()
        return [ContainerInfo(id=c["Id"], name=str((c.get("Names") or [""])[0]).lstrip("/"),
                              labels=c.get("Labels") or {}, status=str(c.get("State") or ""))
                for c in data]

    async def has_image(self, name: str) -> bool:
        """Whether the engine has image ``name`` (a tag or an id)."""
        resp = await self._call("GET", f"/images/{name}/json", ok=(200, 404))
        return resp.status_code == 200

    @asynccontextmanager
    async def image_archive(self, name: str) -> AsyncIterator[AsyncIterator[bytes]]:
        """Image ``name`` as the engine exports it (a ``docker save`` archive),
        read as it comes: never whole in memory."""
        try:
            async with self._http.stream("GET", f"/images/{name}/get") as resp:
                if resp.status_code != 200:
                    await resp.aread()
                    raise EngineError(f"GET /images/{name}/get: {resp.status_code} "
                                      f"{_message(resp)}", resp.status_code)
                yield resp.aiter_raw()
        except httpx.TimeoutException:
            raise EngineError(f"engine at {self.address} stopped sending image {name} "
                              f"(nothing for {self.timeout_s:g}s)") from None
        except httpx.HTTPError as exc:
            raise EngineError(f"engine at {self.address}: reading image {name} failed: "
                              f"{exc or type(exc).__name__}") from None

    async def load_image(self, archive: AsyncIterable[bytes]) -> tuple[str, ...]:
        """Load an image archive sent as it is read; what the engine said it
        loaded ("Loaded image: ..." lines)."""
        try:
            resp = await self._http.post("/images/load", content=archive)
        except httpx.TimeoutException:
            raise EngineError(f"engine at {self.address} did not take or answer the image "
                              f"(nothing for {self.timeout_s:g}s)") from None
        except httpx.HTTPError as exc:
            raise EngineError(f"engine at {self.address}: loading an image failed: "
                              f"{exc or type(exc).__name__}") from None
        if resp.status_code != 200:
            raise EngineError(f"POST /images/load: {resp.status_code} {_message(resp)}",
                              resp.status_code)
        said = []
        # A JSON stream: an error may come in it, after a 200.
        for line in resp.text.splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if isinstance(item, dict) and item.get("error"):
                raise EngineError(f"POST /images/load: {item['error']}")
            if isinstance(item, dict) and item.get("stream"):
                said.append(str(item["stream"]).strip())
        return tuple(said)

    async def wait(self, cid: str, *, timeout_s: float) -> int:
        """The container's exit status, once it has exited (bounded)."""
        resp = await self._call("POST", f"/containers/{cid}/wait", timeout_s=timeout_s)
        return int(resp.json().get("StatusCode", -1))

    async def logs(self, cid: str, *, tail: int = 40) -> str:
        """The last lines of its output (stdout and stderr, de-multiplexed)."""
        resp = await self._call("GET", f"/containers/{cid}/logs",
                                params={"stdout": "true", "stderr": "true",
                                        "tail": str(tail)})
        return _demux(resp.content).decode(errors="replace")


def _message(resp: httpx.Response) -> str:
    """The engine's error message (its JSON ``message``, else the body)."""
    try:
        data = resp.json()
        message = str(data.get("message") or resp.text) if isinstance(data, dict) \
            else resp.text
    except ValueError:
        message = resp.text
    return message.strip()


def _demux(raw: bytes) -> bytes:
    """The engine's log stream without its 8-byte frame headers (no TTY)."""
    out = bytearray()
    i = 0
    while i + 8 <= len(raw) and raw[i] in (0, 1, 2) and raw[i + 1:i + 4] == b"\0\0\0":
        size = int.from_bytes(raw[i + 4:i + 8], "big")
        out += raw[i + 8:i + 8 + size]
        i += 8 + size
    return bytes(out) if i else raw
