"""The kubernetes executor against the stand-in API server, where no Pod needs
to run: a Pod that never becomes ready, the startup sweep, what is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.config import Config
from supervisor.executors.container import backend_instance
from supervisor.executors.kube import launch_kube, sweep_kube
from supervisor.executors.kube_api import KubeError
from supervisor.executors.kube_pod import LABEL_SESSION, LABEL_WORKSPACE
from tests.kube.kube_support import NAMESPACE, cluster, kube_profiles, pod_names, post
from tests.support.server import running_server
from tests.support.ws import ws_client
from tests.web.support import new_task


def _config(tmp_path: Path, kubeconfig: Path, **extra: Any) -> Config:
    return Config.from_mapping(tmp_path / "data", {"timeouts": {"agent_start_s": 4}},
                               profiles=kube_profiles(kubeconfig, **extra))


async def test_a_pod_that_never_gets_ready_fails_the_start_with_its_events(
        tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with cluster(tmp_path) as c:
            # The stand-in's one node has no disktype=ssd: the scheduler says so.
            config = _config(tmp_path, c.kubeconfig, node_selector={"disktype": "ssd"})
            with pytest.raises(KubeError) as caught:
                async with launch_kube(config, config.profiles["kmock"], "/work",
                                       owner="s-never"):
                    pytest.fail("the Pod cannot be ready")
            message = str(caught.value)
            assert "was not ready within 4s" in message, message
            assert "FailedScheduling" in message and "didn't match Pod's node" in message, \
                message
            # Deleted with its Secret once the start failed.
            assert c.standin.objects == {}, c.standin.objects


def _leftover(name: str, workspace: str, session: str, kind: str = "Pod") -> dict[str, object]:
    labels = {LABEL_WORKSPACE: workspace, LABEL_SESSION: session}
    if kind == "Secret":
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name,
                                                                   "labels": labels},
                "data": {"token": "eA=="}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "agentctl", "image": "x"}]}}


async def test_startup_sweeps_this_workspaces_leftovers_and_no_one_elses(
        tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with cluster(tmp_path) as c:
            data = tmp_path / "data"
            mine = backend_instance(_config(tmp_path, c.kubeconfig))
            for body in (_leftover("mine-1", mine, "s1"), _leftover("mine-2", mine, "s2"),
                         _leftover("mine-1", mine, "s1", "Secret"),
                         _leftover("theirs-1", "another-turnvisor", "s1"),
                         _leftover("theirs-1", "another-turnvisor", "s1", "Secret"),
                         _leftover("blank-labels", "", "")):
                plural = "secrets" if body["kind"] == "Secret" else "pods"
                assert (await post(c, plural, body)).status_code == 201
            # Same labels in another namespace: another profile's, untouched.
            assert (await post(c, "pods", _leftover("elsewhere", mine, "s3"),
                               namespace="other")).status_code == 201
            async with running_server(data, profiles=kube_profiles(c.kubeconfig)):
                pass
            assert pod_names(c) == {"theirs-1", "blank-labels"}
            assert {n for (k, ns, n) in c.standin.objects if k == "Secret"} == {"theirs-1"}
            assert pod_names(c, "other") == {"elsewhere"}
            deleted = {path.rsplit("/", 1)[1] for method, path in c.standin.calls
                       if method == "DELETE"}
            assert deleted == {"mine-1", "mine-2"}, deleted
            # The list asked for this workspace's label only.
            assert ("GET", f"/api/v1/namespaces/{NAMESPACE}/pods") in c.standin.calls


async def test_the_sweep_contacts_no_cluster_without_a_kubernetes_profile(
        tmp_path: Path) -> None:
    config = Config.from_mapping(tmp_path / "data", {})
    with trio.fail_after(10):
        assert await sweep_kube(config) == 0


async def test_through_the_ws_api_a_start_that_never_gets_ready_says_why(
        tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with cluster(tmp_path) as c, running_server(
                tmp_path / "data", timeouts={"agent_start_s": 3},
                profiles=kube_profiles(c.kubeconfig, node_selector={"disktype": "ssd"}),
        ) as srv, ws_client(srv) as ws:
            task_id = await new_task(ws)
            frame = await ws.request("session.launch", {"task_id": task_id, "agent": "kmock"},
                                     timeout=30)
            assert frame["type"] == "error", frame
            message = frame["payload"]["message"]
            assert message.startswith("agent 'kmock' cannot start: Pod turnvisor-"), message
            assert "was not ready within 3s; its events:\nWarning FailedScheduling: 0/1 nodes " \
                "are available: 1 node(s) didn't match Pod's node affinity/selector." in message
            with trio.fail_after(10):
                while c.standin.objects:
                    await trio.sleep(0.05)


async def test_an_unreachable_cluster_does_not_stop_the_start(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with cluster(tmp_path) as c:
        pass  # its port is closed now
    with trio.fail_after(60):
        async with running_server(tmp_path / "data", timeouts={"agent_start_s": 5},
                                  profiles=kube_profiles(c.kubeconfig)) as srv:
            assert srv.url
    assert any("startup sweep of Pods in agents" in r.getMessage() and "skipped" in
               r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
