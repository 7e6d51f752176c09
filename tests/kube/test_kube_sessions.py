"""Sessions on ``executor = "kubernetes"`` through the WS API: the agent runs
behind agentctl in a Pod the stand-in API server runs with Podman, reached
through the server's Pod proxy (HTTP and the event stream's WebSocket)."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import trio

from supervisor.executors.kube_pod import LABEL_SESSION, LABEL_WORKSPACE
from tests.kube.kube_support import (
    NAMESPACE,
    AgentImage,
    cluster,
    kube_profiles,
    pod_names,
    standin_containers,
)
from tests.support.server import running_server
from tests.support.ws import is_cancellation, is_state, is_turn_completed, ws_client
from tests.web.support import new_task, start_turn

#: Bound on one test: a Pod's start is a container's (about a second here).
TEST_S = 120


@pytest.mark.parametrize("agent", ["kmock", "kmock-codex"])
async def test_a_session_in_a_pod_runs_a_turn_and_its_cancel_lands(
        tmp_path: Path, agent_image: AgentImage, agent: str) -> None:
    with trio.fail_after(TEST_S):
        async with cluster(tmp_path, agent_image) as c, running_server(
                tmp_path / "data", timeouts={"agent_start_s": 60},
                profiles=kube_profiles(c.kubeconfig, agent_image.image)) as srv, \
                ws_client(srv) as ws:
            task_id = await new_task(ws)
            session = await ws.call("session.launch", {"task_id": task_id, "agent": agent},
                                    timeout=70)
            sid = session["id"]
            assert session["state"] == "WAITING_FOR_INPUT", session
            # One Pod, labelled with this Turnvisor and the session, and its Secret.
            (pod,) = c.standin.pods(NAMESPACE)
            labels = pod["metadata"]["labels"]
            assert labels[LABEL_SESSION] == sid
            assert labels[LABEL_WORKSPACE] and pod["status"]["phase"] == "Running"
            name = pod["metadata"]["name"]
            assert ("Secret", NAMESPACE, name) in c.standin.objects
            # The token is not in the Pod spec: a reference to the Secret.
            (container,) = pod["spec"]["containers"]
            token_env = [e for e in container["env"]
                         if e["name"] == "TURNVISOR_AGENTCTL_TOKEN"]
            assert token_env == [{"name": "TURNVISOR_AGENTCTL_TOKEN", "valueFrom": {
                "secretKeyRef": {"name": name, "key": "token"}}}]

            await ws.call("session.subscribe", {"session_id": sid})
            await start_turn(ws, sid, "/delay 5000")
            result = await ws.call("agent.cancel", {"session_id": sid}, timeout=30)
            assert (result["success"], result["session_id"]) == (True, sid), result
            await ws.wait_for(is_cancellation(sid, False), timeout=30)
            await ws.wait_for(is_state(sid, "WAITING_FOR_INPUT"), timeout=30)
            statuses = [m for m in ws.of("session.message.added", sid)
                        if m["message"]["kind"] == "status"]
            assert any("cancelled" in m["message"]["content"].lower() for m in statuses), \
                statuses
            # Everything went through the API server: the event stream's WebSocket
            # and agentctl's HTTP calls on the Pod's proxy.  (The cancel goes as a
            # frame on that WebSocket once its prompt is answered, else as a
            # request: either way through the proxy.)
            proxy = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}:8765/proxy/api/v1/"
            assert ("WS", proxy + "events") in c.standin.calls
            assert ("POST", proxy + "prompt") in c.standin.calls

            # A second turn runs to its end on the same Pod.
            mark = len(ws.notifications)  # its own end: the first turn's is kept too
            await ws.call("message.add", {"session_id": sid, "content": "hello"})
            await ws.wait_for(is_turn_completed(sid), timeout=30, after=mark)

            await ws.call("session.delete", {"session_id": sid}, timeout=30)
            with trio.fail_after(30):
                while name in pod_names(c) or ("Secret", NAMESPACE, name) in \
                        c.standin.objects:
                    await trio.sleep(0.05)
            assert c.standin.ports == {}
            assert standin_containers(agent_image.podman) == []

        # Every object Turnvisor sent fits Kubernetes' own schema (the stand-in
        # refuses one that does not, with 422: checked again here).
        kinds = sorted(kind for kind, _ in c.standin.created)
        assert kinds == ["Pod", "Secret"], kinds
        for _, body in c.standin.created:
            kubernetes_validate.validate(body, kubernetes_validate.latest_version(),
                                         strict=True)


async def test_a_backend_that_stops_deletes_its_pods(tmp_path: Path,
                                                      agent_image: AgentImage) -> None:
    with trio.fail_after(TEST_S):
        async with cluster(tmp_path, agent_image) as c:
            async with running_server(
                    tmp_path / "data", timeouts={"agent_start_s": 60},
                    profiles=kube_profiles(c.kubeconfig, agent_image.image)) as srv, \
                    ws_client(srv) as ws:
                task_id = await new_task(ws)
                for _ in range(2):
                    await ws.call("session.launch", {"task_id": task_id, "agent": "kmock"},
                                  timeout=70)
                assert len(pod_names(c)) == 2
            # The server has stopped: each Pod went with its execution (none left
            # for the next start's sweep), its container and its Secret too.
            with trio.fail_after(30):
                while c.standin.objects:
                    await trio.sleep(0.05)
            assert c.standin.ports == {}
            assert standin_containers(agent_image.podman) == []
