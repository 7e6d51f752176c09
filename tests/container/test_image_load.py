"""``turnvisor images load``: the image put on an engine of another host,
streamed over SSH; and a container start on an engine that lacks its image
naming that command.

The engine here is the tests' Podman service (``engine``); the "other" engine
is a second Podman service with storage of its own (another ``--root``), so
an image there is really there only once loaded; it is reached through a real
``sshd`` on loopback (tests/ssh/sshd.py), as the container executor reaches
an ``ssh://`` engine.  The image sent is a small one made for the test (one
file, ``podman import``) under a test-only name.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import trio

from tests.container.container_support import Engine, container_profiles, podman_service
from tests.ssh.sshd import Sshd, running_sshd
from tests.support.serverproc import server_process
from tests.support.ws import RequestFailed, ws_client
from tests.web.support import launch, new_task


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    with running_sshd(tmp_path / "sshd") as server:
        yield server


@contextmanager
def other_engine(podman: str) -> Iterator[Path]:
    """A Podman service on storage of its own; its socket."""
    tmp = Path(tempfile.mkdtemp(prefix="tv-other-engine-"))
    sock = tmp / "engine.sock"
    try:
        with podman_service(podman, f"unix://{sock}", sock.exists, tmp / "service.log",
                            storage=["--root", str(tmp / "root"), "--runroot",
                                     str(tmp / "run"), "--storage-driver", "vfs"]):
            yield sock
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def small_image(podman: str, tmp: Path, *, size: int = 0) -> str:
    """A one-file image under a test-only name, on the engine here (with
    ``size`` random bytes in a second file)."""
    name = f"localhost/tv-load-test:{secrets.token_hex(4)}"
    (tmp / "ctx").mkdir()
    (tmp / "ctx" / "hello.txt").write_text("hello from the engine here\n")
    if size:
        with (tmp / "ctx" / "noise.bin").open("wb") as out:
            for _ in range(size // (1 << 20)):
                out.write(os.urandom(1 << 20))
    subprocess.run(["tar", "cf", str(tmp / "image.tar"), "-C", str(tmp / "ctx"), "."],
                   check=True, timeout=60)
    subprocess.run([podman, "import", str(tmp / "image.tar"), name], check=True,
                   capture_output=True, timeout=120)
    return name


def listed(sock: Path) -> set[str]:
    """Every tag the engine behind ``sock`` lists."""
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=30) as http:
        images = http.get("http://engine/v1.41/images/json").json()
    return {tag for image in images for tag in image.get("RepoTags") or ()}


#: ``turnvisor images load ...``, then its peak RSS (KiB) as the last line of stderr.
_MEASURED = ("import resource, sys\n"
             "from web.cli import main\n"
             "code = main(sys.argv[1:])\n"
             "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
             "sys.exit(code)\n")


async def images_load(*args: str) -> tuple[int, str, str]:
    done = await trio.run_process([sys.executable, "-m", "web", "images", "load", *args],
                                  capture_stdout=True, capture_stderr=True, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def peak_kib(*args: str) -> tuple[int, int]:
    """``images load ARGS``'s exit status and peak RSS."""
    done = await trio.run_process([sys.executable, "-c", _MEASURED, "images", "load", *args],
                                  capture_stdout=True, capture_stderr=True, check=False)
    return done.returncode, int(done.stderr.decode().split()[-1])


def over_ssh(sshd: Sshd, sock: Path) -> str:
    return f"ssh://{sshd.destination}:{sshd.port}{sock}"


