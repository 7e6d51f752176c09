"""Sessions on ``executor = "ssh"`` through the WebSocket API: a real ``sshd``
on a loopback port (tests/ssh/sshd.py), this machine as the host, the mock
agent behind a detached ``turnvisor agentctl`` started there over ssh and
reached through a forwarded unix socket over one shared connection."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
import trio

from protocols.process import process_identity
from supervisor.config import Config
from supervisor.executors.agentctl_adapter import AgentctlAdapter
from supervisor.executors.agentctl_link import AgentctlLink
from supervisor.executors.container import backend_instance
from supervisor.executors.ssh import start_remote
from supervisor.executors.ssh_host import SshHost, control_dir
from supervisor.profiles import parse_profiles
from tests.ssh.sshd import Sshd, running_sshd, ssh_profile
from tests.support.server import Server, running_server
from tests.support.ws import RequestFailed, is_state, is_turn_completed, ws_client
from tests.web.support import launch, new_task, start_turn
from web.hosts_cli import turnvisor_version


def profiles(sshd: Sshd, **extra: object) -> object:
    return parse_profiles({"mock": ssh_profile(sshd, **extra)})


def remote_runs(sshd: Sshd, srv: Server) -> list[dict[str, object]]:
    """The detached agentctls this backend has on the host (their pid records)."""
    base = sshd.remote_data / "agentctl" / backend_instance(srv.sup.config)
    if not base.is_dir():
        return []
    return [json.loads((run / "agentctl.pid").read_text()) for run in sorted(base.iterdir())
            if (run / "agentctl.pid").is_file()]


def cmdlines() -> dict[int, str]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    out[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                pass
    return out


def adapter_of(srv: Server, sid: str) -> AgentctlAdapter:
    adapter = srv.sup.lifecycle.executions[sid].adapter
    assert isinstance(adapter, AgentctlAdapter)
    return adapter


async def sample_cmdlines(seen: set[str], done: trio.Event) -> None:
    """Every command line on this machine (both ends of the ssh) until ``done``."""
    while not done.is_set():
        # Read off the loop the server in this process shares.
        seen.update((await trio.to_thread.run_sync(cmdlines)).values())
        await trio.sleep(0.005)


async def test_a_turn_and_a_cancel_over_ssh(tmp_path: Path, login_sshd: Sshd) -> None:
    sshd = login_sshd
    seen: set[str] = set()
    started = trio.Event()
    with trio.fail_after(120):
        async with running_server(tmp_path / "data", profiles=profiles(sshd)) as srv, \
                ws_client(srv) as ws, trio.open_nursery() as sampler:
            sampler.start_soon(sample_cmdlines, seen, started)
            sid = await launch(ws, await new_task(ws), "mock")
            await ws.call("session.subscribe", {"session_id": sid})
            await ws.call("message.add", {"session_id": sid, "content": "hello over ssh"})
            await ws.wait_for(is_turn_completed(sid), timeout=30)
            started.set()
            adapter = adapter_of(srv, sid)
            assert adapter.connection.uds is not None
            [run] = remote_runs(sshd, srv)
            pid = int(str(run["pid"]))
            assert process_identity(pid) == run["identity"]
            # The token is on no command line of this machine (both ends of the ssh).
            token = adapter.connection._token
            assert len(token) >= 32
            lines = cmdlines()
            assert "web.agentctl.daemon" in lines[pid], lines[pid]
            assert any("protocols.mock_agent" in c for c in lines.values())
            # Sampled through the start: the ssh that started agentctl on the host
            # (its command for the host's shell, that shell) held no token either.
            assert any("agentctl --detach" in c for c in seen), sorted(seen)
            assert [c for c in (*seen, *lines.values()) if token in c] == []

            await start_turn(ws, sid, "/delay 20000")
            start = trio.current_time()
            cancelled = len(ws.notifications)
            result = await ws.call("agent.cancel", {"session_id": sid}, timeout=20)
            assert (result["success"], result["session_id"]) == (True, sid), result
            assert trio.current_time() - start < 10
            await ws.wait_for(is_state(sid, "WAITING_FOR_INPUT"), timeout=20, after=cancelled)
            # The same agentctl serves the next prompt (its own states: the first
            # turn's are among the kept frames too).
            mark = len(ws.notifications)
            await ws.call("message.add", {"session_id": sid, "content": "again"})
            await ws.wait_for(is_turn_completed(sid), timeout=30, after=mark)
            assert [r["pid"] for r in remote_runs(sshd, srv)] == [pid]
            # The session deleted: the host's agentctl (and its agent) stopped,
            # its run directory gone.
            await ws.call("session.delete", {"session_id": sid})
            while process_identity(pid) is not None or remote_runs(sshd, srv):
                await trio.sleep(0.1)


async def test_a_host_key_that_does_not_match_is_refused(tmp_path: Path, sshd: Sshd) -> None:
    other = tmp_path / "other_known_hosts"
    # Another key for the same host and port (a man in the middle, or a rebuilt host).
    await trio.run_process(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                            str(tmp_path / "impostor")])
    other.write_text(f"[127.0.0.1]:{sshd.port} "
                     f"{(tmp_path / 'impostor.pub').read_text().strip()}\n")
    with trio.fail_after(60):
        async with running_server(tmp_path / "data",
                                  profiles=profiles(sshd, ssh_known_hosts=str(other))) as srv, \
                ws_client(srv) as ws:
            with pytest.raises(RequestFailed) as failed:
                await launch(ws, await new_task(ws), "mock")
            message = failed.value.frame["payload"]["message"]
            assert "host key verification failed" in message, message
            assert str(other) in message, message
            assert remote_runs(sshd, srv) == []
    # Nothing logged in: the server saw no accepted key.
    assert "Accepted publickey" not in sshd.log()


async def reach_changes(link: AgentctlLink, seen: list[bool]) -> None:
    """Each change of the link's ``reachable``, as it happens."""
    while not link.closed.is_set():
        await link.until_changed()
        seen.append(link.reachable)


