"""Link loss for Pods (issue 44 item 4, DESIGN.md §20): the link to a Pod's
agentctl goes through the API server's Pod proxy, and re-connects through it
after a cut.  The stand-in's proxy is cut (``KubeStandin.set_cut``: 503 and
its WebSockets dropped, as a real one that cannot reach the Pod) and restored."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import httpx
import trio

from supervisor.executors.agentctl_adapter import AgentctlAdapter
from supervisor.executors.container import AGENTCTL_PORT
from supervisor.executors.kube_pod import TOKEN_KEY
from tests.kube.kube_support import (
    NAMESPACE,
    AgentImage,
    Cluster,
    cluster,
    kube_profiles,
    pod_names,
)
from tests.support.server import Server, running_server
from tests.support.ws import WsClient, is_state, is_turn_completed, ws_client
from tests.web.support import launch, new_task, start_turn

TEST_S = 150


def adapter_of(srv: Server, sid: str) -> AgentctlAdapter:
    adapter = srv.sup.lifecycle.executions[sid].adapter
    assert isinstance(adapter, AgentctlAdapter)
    return adapter


async def agentctl_status(c: Cluster, name: str) -> dict[str, Any]:
    """The Pod's agentctl's status, asked on the port its container publishes
    here: not through the API server's proxy, which a test may have cut."""
    port = c.standin.ports[(NAMESPACE, name)][AGENTCTL_PORT]
    token = c.standin.secret_value(NAMESPACE, name, TOKEN_KEY)
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.get(f"http://127.0.0.1:{port}/api/v1/status",
                           headers={"Authorization": f"Bearer {token}"})
    r.raise_for_status()
    status: dict[str, Any] = r.json()
    return status


async def gone(ws: WsClient, c: Cluster, sid: str, name: str) -> None:
    """Delete the session; return once its Pod (container included) and Secret are gone."""
    await ws.call("session.delete", {"session_id": sid}, timeout=40)
    with trio.fail_after(30):
        while name in pod_names(c) or ("Secret", NAMESPACE, name) in c.standin.objects:
            await trio.sleep(0.05)


async def test_a_stop_while_the_pod_does_not_answer_is_applied_when_it_answers_again(
        tmp_path: Path, agent_image: AgentImage) -> None:
    with trio.fail_after(TEST_S):
        async with cluster(tmp_path, agent_image) as c, running_server(
                tmp_path / "data", timeouts={"agent_start_s": 60},
                profiles=kube_profiles(c.kubeconfig, agent_image.image)) as srv, \
                ws_client(srv) as ws:
            task = await new_task(ws)
            sid = await launch(ws, task, "kmock")
            await ws.call("session.subscribe", {"session_id": sid})
            await start_turn(ws, sid, "/delay 60000")
            link = adapter_of(srv, sid).connection
            (name,) = pod_names(c)
            c.standin.set_cut(True)
            while link.reachable:
                await link.until_changed()
            # Shown as unreachable, never simply as running; the link waits on.
            [dto] = (await ws.call("session.list", {"task_id": task}))["sessions"]
            assert (dto["state"], dto["reachable"]) == ("RUNNING", False), dto
            cancel = await ws.send("agent.cancel", {"session_id": sid})
            await ws.wait_for(lambda f: f.get("action") == "session.cancel.progress"
                              and f["payload"].get("phase") == "link_down", timeout=20)
            await trio.sleep(1.5)  # the cut lasts: nothing settles meanwhile
            assert not cancel.done.is_set()
            assert not link.closed.is_set()
            proxy = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}:8765/proxy/api/v1/"
            cancels_before = c.standin.calls.count(("POST", proxy + "acp/cancel"))
            c.standin.set_cut(False)
            frame = await cancel.wait(60)
            assert frame["type"] == "response", frame
            answer = frame["payload"]
            assert answer["outcome"] == "cancelled", answer
            assert answer["receipt"]["link_down_ms"] >= 1500, answer
            await ws.wait_for(is_state(sid, "WAITING_FOR_INPUT"), timeout=30)
            assert link.reachable and not link.closed.is_set()
            # The held cancel went through the restored proxy, once.
            assert c.standin.calls.count(("POST", proxy + "acp/cancel")) == cancels_before + 1
            # The same Pod, its agent still the session's: another turn runs on it.
            mark = len(ws.notifications)  # its own end: the first turn's is kept too
            await ws.call("message.add", {"session_id": sid, "content": "hello"})
            await ws.wait_for(is_turn_completed(sid), timeout=30, after=mark)
            assert pod_names(c) == {name}
            await gone(ws, c, sid, name)


