"""A ``turnvisor serve`` stopped (SIGTERM) or killed (SIGKILL) while a Pod's
agent runs a turn leaves the Pod running (and its Secret); the next ``turnvisor
serve`` on the same data dir re-attaches to that Pod (nothing new is created),
takes the running turn over (its output goes on in the same turn, a cancel
lands), and its start sweeps only this Turnvisor's Pods whose session is gone:
another Turnvisor's are left alone.  Deleting the session deletes its Pod."""

from __future__ import annotations

import signal
import tomllib
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.config import Config
from supervisor.executors.container import backend_instance
from supervisor.executors.kube_pod import LABEL_SESSION, LABEL_WORKSPACE
from tests.kube.kube_support import (
    NAMESPACE,
    AgentImage,
    cluster,
    kube_profiles,
    pod_names,
    post,
)
from tests.support.restart_takeover import (
    RunningTurn,
    delete_until,
    run_then_stop,
    take_over_and_cancel,
)
from tests.support.server import running_server
from tests.support.serverproc import server_process
from tests.support.ws import ws_client
from tests.web.support import launch, new_task


def toml_of(kubeconfig: Path, image: str) -> str:
    return ("[timeouts]\nagent_start_s = 60\n\n"
            '[agents.kmock]\nprotocol = "acp"\nexecutor = "kubernetes"\n'
            f'image = "{image}"\nkubeconfig = "{kubeconfig}"\n'
            'command = ["python", "-m", "protocols.mock_agent", "--protocol", "acp"]\n')


def leftover(name: str, workspace: str, session: str) -> dict[str, Any]:
    """A Pod as another backend made it (its container never runs: no such image)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {LABEL_WORKSPACE: workspace,
                                                  LABEL_SESSION: session}},
            "spec": {"containers": [{"name": "agentctl", "image": "localhost/absent:1"}]}}


def pods_created(standin_created: list[tuple[str, dict[str, Any]]]) -> int:
    return sum(1 for kind, _ in standin_created if kind == "Pod")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
async def test_a_backend_restart_takes_the_pods_turn_over_and_sweeps_only_what_is_gone(
        tmp_path: Path, agent_image: AgentImage, signum: signal.Signals) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    with trio.fail_after(240):
        async with cluster(tmp_path, agent_image) as c:
            toml = toml_of(c.kubeconfig, agent_image.image)
            instance = backend_instance(Config.from_mapping(data, tomllib.loads(toml)))

            async def leave(_turn: RunningTurn) -> str:
                (name,) = pod_names(c)
                # Left besides: a Pod of this Turnvisor whose session the store
                # does not have, and another Turnvisor's.
                for body in (leftover("gone-session", instance, "gone"),
                             leftover("theirs", "another-turnvisor", "theirs")):
                    assert (await post(c, "pods", body)).status_code == 201
                return name

            turn, name = await run_then_stop(data, toml, "kmock", signum, leave,
                                             launch_timeout=70)
            # The backend is gone; the Pod runs the turn on, its Secret kept.
            assert pod_names(c) == {name, "gone-session", "theirs"}
            assert ("Secret", NAMESPACE, name) in c.standin.objects
            created = pods_created(c.standin.created)
            async with server_process(data, toml=toml, log_level="INFO") as srv, \
                    ws_client(srv) as ws:
                # Listening means the supervisor has started, its sweep done.
                with trio.fail_after(30):
                    while "gone-session" in pod_names(c):
                        await trio.sleep(0.05)
                assert pod_names(c) == {name, "theirs"}
                await take_over_and_cancel(srv, ws, turn)
                # Re-attached to the same Pod: none was created, and the cancel
                # stopped the turn, not the Pod.
                assert pods_created(c.standin.created) == created
                assert name in pod_names(c)
                # The session deleted: its Pod and Secret go.
                await delete_until(ws, turn.sid, lambda: name not in pod_names(c) and (
                    "Secret", NAMESPACE, name) not in c.standin.objects)
            assert pod_names(c) == {"theirs"}  # another Turnvisor's is not ours to delete


async def test_a_pod_its_deleted_session_could_not_delete_is_swept_at_the_next_start(
        tmp_path: Path, agent_image: AgentImage) -> None:
    """The session is deleted while the API server is down: the delete is
    bounded and the Pod stays (nothing can reach it); the next start, its
    session gone from the store, deletes it and its Secret."""
    data = tmp_path / "data"
    with trio.fail_after(180):
        async with cluster(tmp_path, agent_image) as c:
            profiles = kube_profiles(c.kubeconfig, agent_image.image)
            async with running_server(data, timeouts={"agent_start_s": 60},
                                      profiles=profiles) as srv, ws_client(srv) as ws:
                sid = await launch(ws, await new_task(ws), "kmock")
                (name,) = pod_names(c)
                await c.standin.stop_listening()
                with trio.fail_after(40):
                    await ws.call("session.delete", {"session_id": sid}, timeout=40)
                await c.standin.listen_again()
            assert pod_names(c) == {name}
            assert ("Secret", NAMESPACE, name) in c.standin.objects
            async with running_server(data, timeouts={"agent_start_s": 60},
                                      profiles=profiles):
                with trio.fail_after(30):
                    while name in pod_names(c) or ("Secret", NAMESPACE, name) in \
                            c.standin.objects:
                        await trio.sleep(0.05)
