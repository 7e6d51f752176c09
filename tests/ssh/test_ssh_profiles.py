"""The ssh keys of a profile, checked at config load: one line per mistake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from supervisor.config import Config, ConfigError
from supervisor.ssh_target import SshTarget


def load(tmp_path: Path, **keys: Any) -> Config:
    return Config.from_mapping(tmp_path / "data", {"agents": {"box": {
        "protocol": "acp", "command": ["agent", "--acp"], **keys}}})


def test_an_ssh_profile_with_every_key(tmp_path: Path) -> None:
    key = tmp_path / "id"
    key.write_text("k")
    hosts = tmp_path / "known"
    hosts.write_text("h")
    profile = load(tmp_path, executor="ssh", ssh="me@build-box", ssh_port=2222,
                   ssh_identity=str(key), ssh_known_hosts=str(hosts),
                   remote_turnvisor="/opt/tv/bin/python -m web").profiles["box"]
    assert profile.ssh == SshTarget(destination="me@build-box", port=2222, identity=str(key),
                                    known_hosts=str(hosts),
                                    remote_turnvisor=("/opt/tv/bin/python", "-m", "web"))
    assert str(profile.ssh) == "me@build-box:2222"
    plain = load(tmp_path, executor="ssh", ssh="build-box").profiles["box"].ssh
    assert plain == SshTarget(destination="build-box")
    assert plain.remote_turnvisor == ("turnvisor",)


@pytest.mark.parametrize(("keys", "message"), [
    ({"executor": "ssh"}, 'executor = "ssh" needs ssh = "user@host"'),
    ({"executor": "ssh", "ssh": "-oProxyCommand=touch /tmp/x"}, "ssh must be \"user@host\""),
    ({"executor": "ssh", "ssh": "me@host; rm -rf ~"}, "ssh must be \"user@host\""),
    ({"executor": "ssh", "ssh": "h", "ssh_port": 70000}, "ssh_port must be a port number"),
    ({"executor": "ssh", "ssh": "h", "ssh_port": True}, "ssh_port must be a port number"),
    ({"executor": "ssh", "ssh": "h", "ssh_identity": "id_ed25519"},
     "ssh_identity must be an absolute path"),
    ({"executor": "ssh", "ssh": "h", "ssh_known_hosts": "/nowhere/known_hosts"},
     "ssh_known_hosts /nowhere/known_hosts is not a file"),
    ({"executor": "ssh", "ssh": "h", "remote_turnvisor": ""}, "remote_turnvisor must be"),
    ({"executor": "ssh", "ssh": "h", "remote_turnvisor": "--version"},
     "remote_turnvisor must be"),
    ({"executor": "ssh", "ssh": "h", "remote_turnvisor": "'unclosed"},
     "remote_turnvisor: No closing quotation"),
    ({"ssh": "me@host"}, 'ssh only applies to executor = "ssh"'),
    ({"executor": "agentctl", "ssh_port": 22}, 'ssh_port only applies to executor = "ssh"'),
    ({"executor": "ssh", "ssh": "h", "docker_host": "ssh://h"},
     'docker_host only applies to executor = "container"'),
    ({"executor": "container", "docker_host": "http://h"}, "docker_host must be unix://PATH"),
])
def test_each_mistake_is_one_clear_line(tmp_path: Path, keys: dict[str, Any],
                                        message: str) -> None:
    with pytest.raises(ConfigError) as failed:
        load(tmp_path, **keys)
    text = str(failed.value)
    assert message in text and "\n" not in text, text
    assert text.startswith("[agents.box]: "), text


def test_a_container_profile_keeps_its_engine_and_ssh_keys(tmp_path: Path) -> None:
    hosts = tmp_path / "known"
    hosts.write_text("h")
    profile = load(tmp_path, executor="container", docker_host="ssh://me@engine/run/e.sock",
                   ssh_known_hosts=str(hosts)).profiles["box"]
    assert profile.docker_host == "ssh://me@engine/run/e.sock"
    assert profile.ssh is not None and profile.ssh.known_hosts == str(hosts)
    assert load(tmp_path, executor="container").profiles["box"].ssh is None