async def test_images_load_streams_the_image_to_an_engine_over_ssh(
        tmp_path: Path, engine: Engine, sshd: Sshd) -> None:
    image = small_image(engine.podman, tmp_path)
    keys = ["--ssh-identity", str(sshd.identity), "--ssh-known-hosts", str(sshd.known_hosts),
            "--data-dir", str(tmp_path / "data")]
    try:
        with other_engine(engine.podman) as sock, trio.fail_after(180):
            assert image not in listed(sock)
            code, out, err = await images_load("--engine", over_ssh(sshd, sock),
                                               "--image", image, *keys)
            assert code == 0, err
            assert out.startswith(f"{image} → {over_ssh(sshd, sock)}: "), out
            assert image in listed(sock)
            # Not on the engine here: said, nothing sent.
            code, out, err = await images_load("--engine", over_ssh(sshd, sock),
                                               "--image", "localhost/tv-absent:1", *keys)
            assert code == 1 and out == "", out
            assert "image localhost/tv-absent:1 is not on the engine here" in err, err
            # Another key for that host and port: refused, nothing logs in.
            await trio.run_process(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                                    str(tmp_path / "impostor")])
            impostor = tmp_path / "impostor_known_hosts"
            impostor.write_text(f"[127.0.0.1]:{sshd.port} "
                                f"{(tmp_path / 'impostor.pub').read_text().strip()}\n")
            accepted = sshd.log().count("Accepted publickey")
            code, _, err = await images_load(
                "--engine", over_ssh(sshd, sock), "--image", image,
                "--ssh-identity", str(sshd.identity), "--ssh-known-hosts", str(impostor),
                "--data-dir", str(tmp_path / "data2"))
            assert code == 1 and "host key verification failed" in err, err
            assert sshd.log().count("Accepted publickey") == accepted
            # A host that does not answer.
            with trio.socket.socket() as free:
                await free.bind(("127.0.0.1", 0))
                port = free.getsockname()[1]
            code, _, err = await images_load(
                "--engine", f"ssh://{sshd.destination}:{port}{sock}", "--image", image,
                *keys)
            assert code == 1 and f"127.0.0.1:{port}" in err, err
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(120):
            await trio.run_process([engine.podman, "rmi", "-f", image], capture_stdout=True,
                                   capture_stderr=True, check=False)


async def test_a_start_without_its_image_names_the_command_that_puts_it_there(
        tmp_path: Path, engine: Engine, sshd: Sshd) -> None:
    """The session's start fails naming ``turnvisor images load --profile ...``;
    that command, run as named, puts the image on the profile's engine."""
    image = small_image(engine.podman, tmp_path)
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    try:
        with other_engine(engine.podman) as sock, trio.fail_after(180):
            keys = container_profiles(image, docker_host=over_ssh(sshd, sock),
                                      ssh_identity=str(sshd.identity),
                                      ssh_known_hosts=str(sshd.known_hosts))["mock"]
            toml = "[agents.mock]\n" + "".join(f"{k} = {json.dumps(v)}\n"
                                               for k, v in keys.items())
            async with server_process(data, toml=toml) as srv, ws_client(srv) as ws:
                with pytest.raises(RequestFailed) as failed:
                    await launch(ws, await new_task(ws), "mock")
            message = failed.value.frame["payload"]["message"]
            assert f"cannot create a container of {image} on {over_ssh(sshd, sock)}" in \
                message, message
            command = f"turnvisor images load --profile mock --data-dir {data}"
            assert f"`{command}`" in message, message
            assert image not in listed(sock)
            code, out, err = await images_load(*command.split()[3:])
            assert code == 0, err
            assert image in listed(sock), out
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(120):
            await trio.run_process([engine.podman, "rmi", "-f", image], capture_stdout=True,
                                   capture_stderr=True, check=False)


async def test_a_large_image_is_streamed_not_held(tmp_path: Path, engine: Engine,
                                                  sshd: Sshd) -> None:
    """96 MiB of image go through a process whose peak memory grows by far less."""
    size = 96 << 20
    image = small_image(engine.podman, tmp_path, size=size)
    keys = ["--ssh-identity", str(sshd.identity), "--ssh-known-hosts", str(sshd.known_hosts),
            "--data-dir", str(tmp_path / "data")]
    try:
        with other_engine(engine.podman) as sock, trio.fail_after(300):
            # The same command stopped before any byte of an image is read.
            code, base = await peak_kib("--engine", over_ssh(sshd, sock), "--image",
                                        "localhost/tv-absent:1", *keys)
            assert code == 1
            code, peak = await peak_kib("--engine", over_ssh(sshd, sock), "--image", image,
                                        *keys)
            assert code == 0
            assert image in listed(sock)
            assert (peak - base) * 1024 < size // 3, (base, peak)
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(120):
            await trio.run_process([engine.podman, "rmi", "-f", image], capture_stdout=True,
                                   capture_stderr=True, check=False)