async def test_a_killed_shared_connection_is_brought_back_and_the_session_goes_on(
        tmp_path: Path, sshd: Sshd) -> None:
    with trio.fail_after(120):
        async with running_server(tmp_path / "data", profiles=profiles(sshd)) as srv, \
                ws_client(srv) as ws, trio.open_nursery() as watcher:
            sid = await launch(ws, await new_task(ws), "mock")
            await ws.call("session.subscribe", {"session_id": sid})
            await ws.call("message.add", {"session_id": sid, "content": "before the cut"})
            await ws.wait_for(is_turn_completed(sid), timeout=30)
            adapter = adapter_of(srv, sid)
            link = adapter.connection
            [run] = remote_runs(sshd, srv)
            pid = int(str(run["pid"]))
            profile = srv.sup.config.profiles["mock"]
            assert profile.ssh is not None
            host = SshHost(profile.ssh, control_dir(srv.sup.config.data_dir), connect_s=10)
            master = await host.master_pid()
            assert master is not None
            seen: list[bool] = []
            watcher.start_soon(reach_changes, link, seen)
            os.kill(master, signal.SIGKILL)
            # The link says it is down, then up again: the executor brought the
            # shared connection back and forwarded the socket again ...
            while seen[-2:] != [False, True]:
                await trio.sleep(0.05)
            assert not link.closed.is_set()
            assert await host.master_pid() not in (None, master)
            # ... while the host's agentctl (and its agent) ran on.
            assert process_identity(pid) == run["identity"]
            mark = len(ws.notifications)
            await ws.call("message.add", {"session_id": sid, "content": "after the cut"})
            await ws.wait_for(is_turn_completed(sid), timeout=30, after=mark)
            assert adapter_of(srv, sid) is adapter
            assert [r["pid"] for r in remote_runs(sshd, srv)] == [pid]
            watcher.cancel_scope.cancel()


