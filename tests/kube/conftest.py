"""The kubernetes executor's tests: a stand-in API server (tests/support/kube_standin.py)
whose Pods run with Podman (tests/support/kube_kubelet.py).

``agent_image`` (session scope; only the tests that run a Pod's container use
it) checks, as the container tests' engine fixture does, that Podman can run
the agent image built by scripts/build_agent_image.sh (cached), and FAILS with
the reason if it cannot: those tests never pass by skipping.  At the end it
removes every container the stand-in's kubelet labelled.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kube.kube_support import AgentImage, remove_standin_containers
from tests.support.kube_kubelet import STANDIN_LABEL

REPO_SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _fail(reason: str, output: str = "") -> None:
    pytest.fail(f"kubernetes stand-in Pods cannot run: {reason}\n{output[-3000:]}",
                pytrace=False)


@pytest.fixture(scope="session")
def agent_image() -> Iterator[AgentImage]:
    podman = shutil.which("podman")
    if podman is None:
        _fail("podman is not installed (scripts/install_container_deps.sh installs it)")
    assert podman is not None
    if shutil.which("openssl") is None:
        _fail("openssl is not installed (the stand-in's CA is made with it)")
    build = subprocess.run(["bash", str(REPO_SCRIPTS / "build_agent_image.sh")],
                           capture_output=True, text=True, timeout=900, check=False)
    if build.returncode != 0:
        _fail("scripts/build_agent_image.sh failed", build.stdout + build.stderr)
    image = build.stdout.strip().splitlines()[-1]
    probe = subprocess.run(
        [podman, "run", "--rm", "--ulimit", "nofile=16384:16384", "--ulimit",
         "nproc=32768:32768", "--entrypoint", "python", image, "-c", "print('ok')"],
        capture_output=True, text=True, timeout=120, check=False)
    if probe.returncode != 0 or probe.stdout.strip() != "ok":
        _fail(f"podman cannot run a container here (exit {probe.returncode})",
              probe.stdout + probe.stderr)
    try:
        yield AgentImage(image=image, podman=podman)
    finally:
        remove_standin_containers(podman, STANDIN_LABEL)