async def test_a_delete_while_the_pod_does_not_answer_is_bounded_and_deletes_it(
        tmp_path: Path, agent_image: AgentImage) -> None:
    with trio.fail_after(TEST_S):
        async with cluster(tmp_path, agent_image) as c, running_server(
                tmp_path / "data", timeouts={"agent_start_s": 60},
                profiles=kube_profiles(c.kubeconfig, agent_image.image)) as srv, \
                ws_client(srv) as ws:
            sid = await launch(ws, await new_task(ws), "kmock")
            await ws.call("session.subscribe", {"session_id": sid})
            await start_turn(ws, sid, "/delay 60000")
            link = adapter_of(srv, sid).connection
            (name,) = pod_names(c)
            c.standin.set_cut(True)
            while link.reachable:
                await link.until_changed()
            # Bounded; the API server answers (only its way to the Pod is cut):
            # the Pod and its Secret are deleted.
            with trio.fail_after(40):
                await gone(ws, c, sid, name)


async def test_a_pod_deleted_while_its_link_is_down_ends_the_session_s_agent(
        tmp_path: Path, agent_image: AgentImage) -> None:
    """A Pod that is gone will not answer again: the link is closed (the turn
    ends with an error), not left unreachable for ever."""
    with trio.fail_after(TEST_S):
        async with cluster(tmp_path, agent_image) as c, running_server(
                tmp_path / "data", timeouts={"agent_start_s": 60},
                profiles=kube_profiles(c.kubeconfig, agent_image.image)) as srv, \
                ws_client(srv) as ws:
            sid = await launch(ws, await new_task(ws), "kmock")
            await ws.call("session.subscribe", {"session_id": sid})
            await start_turn(ws, sid, "/delay 60000")
            link = adapter_of(srv, sid).connection
            (name,) = pod_names(c)
            c.standin.set_cut(True)
            while link.reachable:
                await link.until_changed()
            # Someone else deletes the Pod (kubectl delete pod, an eviction).
            async with httpx.AsyncClient(
                    verify=ssl.create_default_context(cafile=c.standin.ca),
                    headers={"Authorization": f"Bearer {c.standin.token}"}) as http:
                gone = await http.delete(f"{c.standin.url}/api/v1/namespaces/{NAMESPACE}"
                                         f"/pods/{name}?gracePeriodSeconds=0")
            assert gone.status_code == 200, gone.text
            with trio.fail_after(30):
                await link.closed.wait()
            assert f"Pod {name} was deleted" in link.close_reason, link.close_reason
            await ws.wait_for(lambda f: f.get("action") == "session.state_changed"
                              and f["payload"].get("session_id") == sid
                              and f["payload"].get("new_state") != "RUNNING", timeout=30)
            with trio.fail_after(30):
                while pod_names(c):  # its container removed before the stand-in stops
                    await trio.sleep(0.05)


