"""What the kubernetes executor sends: a session's Pod and the Secret with its token.

Plain data (the objects as the API takes them), so tests can check them
against Kubernetes' own schema and the stand-in API server can run them.

The Pod runs ``turnvisor agentctl`` (the image's entrypoint) in the image the
container executor builds, with the same arguments as the container
executor's.  Its agentctl token is not in the Pod spec: it is in a Secret of
the same name, read into agentctl's environment (``secretKeyRef``), so reading
the Pod (``pods get`` is wider than ``secrets get`` in most RBAC set-ups)
does not give the token.  The session's directory is the profile's
``project_volume`` (a hostPath or a PersistentVolumeClaim holding the
projects, mounted at the path they have on the backend's machine), else an
empty directory of the Pod's own.  The agent gets no Kubernetes credential:
``automountServiceAccountToken`` is off, and service links are off (no
environment about the namespace's Services).
"""

from __future__ import annotations

import base64
import math
import re
from typing import Any, Final

from protocols.agentctl_wire import TOKEN_ENV

from ..config import Config
from ..profiles import AgentProfile, KubeSettings, ProjectVolume
from .agentctl import offline_args
from .container import AGENTCTL_PORT, backend_instance, default_image
from .launch_record import KUBE_FIELDS, record

__all__ = ["LABEL_SESSION", "LABEL_WORKSPACE", "LAUNCH_ANNOTATION", "label_value", "pod_manifest",
           "secret_manifest", "workspace_labels"]

#: This Turnvisor's id (``backend_instance``: host + data dir) on the objects
#: it makes: its startup sweep removes only its own.
LABEL_WORKSPACE: Final = "turnvisor.workspace"
#: The session the Pod runs the agent of.
LABEL_SESSION: Final = "turnvisor.session"
TOKEN_KEY: Final = "token"
#: What the Pod was made from (launch_record.py): a backend that re-attaches
#: to it compares it with the profile as it is then.
LAUNCH_ANNOTATION: Final = "turnvisor.launch"
_LABEL_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def label_value(text: str) -> str:
    """``text`` as a label value (at most 63 of [A-Za-z0-9_.-], alphanumeric ends)."""
    return _LABEL_BAD.sub("-", text)[:63].strip("-_.")


def workspace_labels(config: Config) -> dict[str, str]:
    return {LABEL_WORKSPACE: backend_instance(config)}


def _labels(config: Config, profile: AgentProfile, owner: str | None) -> dict[str, str]:
    return {**workspace_labels(config), LABEL_SESSION: label_value(owner or ""),
            "turnvisor.profile": label_value(profile.name)}


def secret_manifest(config: Config, profile: AgentProfile, name: str, token: str, *,
                    owner: str | None) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "labels": _labels(config, profile, owner)},
        "data": {TOKEN_KEY: base64.b64encode(token.encode()).decode()},
    }


def pod_manifest(config: Config, profile: AgentProfile, cwd: str, name: str, *,
                 owner: str | None) -> dict[str, Any]:
    """The session's Pod; ``name`` is also its Secret's."""
    kube = profile.kube or KubeSettings()
    t = config.timeouts
    # The projects' volume at their path (the session's cwd is under it: kube.py
    # checks), else the session's directory is the Pod's own, empty.
    volume = kube.project_volume
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in profile.env.items()
                                 if k != TOKEN_ENV]
    env.append({"name": TOKEN_ENV,
                "valueFrom": {"secretKeyRef": {"name": name, "key": TOKEN_KEY}}})
    container: dict[str, Any] = {
        "name": "agentctl",
        "image": profile.image or default_image(),
        "args": ["--listen", f"0.0.0.0:{AGENTCTL_PORT}", "--protocol", profile.protocol,
                 "--cwd", cwd, "--cancel-join", f"{t.cancel_join_s:g}",
                 *offline_args(profile), "--", *profile.command],
        "env": env,
        "ports": [{"name": "agentctl", "containerPort": AGENTCTL_PORT, "protocol": "TCP"}],
        # agentctl answers /health without a token once it listens.
        "readinessProbe": {"httpGet": {"path": "/api/v1/health", "port": AGENTCTL_PORT},
                           "periodSeconds": 1, "failureThreshold": 3},
        "workingDir": cwd,
        "volumeMounts": [{"name": "work", "mountPath": volume.path if volume else cwd}],
        "securityContext": {"allowPrivilegeEscalation": False,
                            "seccompProfile": {"type": "RuntimeDefault"}},
    }
    if kube.resources:
        container["resources"] = {k: dict(v) for k, v in kube.resources.items()}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": max(1, math.ceil(t.term_grace_s)),
        "containers": [container],
        "volumes": [{"name": "work", **_source(volume)}],
    }
    if kube.service_account:
        spec["serviceAccountName"] = kube.service_account
    if kube.node_selector:
        spec["nodeSelector"] = dict(kube.node_selector)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": _labels(config, profile, owner),
                         "annotations": {LAUNCH_ANNOTATION: record(profile, KUBE_FIELDS)}},
            "spec": spec}


def _source(volume: ProjectVolume | None) -> dict[str, Any]:
    if volume is None:
        return {"emptyDir": {}}
    if volume.claim is not None:
        return {"persistentVolumeClaim": {"claimName": volume.claim}}
    return {"hostPath": {"path": volume.host_path, "type": "Directory"}}
