"""The container tests' engine: Podman, the agent image, and an API socket.

``engine`` (session scope, used by every test here) first checks that Podman
can run a container on this machine, and FAILS with the reason if it cannot
(the tests never pass by skipping).  It builds the image with
scripts/build_agent_image.sh (cached: a second run takes about a second),
starts ``podman system service`` on a socket in a temporary directory, points
``DOCKER_HOST`` at it, and at the end stops the service and removes every
container the tests labelled.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.container.container_support import (
    REPO,
    Engine,
    ServiceDown,
    podman_service,
    remove_labelled,
)


def _fail(reason: str, output: str = "") -> None:
    pytest.fail(f"container tests cannot run: {reason}\n{output[-3000:]}", pytrace=False)


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    podman = shutil.which("podman")
    if podman is None:
        _fail("podman is not installed (scripts/install_container_deps.sh installs it)")
    assert podman is not None
    start = time.monotonic()
    build = subprocess.run(["bash", str(REPO / "scripts" / "build_agent_image.sh")],
                           capture_output=True, text=True, timeout=900, check=False)
    if build.returncode != 0:
        _fail("scripts/build_agent_image.sh failed", build.stdout + build.stderr)
    image = build.stdout.strip().splitlines()[-1]
    build_s = time.monotonic() - start
    # The machine check: one container of that image runs and exits cleanly.
    probe = subprocess.run(
        [podman, "run", "--rm", "--ulimit", "nofile=16384:16384", "--ulimit",
         "nproc=32768:32768", "--entrypoint", "python", image, "-c", "print('ok')"],
        capture_output=True, text=True, timeout=120, check=False)
    if probe.returncode != 0 or probe.stdout.strip() != "ok":
        _fail(f"podman cannot run a container here (exit {probe.returncode})",
              probe.stdout + probe.stderr)
    tmp = Path(tempfile.mkdtemp(prefix="tv-engine-"))
    sock = tmp / "engine.sock"
    try:
        with podman_service(podman, f"unix://{sock}", sock.exists, tmp / "service.log"):
            saved = os.environ.get("DOCKER_HOST")
            os.environ["DOCKER_HOST"] = f"unix://{sock}"
            try:
                yield Engine(image=image, socket=sock, podman=podman, build_s=build_s)
            finally:
                if saved is None:
                    os.environ.pop("DOCKER_HOST", None)
                else:
                    os.environ["DOCKER_HOST"] = saved
                remove_labelled(podman)
    except ServiceDown as down:
        _fail(str(down))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(autouse=True)
def _needs_engine(engine: Engine) -> Engine:
    return engine
