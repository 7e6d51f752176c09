"""The kubernetes profile keys, the cluster config, and what the executor sends
checked against Kubernetes' own OpenAPI schema (kubernetes-validate)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import trio

from supervisor.config import Config
from supervisor.executors.kube import launch_kube
from supervisor.executors.kube_api import KubeError, load_cluster
from supervisor.executors.kube_pod import pod_manifest, secret_manifest
from supervisor.profiles import AgentProfile, ProfileError, parse_profiles
from tests.kube.kube_support import cluster, kube_profiles, post

FULL = {"namespace": "agents", "service_account": "turnvisor-agent",
        "node_selector": {"kubernetes.io/arch": "amd64"},
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"},
                      "limits": {"memory": "2Gi", "cpu": 2}}}


def _profile(**keys: Any) -> AgentProfile:
    return parse_profiles({"k": {"protocol": "acp", "command": ["agent"],
                                 "executor": "kubernetes", **keys}})["k"]


def _validate(obj: dict[str, Any]) -> None:
    kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)


def test_the_keys_parse() -> None:
    kube = _profile(kubeconfig="~/.kube/config", **FULL).kube
    assert kube is not None
    assert (kube.namespace, kube.service_account, kube.kubeconfig) == (
        "agents", "turnvisor-agent", "~/.kube/config")
    assert kube.resources == {"requests": {"cpu": "500m", "memory": "512Mi"},
                              "limits": {"memory": "2Gi", "cpu": "2"}}
    assert _profile().kube is not None


@pytest.mark.parametrize(("keys", "error"), [
    ({"namespace": "Agents_1"}, "namespace must be a DNS label"),
    ({"namespace": 3}, "namespace must be a DNS label"),
    ({"service_account": "a b"}, "service_account must be a DNS name"),
    ({"node_selector": {"a": 1}}, "node_selector must be a table of strings"),
    ({"kubeconfig": "relative/config"}, "kubeconfig must be an absolute path"),
    ({"resources": {"limits": {"memory": "lots"}}}, "resources must be"),
    ({"resources": {"wishes": {"cpu": "1"}}}, "resources must be"),
    ({"resources": {"limits": "2Gi"}}, "resources must be"),
    ({"project_volume": {"claim": "projects"}}, "project_volume must be"),
    ({"project_volume": {"host_path": "srv/p"}}, "project_volume must be"),
    ({"project_volume": {"host_path": "/srv/p", "claim": "p", "path": "/p"}},
     "project_volume must be"),
    ({"project_volume": {"claim": "Bad_Name", "path": "/p"}}, "project_volume must be"),
    ({"project_volume": {"host_path": "/srv/../etc"}}, "project_volume must be"),
])
def test_a_bad_key_is_one_clear_error(keys: dict[str, Any], error: str) -> None:
    with pytest.raises(ProfileError, match=error) as caught:
        _profile(**keys)
    assert str(caught.value).startswith("[agents.k]:")


@pytest.mark.parametrize(("raw", "volume", "source"), [
    ({"host_path": "/srv/projects/"}, ("/srv/projects", "/srv/projects", None),
     {"hostPath": {"path": "/srv/projects/", "type": "Directory"}}),
    ({"claim": "projects", "path": "/home/me/src"}, ("/home/me/src", None, "projects"),
     {"persistentVolumeClaim": {"claimName": "projects"}}),
])
def test_a_project_volume_is_mounted_at_the_projects_path(
        tmp_path: Path, raw: dict[str, str], volume: tuple[str, str | None, str | None],
        source: dict[str, Any]) -> None:
    profile = _profile(project_volume=raw)
    assert profile.kube is not None and profile.kube.project_volume is not None
    got = profile.kube.project_volume
    assert (got.path, got.host_path and got.host_path.rstrip("/"), got.claim) == volume
    config = Config.from_mapping(tmp_path / "data", {})
    pod = pod_manifest(config, profile, f"{volume[0]}/app", "turnvisor-s1-abcdef", owner="s1")
    _validate(pod)
    (container,) = pod["spec"]["containers"]
    assert container["workingDir"] == f"{volume[0]}/app"
    assert container["volumeMounts"] == [{"name": "work", "mountPath": volume[0]}]
    assert pod["spec"]["volumes"] == [{"name": "work", **source}]


async def test_a_session_outside_the_project_volume_is_refused_before_anything_is_made(
        tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with cluster(tmp_path) as c:
            config = Config.from_mapping(tmp_path / "data", {}, profiles=kube_profiles(
                c.kubeconfig, project_volume={"host_path": "/srv/projects"}))
            with pytest.raises(KubeError, match=r"the session's directory /srv/projectsX/app "
                               r"is not in its project_volume \(/srv/projects\)"):
                async with launch_kube(config, config.profiles["kmock"], "/srv/projectsX/app",
                                       owner="s"):
                    pytest.fail("the cwd is not in the volume")
            assert c.standin.calls == []


def test_kubernetes_keys_on_another_executor_are_refused() -> None:
    with pytest.raises(ProfileError, match='namespace only apply to executor = "kubernetes"'):
        parse_profiles({"k": {"protocol": "acp", "command": ["agent"],
                              "executor": "container", "namespace": "agents"}})


def test_what_is_sent_fits_kubernetes_schema(tmp_path: Path) -> None:
    config = Config.from_mapping(tmp_path / "data", {})
    profile = _profile(image="registry.example/turnvisor-agent:1", env={"A": "1"}, **FULL)
    pod = pod_manifest(config, profile, "/work/s1", "turnvisor-s1-abcdef", owner="s1")
    secret = secret_manifest(config, profile, "turnvisor-s1-abcdef", "t" * 43, owner="s1")
    _validate(pod)
    _validate(secret)
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["serviceAccountName"] == "turnvisor-agent"
    assert spec["nodeSelector"] == {"kubernetes.io/arch": "amd64"}
    assert spec["containers"][0]["resources"]["limits"] == {"memory": "2Gi", "cpu": "2"}
    assert "t" * 43 not in json.dumps(pod)
    # offline_cancel_s (DESIGN.md §20) reaches the Pod's agentctl, as a local one's.
    args = spec["containers"][0]["args"]
    assert "--offline-cancel-s" not in args
    timed = _profile(offline_cancel_s=90, **FULL)
    args = pod_manifest(config, timed, "/w", "n", owner="s1")["spec"]["containers"][0]["args"]
    assert args[args.index("--offline-cancel-s") + 1] == "90"
    assert args.index("--offline-cancel-s") < args.index("--")
    # The check is not vacuous: a field Kubernetes does not have is refused.
    spec["containers"][0]["imagee"] = "x"
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate(pod)


async def test_the_standin_refuses_what_does_not_fit_the_schema(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with cluster(tmp_path) as c:
            resp = await post(c, "pods", {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "x", "imagee": "y"}]}})
            assert resp.status_code == 422, resp.text
            assert resp.json()["reason"] == "Invalid" and "imagee" in resp.json()["message"]
            assert c.standin.objects == {}


def test_an_exec_credential_is_refused_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": "aws"}}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    with pytest.raises(KubeError, match="exec plugin, which Turnvisor does not run"):
        load_cluster(_profile(kubeconfig=str(path)))


def test_a_missing_kubeconfig_is_named(tmp_path: Path) -> None:
    with pytest.raises(KubeError, match=r"cannot load .*nowhere"):
        load_cluster(_profile(kubeconfig=str(tmp_path / "nowhere")))


def test_the_namespace_comes_from_the_profile_else_the_context(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"tokenFile": "token"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u",
                                               "namespace": "from-context"}}]}))
    (tmp_path / "token").write_text("file-token\n")
    from_context = load_cluster(_profile(kubeconfig=str(path)))
    assert from_context.namespace == "from-context"
    # A token file beside the kubeconfig is read (relative to it), and is the proxy's credential.
    assert from_context.route.headers == {"Authorization": "Bearer file-token"}
    assert load_cluster(_profile(kubeconfig=str(path), namespace="mine")).namespace == "mine"


async def test_a_refused_credential_fails_the_start_plainly(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with cluster(tmp_path) as c:
            c.standin.token = "another-token"
            config = Config.from_mapping(tmp_path / "data", {},
                                         profiles=kube_profiles(c.kubeconfig))
            with pytest.raises(KubeError, match=r"cannot list Pods: 401 Unauthorized"):
                async with launch_kube(config, config.profiles["kmock"], "/w", owner="s"):
                    pytest.fail("the API server refused the token")
            assert c.standin.objects == {}


def test_an_unreadable_token_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"tokenFile": "gone"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    with pytest.raises(KubeError, match=r"cannot read its token file: .*gone"):
        load_cluster(_profile(kubeconfig=str(path)))
