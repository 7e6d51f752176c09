"""The engine client's operations against Podman, over ``tcp://`` (a second
``podman system service`` on a loopback port): create, start, wait, logs,
inspect, list by label, stop, remove — what the container executor does not
all use on its hot path."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from supervisor.executors.engine_api import ContainerSpec, EngineClient, EngineError, engine_address
from tests.container.container_support import Engine, podman_service


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def tcp_engine(engine: Engine, tmp_path: Path) -> Iterator[str]:
    port = _free_port()

    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True

    with podman_service(engine.podman, f"tcp://127.0.0.1:{port}", listening,
                        tmp_path / "service.log"):
        yield f"tcp://127.0.0.1:{port}"


async def test_container_round_trip_over_tcp(engine: Engine, tcp_engine: str) -> None:
    address = engine_address({"DOCKER_HOST": tcp_engine})
    assert address.kind == "tcp" and not address.local
    label = {"io.turnvisor.backend": "engine-client-test"}
    with trio.fail_after(90):
        async with EngineClient(address) as client:
            await client.ping()
            spec = ContainerSpec(
                image=engine.image, cmd=["--help"], labels=label, pids=64,
                ulimits={"nofile": (16384, 16384), "nproc": (32768, 32768)})
            cid = await client.create(spec)
            try:
                assert [c.id for c in await client.list(label)] == [cid]
                await client.start(cid)
                assert await client.wait(cid, timeout_s=60) == 0
                info = await client.inspect(cid)
                assert (info.running, info.exit_code, info.labels["io.turnvisor.backend"]) == \
                    (False, 0, "engine-client-test")
                # (the whole help: agentctl's options outgrew the default tail)
                assert "usage: turnvisor agentctl" in await client.logs(cid, tail=500)
                await client.stop(cid, grace_s=1)  # already exited: not an error
            finally:
                await client.remove(cid)
            assert await client.list(label) == []
            await client.remove(cid)  # gone: not an error either
            with pytest.raises(EngineError, match="404"):
                await client.inspect(cid)
            with pytest.raises(EngineError, match=r"(?i)no such image"):
                await client.create(ContainerSpec(image="localhost/no-such-image:none"))
