"""A Pod re-attached after a backend restart whose profile changed meanwhile
(DESIGN.md §20): the Pod and its running turn are kept, and the session says
so — its DTO's ``profile_changed`` names the settings, its transcript gets a
warning notice.  Restarted with the same profile: nothing is said."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import trio

from tests.kube.kube_support import AgentImage, cluster, pod_names
from tests.kube.test_kube_restart import pods_created
from tests.support.restart_takeover import chunks_past
from tests.support.serverproc import server_process
from tests.support.ws import WsClient, ws_client
from tests.web.support import new_task


def toml_of(kubeconfig: Path, image: str, marker: str) -> str:
    return ("[timeouts]\nagent_start_s = 60\n\n"
            '[agents.kmock]\nprotocol = "acp"\nexecutor = "kubernetes"\n'
            f'image = "{image}"\nkubeconfig = "{kubeconfig}"\n'
            'command = ["python", "-m", "protocols.mock_agent", "--protocol", "acp"]\n'
            f'env = {{ TV_MARKER = "{marker}" }}\n')


async def session_dto(ws: WsClient, task_id: str) -> dict[str, Any]:
    (session,) = (await ws.call("session.list", {"task_id": task_id}))["sessions"]
    return dict(session)


async def notices(ws: WsClient, sid: str) -> list[dict[str, Any]]:
    listed = await ws.call("message.list", {"session_id": sid})
    return [m for m in listed["messages"] if "profile_changed" in m["metadata"]]


async def test_a_pod_made_from_another_profile_is_kept_and_said(
        tmp_path: Path, agent_image: AgentImage) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    with trio.fail_after(300):
        async with cluster(tmp_path, agent_image) as c:
            same = toml_of(c.kubeconfig, agent_image.image, "one")
            async with server_process(data, toml=same) as srv, ws_client(srv) as ws:
                task_id = await new_task(ws, "kube profile changed")
                sid = (await ws.call("session.launch", {"task_id": task_id, "agent": "kmock"},
                                     timeout=70))["id"]
                (name,) = pod_names(c)
                turn_id = (await ws.call("message.add", {"session_id": sid,
                                                         "content": "/delay 60000"}))["turn_id"]
                seen = await chunks_past(ws, sid, turn_id, 2)
                assert (await session_dto(ws, task_id))["profile_changed"] == []
                srv.proc.send_signal(signal.SIGKILL)
                await srv.proc.wait()
            created = pods_created(c.standin.created)
            # The same profile: re-attached, nothing said.
            async with server_process(data, toml=same) as srv, ws_client(srv) as ws:
                seen = await chunks_past(ws, sid, turn_id, max(seen) + 2)
                assert (await session_dto(ws, task_id))["profile_changed"] == []
                assert await notices(ws, sid) == []
                srv.proc.send_signal(signal.SIGKILL)
                await srv.proc.wait()
            # Its environment changed: the same Pod runs the same turn on, and
            # the session names what differs.
            changed = toml_of(c.kubeconfig, agent_image.image, "two")
            async with server_process(data, toml=changed) as srv, ws_client(srv) as ws:
                await chunks_past(ws, sid, turn_id, max(seen) + 2)
                with trio.fail_after(30):
                    while not (dto := await session_dto(ws, task_id))["profile_changed"]:
                        await trio.sleep(0.05)
                assert dto["profile_changed"] == ["env"], dto
                assert dto["state"] == "RUNNING" and dto["current_turn_id"] == turn_id, dto
                (notice,) = await notices(ws, sid)
                assert notice["metadata"]["profile_changed"] == ["env"]
                assert notice["metadata"]["variant"] == "warning"
                assert "'kmock' changed" in notice["content"], notice
                assert pod_names(c) == {name}
                assert pods_created(c.standin.created) == created
                # A cancel still lands on the kept agent.
                result = await ws.call("agent.cancel", {"session_id": sid}, timeout=30)
                assert result["success"], result
