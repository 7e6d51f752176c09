"""The stand-in API server's kubelet: runs a Pod's one container with Podman.

It does what a kubelet reports, for the parts of a Pod Turnvisor sends:
schedules it on the one node (``NODE_LABELS``: a ``nodeSelector`` that does
not fit leaves it Pending with a FailedScheduling event, as the scheduler
would), resolves ``secretKeyRef`` env from the server's Secrets
(CreateContainerConfigError when missing), looks for the image in Podman's
store (no registry is reached: a missing image is ErrImagePull and
ImagePullBackOff), runs the container (args after the image's entrypoint,
``workingDir``, each ``emptyDir`` as a fresh directory, each ``hostPath``
as a bind mount of that directory (FailedMount when it is not one), container ports
published on loopback), and marks the Pod Ready once its ``readinessProbe``
(httpGet) answers 200; a container that exits makes the Pod Failed or
Succeeded with its exit code.  Every container it starts is labelled
``kube-standin`` so a test run can remove what it left.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import trio

from tests.support.kube_standin import KubeStandin, now

__all__ = ["NODE", "NODE_LABELS", "STANDIN_LABEL", "Kubelet"]

NODE: Final = "standin-node"
NODE_LABELS: Final = {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux"}
STANDIN_LABEL: Final = "kube-standin"
#: As the container tests' engine sets them (an unprivileged-capability host).
_ULIMITS: Final = ("--ulimit", "nofile=16384:16384", "--ulimit", "nproc=32768:32768")


@dataclass(eq=False)
class Kubelet:
    """``podman`` None: Pods are scheduled but their containers never start
    (for tests that need no Pod to run)."""

    podman: str | None
    tmp: Path
    #: (namespace, name) → container id.
    containers: dict[tuple[str, str], str] = field(default_factory=dict)

    async def _podman(self, *args: str, check: bool = True) -> str:
        assert self.podman is not None
        result = await trio.run_process([self.podman, *args], capture_stdout=True,
                                        capture_stderr=True, check=False)
        if check and result.returncode != 0:
            raise OSError(f"podman {args[0]} failed: {result.stderr.decode(errors='replace')}")
        return result.stdout.decode()

    async def run(self, server: KubeStandin, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        ns, name = meta["namespace"], meta["name"]
        selector = spec.get("nodeSelector", {})
        if any(NODE_LABELS.get(k) != v for k, v in selector.items()):
            server.record_event(pod, "FailedScheduling",
                                "0/1 nodes are available: 1 node(s) didn't match Pod's node "
                                "affinity/selector.", "Warning", "default-scheduler")
            server.update_pod(pod, {**pod["status"], "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "lastTransitionTime": now()}]})
            return
        server.record_event(pod, "Scheduled", f"Successfully assigned {ns}/{name} to {NODE}",
                            component="default-scheduler")
        (container,) = spec["containers"]
        cname, image = container["name"], container["image"]

        def waiting(reason: str, message: str) -> None:
            server.update_pod(pod, {"phase": "Pending", "hostIP": "127.0.0.1",
                                    "startTime": now(), "conditions": [
                                        {"type": "PodScheduled", "status": "True"},
                                        {"type": "Ready", "status": "False",
                                         "reason": "ContainersNotReady"}],
                                    "containerStatuses": [{
                                        "name": cname, "image": image, "imageID": "",
                                        "ready": False, "restartCount": 0,
                                        "state": {"waiting": {"reason": reason,
                                                              "message": message}}}]})

        env: dict[str, str] = {}
        for item in container.get("env", []):
            ref = item.get("valueFrom", {}).get("secretKeyRef")
            if ref is None:
                env[item["name"]] = item.get("value", "")
                continue
            value = server.secret_value(ns, ref["name"], ref["key"])
            if value is None:
                message = f'secret "{ref["name"]}" not found'
                server.record_event(pod, "Failed", f"Error: {message}", "Warning")
                waiting("CreateContainerConfigError", message)
                return
            env[item["name"]] = value
        if self.podman is None:
            waiting("ContainerCreating", "")
            return
        for volume in spec.get("volumes", []):
            host = volume.get("hostPath", {}).get("path")
            if host is not None and not await trio.Path(host).is_dir():
                server.record_event(pod, "FailedMount", f'MountVolume.SetUp failed for volume '
                                    f'"{volume["name"]}" : hostPath type check failed: {host} '
                                    "is not a directory", "Warning")
                waiting("ContainerCreating", "")
                return
        if not await self._image_exists(image):
            message = (f'Failed to pull image "{image}": initializing source '
                       f"docker://{image}: reading manifest: manifest unknown")
            server.record_event(pod, "Failed", message, "Warning")
            server.record_event(pod, "Failed", "Error: ErrImagePull", "Warning")
            server.record_event(pod, "BackOff", f'Back-off pulling image "{image}"', "Warning")
            waiting("ImagePullBackOff", f'Back-off pulling image "{image}"')
            return
        server.record_event(pod, "Pulled",
                            f'Container image "{image}" already present on machine')
        waiting("ContainerCreating", "")
        cid = await self._start(pod, container, env)
        if ("Pod", ns, name) not in server.objects or "deletionTimestamp" in meta:
            # Deleted while its container was being made: no one else will remove it.
            await self.stop(pod, 0)
            return
        server.record_event(pod, "Created", f"Created container {cname}")
        server.record_event(pod, "Started", f"Started container {cname}")
        ports: dict[int, int] = {}
        for p in container.get("ports", []):
            out = await self._podman("port", cid, f"{p['containerPort']}/tcp")
            ports[p["containerPort"]] = int(out.strip().splitlines()[0].rsplit(":", 1)[1])
        server.ports[(ns, name)] = ports
        await self._follow(server, pod, cid, ports)

    async def _image_exists(self, image: str) -> bool:
        assert self.podman is not None
        return (await trio.run_process([self.podman, "image", "exists", image],
                                       check=False)).returncode == 0

    async def _start(self, pod: dict[str, Any], container: dict[str, Any],
                     env: dict[str, str]) -> str:
        meta, spec = pod["metadata"], pod["spec"]
        volumes: list[str] = []
        for volume in spec.get("volumes", []):
            for mount in container.get("volumeMounts", []):
                if mount["name"] != volume["name"]:
                    continue
                if "emptyDir" in volume:
                    host = tempfile.mkdtemp(prefix="emptydir-", dir=self.tmp)
                    volumes += ["-v", f"{host}:{mount['mountPath']}"]
                elif "hostPath" in volume:  # the node's directory, as it is
                    volumes += ["-v", f"{volume['hostPath']['path']}:{mount['mountPath']}"]
        # The env (the token among it) in a private file, not in podman's argv.
        fd, env_file = tempfile.mkstemp(prefix="env-", dir=self.tmp)
        with os.fdopen(fd, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in env.items())
        publish = [a for p in container.get("ports", [])
                   for a in ("-p", f"127.0.0.1::{p['containerPort']}")]
        workdir = ["-w", container["workingDir"]] if container.get("workingDir") else []
        command = (["--entrypoint", json.dumps(container["command"])]
                   if container.get("command") else [])
        out = await self._podman(
            "run", "-d", "--name", f"k8s_{meta['namespace']}_{meta['name']}",
            "--label", f"{STANDIN_LABEL}=1", *_ULIMITS, "--env-file", env_file,
            *volumes, *publish, *workdir, *command, container["image"],
            *container.get("args", []))
        cid = out.strip()
        self.containers[(meta["namespace"], meta["name"])] = cid
        return cid

    async def _follow(self, server: KubeStandin, pod: dict[str, Any], cid: str,
                      ports: dict[int, int]) -> None:
        """Probe readiness, then watch for the container's exit."""
        (container,) = pod["spec"]["containers"]
        probe = container.get("readinessProbe", {}).get("httpGet")
        period = float(container.get("readinessProbe", {}).get("periodSeconds", 10))
        ready = probe is None
        started = now()
        reported: bool | None = None
        async with httpx.AsyncClient(timeout=httpx.Timeout(2.0)) as http:
            while True:
                inspect = json.loads(await self._podman("inspect", cid, check=False) or "[]")
                if not inspect:
                    return  # removed (the Pod was deleted)
                state = inspect[0]["State"]
                if not state["Running"]:
                    code = int(state["ExitCode"])
                    server.update_pod(pod, {
                        "phase": "Succeeded" if code == 0 else "Failed",
                        "containerStatuses": [{
                            "name": container["name"], "image": container["image"],
                            "imageID": "", "ready": False, "restartCount": 0,
                            "state": {"terminated": {
                                "exitCode": code, "reason": "Completed" if code == 0
                                else "Error", "finishedAt": now()}}}]})
                    return
                if probe is not None:
                    port = ports.get(int(probe["port"]))
                    try:
                        resp = await http.get(f"http://127.0.0.1:{port}{probe['path']}")
                        ready = resp.status_code == 200
                    except httpx.HTTPError:
                        ready = False
                if ready != reported:
                    reported = ready
                    flag = "True" if ready else "False"
                    server.update_pod(pod, {
                        "phase": "Running", "hostIP": "127.0.0.1", "podIP": "127.0.0.1",
                        "startTime": started, "conditions": [
                            {"type": "PodScheduled", "status": "True"},
                            {"type": "Initialized", "status": "True"},
                            {"type": "ContainersReady", "status": flag},
                            {"type": "Ready", "status": flag}],
                        "containerStatuses": [{
                            "name": container["name"], "image": container["image"],
                            "imageID": "", "ready": ready, "restartCount": 0,
                            "started": True,
                            "state": {"running": {"startedAt": started}}}]})
                await trio.sleep(min(period, 0.2) if not ready else 1.0)

    async def stop(self, pod: dict[str, Any], grace_s: int) -> None:
        meta = pod["metadata"]
        cid = self.containers.pop((meta["namespace"], meta["name"]), None)
        if cid is None or self.podman is None:
            return
        # ``rm -f`` that meets the container in the middle of another podman
        # call on it (the readiness loop's inspect) can leave it stopped but
        # there: tried again until it is gone (a kubelet does not give up either).
        for attempt in range(10):
            await self._podman("rm", "-f", "-t", str(grace_s if attempt == 0 else 0), cid,
                               check=False)
            gone = await trio.run_process([self.podman, "container", "exists", cid],
                                          check=False, capture_stdout=True,
                                          capture_stderr=True)
            if gone.returncode != 0:
                return
            await trio.sleep(0.2)
