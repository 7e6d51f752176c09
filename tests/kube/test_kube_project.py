"""The project in the Pod: a profile's ``project_volume`` (here a hostPath,
which the stand-in's kubelet bind-mounts as a node would) puts the projects
in the agent's Pod at the path the backend knows them by, so the agent works
on the session's project itself, not on an empty directory."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.kube.kube_support import AgentImage, cluster, kube_profiles, pod_names
from tests.support.server import running_server
from tests.support.ws import is_state, ws_client
from tests.web.support import launch, new_task, start_turn


async def test_the_agent_in_the_pod_works_on_the_project_on_the_volume(
        tmp_path: Path, agent_image: AgentImage) -> None:
    projects = tmp_path / "projects"
    app = projects / "app"
    app.mkdir(parents=True)
    # The Pod's user need not be this one: the project is open to it.
    projects.chmod(0o777)
    app.chmod(0o777)
    readme = app / "README.md"
    readme.write_text("written on the backend's machine\n")
    readme.chmod(0o666)
    with trio.fail_after(120):
        async with cluster(tmp_path, agent_image) as c, running_server(
                tmp_path / "data", timeouts={"agent_start_s": 60},
                profiles=kube_profiles(c.kubeconfig, agent_image.image, cwd=str(app),
                                       project_volume={"host_path": str(projects)})) as srv, \
                ws_client(srv) as ws:
            sid = await launch(ws, await new_task(ws), "kmock")
            (pod,) = c.standin.pods()
            assert pod["spec"]["volumes"] == [{"name": "work", "hostPath": {
                "path": str(projects), "type": "Directory"}}]
            await ws.call("session.subscribe", {"session_id": sid})
            # The agent appends to the file it finds in its working directory:
            # the project's own, seen and written through the volume.
            await start_turn(ws, sid, "/append README.md appended in the Pod")
            await ws.wait_for(is_state(sid, "WAITING_FOR_INPUT"), timeout=30)
            assert readme.read_text() == ("written on the backend's machine\n"
                                          "appended in the Pod\n")
            await ws.call("session.delete", {"session_id": sid}, timeout=30)
            with trio.fail_after(30):
                while pod_names(c):
                    await trio.sleep(0.05)
        # The project outlives the Pod (a volume, not the Pod's own directory).
        assert readme.read_text().endswith("appended in the Pod\n")
