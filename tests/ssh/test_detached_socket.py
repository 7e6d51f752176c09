"""``turnvisor agentctl --detach`` on a host whose data dir is too deep for a
unix socket path: its socket goes to a 0700 directory of its own under the
temporary directory, and the temporary directory itself (everyone's, sticky)
keeps its mode.  (It once was chmodded to 0700, locking every other user of
the host out of it.)"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import trio

from protocols.process import process_identity
from tests.support.shared_tmp import deep_data_dir, shared_tempdir


async def test_a_deep_data_dir_leaves_the_temporary_directory_as_it_is(
        tmp_path: Path) -> None:
    data = deep_data_dir(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    name = "instance/session"
    with shared_tempdir() as shared, trio.fail_after(60):
        env = {**os.environ, "TURNVISOR_DATA_DIR": str(data), "TMPDIR": str(shared)}
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
        assert stopped.stdout.strip() == b"stopped"
        assert process_identity(int(answer["pid"])) is None
