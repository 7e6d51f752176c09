"""Helpers for the kubernetes executor's tests (conftest is not importable)."""

from __future__ import annotations

import json
import ssl
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from supervisor.profiles import AgentProfile, parse_profiles
from tests.support.kube_kubelet import STANDIN_LABEL, Kubelet
from tests.support.kube_standin import KubeStandin, kube_standin, kubeconfig

#: The stand-in's bearer token (the kubeconfig's user).
KUBE_TOKEN = "standin-token-0123456789abcdef"
NAMESPACE = "agents"


@dataclass(frozen=True)
class AgentImage:
    image: str
    podman: str


@dataclass(frozen=True)
class Cluster:
    standin: KubeStandin
    kubeconfig: Path


@asynccontextmanager
async def cluster(tmp: Path, image: AgentImage | None = None) -> AsyncIterator[Cluster]:
    """The stand-in over HTTPS and a kubeconfig for it; with ``image``, its
    Pods run (a Podman kubelet), else they are scheduled and stay Pending."""
    kubelet = Kubelet(image.podman if image else None, tmp / "kubelet")
    kubelet.tmp.mkdir(parents=True)
    async with kube_standin(tmp / "apiserver", KUBE_TOKEN, run_pod=kubelet.run,
                            stop_pod=kubelet.stop) as standin:
        yield Cluster(standin, kubeconfig(tmp / "kubeconfig", standin, NAMESPACE))


def kube_profiles(kubeconfig: Path, image: str = "localhost/turnvisor-agent:test",
                  **extra: Any) -> dict[str, AgentProfile]:
    """``kmock`` and ``kmock-codex``: the mock agent (the image's own) on
    ``executor = "kubernetes"``."""
    return parse_profiles({
        name: {"protocol": proto, "executor": "kubernetes", "image": image,
               "kubeconfig": str(kubeconfig),
               "command": ["python", "-m", "protocols.mock_agent", "--protocol", proto],
               **extra}
        for name, proto in (("kmock", "acp"), ("kmock-codex", "codex"))})


async def post(c: Cluster, plural: str, body: dict[str, Any],
               namespace: str = NAMESPACE) -> httpx.Response:
    """A create straight to the stand-in (what another client would send)."""
    async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=c.standin.ca), headers={
            "Authorization": f"Bearer {c.standin.token}"}) as http:
        return await http.post(f"{c.standin.url}/api/v1/namespaces/{namespace}/{plural}",
                               json=body)


def pod_names(c: Cluster, namespace: str = NAMESPACE) -> set[str]:
    return {p["metadata"]["name"] for p in c.standin.pods(namespace)}


def standin_containers(podman: str, label: str = STANDIN_LABEL) -> list[str]:
    """The ids of the containers the stand-in's kubelet made (running or not)."""
    out = subprocess.run([podman, "ps", "-a", "--format", "json", f"--filter=label={label}"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return [str(c["Id"]) for c in json.loads(out or "[]")]


def remove_standin_containers(podman: str, label: str = STANDIN_LABEL) -> None:
    ids = standin_containers(podman, label)
    if ids:
        subprocess.run([podman, "rm", "-f", *ids], capture_output=True, check=False,
                       timeout=120)