async def test_the_pods_agentctl_cancels_by_itself_when_offline_and_says_so_on_return(
        tmp_path: Path, agent_image: AgentImage) -> None:
    """``offline_cancel_s`` reaches the Pod's agentctl: with its link cut for
    longer, it cancels the running turn itself, and the receipt says so once
    the link is back (no Stop was pressed)."""
    with trio.fail_after(TEST_S):
        async with cluster(tmp_path, agent_image) as c, running_server(
                tmp_path / "data", timeouts={"agent_start_s": 60},
                profiles=kube_profiles(c.kubeconfig, agent_image.image,
                                       offline_cancel_s=1)) as srv, \
                ws_client(srv) as ws:
            task = await new_task(ws)
            sid = await launch(ws, task, "kmock")
            await ws.call("session.subscribe", {"session_id": sid})
            turn_id = (await ws.call("message.add", {"session_id": sid,
                                                     "content": "/delay 60000"}))["turn_id"]
            await ws.wait_for(lambda f: f.get("action") == "session.message.added"
                              and f["payload"].get("session_id") == sid
                              and f["payload"]["message"].get("role") == "agent", timeout=30)
            link = adapter_of(srv, sid).connection
            (name,) = pod_names(c)
            c.standin.set_cut(True)
            while link.reachable:
                await link.until_changed()
            # Past offline_cancel_s with no backend connected, the agentctl
            # cancels the turn by itself: polled on its own port (a fixed sleep
            # past the 1 s could end before a loaded machine's agentctl acted).
            with trio.fail_after(40):
                while (await agentctl_status(c, name))["turn_running"]:
                    await trio.sleep(0.1)
            [dto] = (await ws.call("session.list", {"task_id": task}))["sessions"]
            assert dto["state"] == "RUNNING", dto  # not known before the link returns
            c.standin.set_cut(False)
            with trio.fail_after(30):
                while dto["state"] != "WAITING_FOR_INPUT" or dto["cancellation_pending"]:
                    await trio.sleep(0.1)
                    [dto] = (await ws.call("session.list", {"task_id": task}))["sessions"]
            receipt = await ws.call("turn.receipt", {"session_id": sid, "turn_id": turn_id})
            receipt = receipt.get("receipt", receipt)
            assert receipt["by"] == "offline" and receipt["outcome"] == "cancelled", receipt
            await gone(ws, c, sid, name)


async def test_a_stop_while_the_api_server_is_down_is_applied_when_it_is_back(
        tmp_path: Path, agent_image: AgentImage) -> None:
    """The API server itself goes away (its port refuses connections) and comes
    back on the same address: the same as a cut proxy for the session."""
    with trio.fail_after(TEST_S):
        async with cluster(tmp_path, agent_image) as c, running_server(
                tmp_path / "data", timeouts={"agent_start_s": 60},
                profiles=kube_profiles(c.kubeconfig, agent_image.image)) as srv, \
                ws_client(srv) as ws:
            task = await new_task(ws)
            sid = await launch(ws, task, "kmock")
            await ws.call("session.subscribe", {"session_id": sid})
            await start_turn(ws, sid, "/delay 60000")
            link = adapter_of(srv, sid).connection
            (name,) = pod_names(c)
            await c.standin.stop_listening()
            while link.reachable:
                await link.until_changed()
            [dto] = (await ws.call("session.list", {"task_id": task}))["sessions"]
            assert (dto["state"], dto["reachable"]) == ("RUNNING", False), dto
            cancel = await ws.send("agent.cancel", {"session_id": sid})
            await ws.wait_for(lambda f: f.get("action") == "session.cancel.progress"
                              and f["payload"].get("phase") == "link_down", timeout=20)
            await trio.sleep(3)  # longer than a look-up of the Pod: it is not taken for gone
            assert not cancel.done.is_set() and not link.closed.is_set()
            await c.standin.listen_again()
            frame = await cancel.wait(60)
            assert frame["type"] == "response", frame
            assert frame["payload"]["outcome"] == "cancelled", frame
            assert frame["payload"]["receipt"]["link_down_ms"] >= 3000, frame
            await ws.wait_for(is_state(sid, "WAITING_FOR_INPUT"), timeout=30)
            assert link.reachable and not link.closed.is_set()
            await gone(ws, c, sid, name)
