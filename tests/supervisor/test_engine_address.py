"""Choosing the container engine (DOCKER_HOST and the TLS variables), the create
body sent to it, and the container profile fields: pure checks, no engine."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from supervisor.config import Config, ConfigError
from supervisor.executors.container import backend_instance, container_spec
from supervisor.executors.engine_api import (
    ContainerSpec,
    EngineError,
    SshEngine,
    _demux,
    engine_address,
)


def test_unix_and_tcp_addresses() -> None:
    a = engine_address({"DOCKER_HOST": "unix:///tmp/x/engine.sock"})
    assert (a.kind, a.where, a.tls, a.local, a.host) == (
        "unix", "/tmp/x/engine.sock", None, True, "127.0.0.1")
    b = engine_address({"DOCKER_HOST": "tcp://10.1.2.3:2375"})
    assert (b.kind, b.where, b.tls, b.local, b.host) == ("tcp", "10.1.2.3:2375", None, False,
                                                         "10.1.2.3")
    assert str(b) == "tcp://10.1.2.3:2375"


def test_ssh_addresses() -> None:
    a = engine_address({"DOCKER_HOST": "ssh://me@box:2222/run/podman/podman.sock"})
    assert (a.kind, a.local, a.ssh, str(a)) == (
        "ssh", False, SshEngine("me@box", 2222, "/run/podman/podman.sock"),
        "ssh://me@box:2222/run/podman/podman.sock")
    assert engine_address({"DOCKER_HOST": "ssh://box"}).ssh == SshEngine("box", None, None)


@pytest.mark.parametrize(("value", "message"), [
    ("ssh://-oProxyCommand=x@host", "want ssh://user@host"),
    ("ssh://me@host:99999/s", "is not a port"),
    ("tcp://host", "want tcp://HOST:PORT"),
    ("unix://", "no socket path"),
    ("npipe:////./pipe/docker_engine", "want unix://, tcp:// or ssh://"),
])
def test_unsupported_addresses_say_why(value: str, message: str) -> None:
    with pytest.raises(EngineError, match=message):
        engine_address({"DOCKER_HOST": value})


def test_tls_needs_the_three_files(tmp_path: Path) -> None:
    env = {"DOCKER_HOST": "tcp://h:2376", "DOCKER_TLS_VERIFY": "1",
           "DOCKER_CERT_PATH": str(tmp_path)}
    with pytest.raises(EngineError, match=r"lacks ca\.pem, cert\.pem, key\.pem"):
        engine_address(env)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_tls_context_presents_the_client_certificate(tmp_path: Path) -> None:
    for name in ("ca", "cert"):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                        "1", "-subj", f"/CN={name}", "-keyout", str(tmp_path / f"{name}-key.pem"),
                        "-out", str(tmp_path / f"{name}.pem")], check=True, capture_output=True)
    (tmp_path / "cert-key.pem").rename(tmp_path / "key.pem")
    a = engine_address({"DOCKER_HOST": "tcp://h:2376", "DOCKER_TLS_VERIFY": "1",
                        "DOCKER_CERT_PATH": str(tmp_path)})
    assert a.tls is not None and str(a) == "https://h:2376"
    assert [c["subject"] for c in a.tls.get_ca_certs()] == [((("commonName", "ca"),),)]
    # DOCKER_TLS_VERIFY=0 (or unset) is plain HTTP.
    assert engine_address({"DOCKER_HOST": "tcp://h:2376", "DOCKER_TLS_VERIFY": "0"}).tls is None


def test_create_body_carries_limits_labels_and_the_port() -> None:
    body = ContainerSpec(image="img", cmd=["--x"], env={"A": "1"}, labels={"l": "v"},
                         binds={"/w": "/w"}, port=8765, cpus=1.5, memory_bytes=2**29, pids=64,
                         ulimits={"nofile": (10, 20)}).body()
    assert body["Cmd"] == ["--x"] and body["Env"] == ["A=1"] and body["Labels"] == {"l": "v"}
    assert body["ExposedPorts"] == {"8765/tcp": {}}
    host = body["HostConfig"]
    assert host["PortBindings"] == {"8765/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}]}
    assert (host["NanoCpus"], host["Memory"], host["PidsLimit"]) == (1_500_000_000, 2**29, 64)
    assert host["Binds"] == ["/w:/w:rw"]
    assert host["Ulimits"] == [{"Name": "nofile", "Soft": 10, "Hard": 20}]


def test_the_token_goes_in_the_environment_not_argv(tmp_path: Path) -> None:
    cfg = Config.from_mapping(tmp_path, {"agents": {"c": {
        "protocol": "codex", "command": ["agent", "--flag"], "executor": "container",
        "memory": "1g", "cpus": 2, "pids": 100}}})
    spec = container_spec(cfg, cfg.profiles["c"], "/work/s1", "secret-token-123456",
                          owner="sess-1", publish_ip="127.0.0.1")
    assert spec.env["TURNVISOR_AGENTCTL_TOKEN"] == "secret-token-123456"
    assert not any("secret" in a for a in spec.cmd)
    assert spec.cmd[-3:] == ["--", "agent", "--flag"]
    assert spec.labels["io.turnvisor.session"] == "sess-1"
    assert spec.labels["io.turnvisor.backend"] == backend_instance(cfg)
    assert (spec.memory_bytes, spec.cpus, spec.pids) == (1024**3, 2.0, 100)
    assert spec.binds == {"/work/s1": "/work/s1"}


@pytest.mark.parametrize(("fields", "message"), [
    ({"executor": "docker"}, "executor must be one of local, agentctl, container"),
    ({"memory": "lots"}, "memory must be"),
    ({"memory": 1024}, "memory must be"),
    ({"cpus": 0}, "cpus must be a positive number"),
    ({"pids": 2}, "pids must be an integer >= 8"),
    ({"image": ""}, "image must be a non-empty string"),
])
def test_bad_container_fields_are_refused_by_name(fields: dict[str, object],
                                                  message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Config.from_mapping(Path("/tmp"), {"agents": {"mock": fields}})


def test_instance_ids_differ_by_data_dir(tmp_path: Path) -> None:
    a = backend_instance(Config.from_mapping(tmp_path / "a", {}))
    assert a == backend_instance(Config.from_mapping(tmp_path / "a", {}))
    assert a != backend_instance(Config.from_mapping(tmp_path / "b", {}))


def test_log_frames_are_demultiplexed() -> None:
    raw = b"\x01\0\0\0\0\0\0\x03out" + b"\x02\0\0\0\0\0\0\x04err\n"
    assert _demux(raw) == b"outerr\n"
    assert _demux(b"plain tty output") == b"plain tty output"


async def test_sweep_without_container_profiles_contacts_no_engine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from supervisor.executors.container import sweep_containers

    # An address that would raise if it were even parsed.
    monkeypatch.setenv("DOCKER_HOST", "ssh://-oProxyCommand=x@nowhere")
    assert await sweep_containers(Config.from_mapping(tmp_path, {})) == 0


async def test_sweep_with_an_unreachable_engine_is_logged_not_fatal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    from supervisor.executors.container import sweep_containers

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    cfg = Config.from_mapping(tmp_path, {"agents": {"mock": {"executor": "container"}}})
    assert await sweep_containers(cfg) == 0
    assert "startup sweep of containers skipped" in caplog.text