async def test_a_stop_while_the_host_is_cut_off_is_applied_when_it_answers_again(
        tmp_path: Path, login_sshd: Sshd) -> None:
    """Issue 44 item 4 over ssh: the server stops (every connection to it
    killed), a cancel meanwhile is held, and goes out first once the host
    answers again."""
    sshd = login_sshd
    with trio.fail_after(150):
        async with running_server(tmp_path / "data", profiles=profiles(sshd)) as srv, \
                ws_client(srv) as ws:
            task = await new_task(ws)
            sid = await launch(ws, task, "mock")
            await ws.call("session.subscribe", {"session_id": sid})
            await start_turn(ws, sid, "/delay 60000")
            link = adapter_of(srv, sid).connection
            [run] = remote_runs(sshd, srv)
            # The host stops answering (its agentctl runs on); off the loop, which the
            # server in this process shares.
            await trio.to_thread.run_sync(sshd.stop)
            while link.reachable:
                await link.until_changed()
            # Shown as unreachable, never simply as running.
            [dto] = (await ws.call("session.list", {"task_id": task}))["sessions"]
            assert (dto["state"], dto["reachable"]) == ("RUNNING", False), dto
            cancel = await ws.send("agent.cancel", {"session_id": sid})
            await ws.wait_for(lambda f: f.get("action") == "session.cancel.progress"
                              and f["payload"].get("phase") == "link_down", timeout=20)
            await trio.sleep(1.5)  # the cut lasts: nothing settles meanwhile
            assert not cancel.done.is_set()
            assert process_identity(int(str(run["pid"]))) == run["identity"]
            await trio.to_thread.run_sync(sshd.start)
            frame = await cancel.wait(60)
            assert frame["type"] == "response", frame
            answer = frame["payload"]
            assert answer["outcome"] == "cancelled", answer
            assert answer["receipt"]["link_down_ms"] >= 1500, answer
            await ws.wait_for(is_state(sid, "WAITING_FOR_INPUT"), timeout=30)
            assert link.reachable and not link.closed.is_set()


async def test_the_start_sweeps_what_a_previous_backend_left_on_the_host(
        tmp_path: Path, sshd: Sshd) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    config = Config.from_mapping(data, {}, profiles=profiles(sshd))
    profile = config.profiles["mock"]
    assert profile.ssh is not None
    host = SshHost(profile.ssh, control_dir(data), connect_s=10)
    with trio.fail_after(90):
        await host.ensure_master()
        left = {}
        for name in (f"{backend_instance(config)}/left-behind", "another-backend/its-own"):
            _, attached = await start_remote(host, config, profile, str(tmp_path), name,
                                             "t" * 40)
            assert not attached
            left[name] = json.loads(
                (sshd.remote_data / "agentctl" / name / "agentctl.pid").read_text())
        async with running_server(data, profiles=profiles(sshd)):
            pass
        ours, theirs = left.values()
        assert process_identity(ours["pid"]) is None
        assert not (sshd.remote_data / "agentctl" / backend_instance(config) / "left-behind"
                    ).exists()
        # Another backend's agentctl is not ours to stop.
        assert process_identity(theirs["pid"]) == theirs["identity"]
        done = await host.run([*profile.ssh.remote_turnvisor, "hosts", "stop",
                               "another-backend/its-own"], timeout_s=30)
        assert done.stdout.strip() == b"stopped"
        assert process_identity(theirs["pid"]) is None


def write_config(data: Path, profile: dict[str, object]) -> None:
    data.mkdir(mode=0o700, exist_ok=True)
    lines = ["[agents.remote]", 'protocol = "acp"', 'command = ["true"]']
    lines += [f"{key} = {json.dumps(value)}" for key, value in profile.items()]
    (data / "turnvisor.toml").write_text("\n".join(lines) + "\n")


async def hosts_check(data: Path) -> tuple[int, str]:
    done = await trio.run_process([sys.executable, "-m", "web", "hosts", "check", "remote",
                                   "--data-dir", str(data)], capture_stdout=True,
                                  capture_stderr=True, check=False)
    return done.returncode, (done.stdout + done.stderr).decode().strip()


