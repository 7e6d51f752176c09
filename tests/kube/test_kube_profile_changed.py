"""A Pod re-attached after a backend restart whose profile changed meanwhile
(DESIGN.md §20): the Pod and its running turn are kept, and the session says
so — its DTO's ``profile_changed`` names the settings, its transcript gets a
warning notice.  Restarted with the same profile: nothing is said."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.kube.kube_support import AgentImage, cluster, pod_names
from tests.kube.test_kube_restart import pods_created
from tests.support.restart_takeover import (
    killed,
    restarted_saying_nothing,
    said_changed,
    session_dto,
    start_long_turn,
)
from tests.support.serverproc import server_process
from tests.support.ws import ws_client


def toml_of(kubeconfig: Path, image: str, marker: str) -> str:
    return ("[timeouts]\nagent_start_s = 60\n\n"
            '[agents.kmock]\nprotocol = "acp"\nexecutor = "kubernetes"\n'
            f'image = "{image}"\nkubeconfig = "{kubeconfig}"\n'
            'command = ["python", "-m", "protocols.mock_agent", "--protocol", "acp"]\n'
            f'env = {{ TV_MARKER = "{marker}" }}\n')


async def test_a_pod_made_from_another_profile_is_kept_and_said(
        tmp_path: Path, agent_image: AgentImage) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    with trio.fail_after(300):
        async with cluster(tmp_path, agent_image) as c:
            same = toml_of(c.kubeconfig, agent_image.image, "one")
            async with server_process(data, toml=same) as srv, ws_client(srv) as ws:
                turn = await start_long_turn(ws, "kmock", "kube profile changed",
                                             launch_timeout=70)
                (name,) = pod_names(c)
                assert (await session_dto(ws, turn.task_id))["profile_changed"] == []
                await killed(srv)
            created = pods_created(c.standin.created)
            # The same profile: re-attached, nothing said.
            turn = await restarted_saying_nothing(data, same, turn)
            # Its environment changed: the same Pod runs the same turn on, and
            # the session names what differs.
            changed = toml_of(c.kubeconfig, agent_image.image, "two")
            async with server_process(data, toml=changed) as srv, ws_client(srv) as ws:
                notice = await said_changed(ws, turn, ["env"])
                assert notice["metadata"]["variant"] == "warning"
                assert "'kmock' changed" in notice["content"], notice
                assert pod_names(c) == {name}
                assert pods_created(c.standin.created) == created
                # A cancel still lands on the kept agent.
                result = await ws.call("agent.cancel", {"session_id": turn.sid}, timeout=30)
                assert result["success"], result
