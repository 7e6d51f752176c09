"""``turnvisor agentctl --detach`` on a host whose data dir is too deep for a
unix socket path: its socket goes to a 0700 directory of its own under the
temporary directory, and the temporary directory itself (everyone's, sticky)
keeps its mode.  (It once was chmodded to 0700, locking every other user of
the host out of it.)"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import trio

from protocols.process import process_identity


async def test_a_deep_data_dir_leaves_the_temporary_directory_as_it_is(
        tmp_path: Path) -> None:
    # Short, as a real temporary directory's path is (the socket goes in it).
    shared = Path(tempfile.mkdtemp(prefix="tv-"))
    os.chmod(shared, 0o1777)
    data = tmp_path.joinpath("a-data-dir-deep-enough", "that-its-socket-path",
                             "would-be-longer-than-sun-path", "allows")
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "TURNVISOR_DATA_DIR": str(data), "TMPDIR": str(shared)}
    name = "instance/session"
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-m", "web", "agentctl", "--detach", name, "--protocol", "acp",
             "--cwd", str(work), "--sandbox", "none", "--",
             sys.executable, "-m", "protocols.mock_agent"],
            stdin=b'{"token": "' + b"t" * 40 + b'", "env": {}}\n', env=env,
            capture_stdout=True, capture_stderr=True, check=False)
        assert done.returncode == 0, done.stderr.decode()
        answer = json.loads(done.stdout.decode().strip().splitlines()[-1])
        try:
            socket = Path(answer["socket"])
            assert socket.parent.parent == shared, socket
            assert stat.S_IMODE(os.stat(socket.parent).st_mode) == 0o700
            assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777
        finally:
            stopped = await trio.run_process(
                [sys.executable, "-m", "web", "hosts", "stop", name], env=env,
                capture_stdout=True, check=False)
            shutil.rmtree(shared, ignore_errors=True)
        assert stopped.stdout.strip() == b"stopped"
        assert process_identity(int(answer["pid"])) is None
