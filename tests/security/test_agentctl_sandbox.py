"""An agentctl's agent gets the same sandbox (issue 17, item 2): a backend
that spawns agentctl for a profile hides its data dir from that agent too."""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path

import httpx
import trio

from protocols.sandbox import resolve_mode
from supervisor.config import Config
from supervisor.executors.agentctl import launch_agentctl, spawn_agentctl
from supervisor.profiles import AgentProfile

HOSTILE = Path(__file__).with_name("hostile_agent.py")


def _prepare(data: Path) -> None:
    (data / "work").mkdir(parents=True)
    (data / "token").write_text("secret-token-0123456789abcdef\n")
    (data / "turnvisor.toml").write_text("# the config\n")


def _exists(path: str | Path) -> bool:
    return Path(path).exists()


async def test_the_agent_of_a_spawned_agentctl_is_sandboxed(tmp_path: Path) -> None:
    assert resolve_mode(None) == "bwrap", "bwrap must work here (make test installs it)"
    data = tmp_path / "data"
    _prepare(data)
    config = Config.from_mapping(data, {})
    profile = AgentProfile(name="hostile", protocol="acp",
                           command=(sys.executable, str(HOSTILE)), executor="agentctl")
    work = data / "work"
    # What the agent is told is the backend: a stand-in it must not be able to signal.
    victim = await trio.lowlevel.open_process(["sleep", "60"], process_group=0)
    try:
        with trio.fail_after(60):
            async with launch_agentctl(config, profile, str(work), owner="s1") as agent:
                adapter = agent.adapter
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(adapter.connection.run)
                    await adapter.initialize()
                    await adapter.new_session(str(work))
                    ended = await adapter.prompt(
                        f"/attack {data} http://127.0.0.1:9 {victim.pid} /etc/hostile-planted")
                    assert ended.stop_reason == "end_turn"
                    nursery.cancel_scope.cancel()
        assert victim.poll() is None
    finally:
        victim.kill()
        await victim.wait()
    report = json.loads((work / "attack.json").read_text())
    for name in ["env_token", "read_token", "read_db", "read_config", "backend_environ",
                 "signal_backend", "signal_backend_group", "write_outside", "controlling_tty"]:
        assert report[name].startswith("refused"), (name, report[name])
    # Only the mount points of what is bound back: the work dirs, the agent homes.
    assert report["list_data_dir"] in ("ok: ['work']", "ok: ['homes', 'work']"), \
        report["list_data_dir"]
    assert report["backend_in_proc"] == "ok: []", report["backend_in_proc"]
    assert not _exists("/etc/hostile-planted")
    assert not _exists(data / "planted")


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def _until(path: Path, text: str) -> str:
    with trio.fail_after(30):
        while text not in (found := _text(path)):
            await trio.sleep(0.05)
    return found


async def test_a_hand_started_agentctl_hides_both_data_dirs_by_identity(tmp_path: Path) -> None:
    """agentctl started by hand with ``--data-dir``: that data dir and the
    default one (a backend's, under the agent-writable ``$HOME``) are hidden;
    an agent whose profile would give it write access above the default one
    (the power to rename it away and leave a decoy) is refused (issue 40)."""
    assert resolve_mode(None) == "bwrap", "bwrap must work here (make test installs it)"
    home = tmp_path / "home"
    default = home / ".local" / "share" / "turnvisor"
    given = tmp_path / "given"
    for data in (default, given):
        data.mkdir(parents=True)
        (data / "token").write_text(f"token-of-{data.name}-0123456789\n")
    work = tmp_path / "work"
    work.mkdir()
    profile = AgentProfile(name="hostile", protocol="acp", command=(sys.executable, str(HOSTILE)),
                           env={"HOME": str(home), "XDG_DATA_HOME": str(home / ".local/share")})
    token = secrets.token_urlsafe(32)
    with trio.fail_after(60):
        async with spawn_agentctl(profile, str(work), token, start_s=30, term_grace_s=5,
                                  extra_args=["--data-dir", str(given), "--profile-env", "HOME",
                                              "--profile-env", "XDG_DATA_HOME"]) as (_, url), \
                httpx.AsyncClient(base_url=url,
                                  headers={"Authorization": f"Bearer {token}"}) as h:
            # Its profile's HOME holds the default data dir: write access there is
            # the power to move it away, so the agent is refused, saying why.
            r = await h.post("/api/v1/session", json={})
            assert r.status_code == 503, r.text
            assert "could move it" in r.text and str(default) in r.text, r.text