async def test_hosts_check_says_what_is_missing_or_differs(tmp_path: Path, sshd: Sshd) -> None:
    with trio.fail_after(90):
        write_config(tmp_path / "good", ssh_profile(sshd))
        assert await hosts_check(tmp_path / "good") == (
            0, f"{sshd.destination}:{sshd.port}: Turnvisor {turnvisor_version()}, as here")
        write_config(tmp_path / "missing",
                     ssh_profile(sshd, remote_turnvisor="/nowhere/bin/turnvisor"))
        code, line = await hosts_check(tmp_path / "missing")
        assert code == 1 and "'/nowhere/bin/turnvisor' is not found on the host" in line, line
        write_config(tmp_path / "older", ssh_profile(
            sshd, remote_turnvisor=["sh", "-c", "echo turnvisor 0.0.1", "sh"]))
        code, line = await hosts_check(tmp_path / "older")
        assert (code, line) == (1, f"{sshd.destination}:{sshd.port}: the host runs Turnvisor "
                                   f"0.0.1, this backend {turnvisor_version()}")
        (tmp_path / "empty_known_hosts").write_text("")
        write_config(tmp_path / "unknown", ssh_profile(
            sshd, ssh_known_hosts=str(tmp_path / "empty_known_hosts")))
        code, line = await hosts_check(tmp_path / "unknown")
        assert code == 1 and "host key verification failed" in line, line
        write_config(tmp_path / "local", {"executor": "local"})
        code, line = await hosts_check(tmp_path / "local")
        assert code == 1 and "is not executor = \"ssh\"" in line, line


async def test_hosts_check_says_the_sandbox_is_missing_on_the_host(tmp_path: Path) -> None:
    # A host whose PATH has a shell and nothing else: no bwrap, no pasta.
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    (bare / "sh").symlink_to("/bin/sh")
    with running_sshd(tmp_path / "sshd", env={"PATH": str(bare)}) as sshd, \
            trio.fail_after(60):
        write_config(tmp_path / "sandboxed", ssh_profile(sshd, network="isolated"))
        code, text = await hosts_check(tmp_path / "sandboxed")
        where = f"{sshd.destination}:{sshd.port}"
        assert (code, text.splitlines()) == (1, [
            f"{where}: bwrap (bubblewrap) is missing on the host: agentctl there cannot "
            "sandbox the agent (apt-get install bubblewrap, or sandbox = \"none\")",
            f"{where}: pasta (passt) is missing on the host: network = \"isolated\" cannot "
            "be set up there (apt-get install passt)"]), text
        write_config(tmp_path / "bare", ssh_profile(sshd, sandbox="none"))
        assert await hosts_check(tmp_path / "bare") == (
            0, f"{where}: Turnvisor {turnvisor_version()}, as here")


async def test_a_delete_while_the_host_is_cut_off_is_bounded_and_the_next_start_sweeps(
        tmp_path: Path, sshd: Sshd) -> None:
    with trio.fail_after(150):
        async with running_server(tmp_path / "data", profiles=profiles(sshd)) as srv, \
                ws_client(srv) as ws:
            sid = await launch(ws, await new_task(ws), "mock")
            await ws.call("session.subscribe", {"session_id": sid})
            await start_turn(ws, sid, "/delay 60000")
            link = adapter_of(srv, sid).connection
            [run] = remote_runs(sshd, srv)
            await trio.to_thread.run_sync(sshd.stop)
            while link.reachable:
                await link.until_changed()
            with trio.fail_after(40):
                await ws.call("session.delete", {"session_id": sid}, timeout=40)
            # Its agentctl could not be reached to be stopped: it runs on, there.
            assert process_identity(int(str(run["pid"]))) == run["identity"]
        await trio.to_thread.run_sync(sshd.start)
        async with running_server(tmp_path / "data", profiles=profiles(sshd)) as srv:
            assert process_identity(int(str(run["pid"]))) is None
            assert remote_runs(sshd, srv) == []
