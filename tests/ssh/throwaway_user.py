"""A throwaway login for the ssh tests: a user made for the run (``useradd``,
its own home), removed after it (``userdel -r``), so the host side runs as
someone who is not the backend's user, as on a real host.

Only root can make one: elsewhere the case is skipped, saying so.  The
host's Turnvisor must be runnable by that user: this venv's interpreter often
is not (a venv made from a Python under root's 0700 home), so the user runs
the system's Python of the same minor version with this venv's packages and
this checkout on ``PYTHONPATH`` (the venv's ``site-packages`` and the
checkout are world-readable here); where neither works the case is skipped
with the reason.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["HostUser", "throwaway_user"]

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class HostUser:
    name: str
    home: Path
    uid: int
    gid: int
    #: How that user runs Python with Turnvisor importable.
    python: str
    #: What every login of that user needs in its environment (``SetEnv``).
    env: dict[str, str]

    def own(self, path: Path, mode: int) -> None:
        os.chown(path, self.uid, self.gid)
        os.chmod(path, mode)


def _python_for_others() -> str | None:
    """An interpreter of this one's version that any user can run."""
    for candidate in (sys.executable, f"/usr/bin/python{sys.version_info[0]}."
                                      f"{sys.version_info[1]}"):
        # Both the path run and the file it resolves to must be reachable.
        if os.path.exists(candidate) and _others_reach(Path(candidate)) \
                and _others_reach(Path(candidate).resolve()):
            return candidate
    return None


def _others_reach(path: Path) -> bool:
    """Whether a user of no group of ours can reach ``path`` (every directory
    above it searchable by others)."""
    return all(os.stat(p).st_mode & 0o001 for p in path.parents)


@contextmanager
def throwaway_user() -> Iterator[HostUser]:
    if os.geteuid() != 0:
        pytest.skip("a throwaway login user needs root (useradd); these tests run as "
                    f"uid {os.geteuid()}")
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("useradd/userdel are not installed (Debian's passwd package)")
    python = _python_for_others()
    if python is None:
        pytest.skip(f"no Python {sys.version_info[0]}.{sys.version_info[1]} that another "
                    f"user can run ({sys.executable} is under a directory others cannot "
                    "enter, and the system has none of that version)")
    site = sysconfig.get_paths()["purelib"]
    env = {"PYTHONPATH": f"{REPO_ROOT}:{site}"}
    name = f"tv{secrets.token_hex(5)}"
    # ``-p '*'``: no password, yet not locked (sshd refuses a locked account
    # even a key login without PAM).
    subprocess.run(["useradd", "--create-home", "--home-dir", f"/home/{name}",
                    "--shell", "/bin/sh", "--password", "*", name], check=True, timeout=30,
                   capture_output=True)
    try:
        entry = pwd.getpwnam(name)
        user = HostUser(name=name, home=Path(entry.pw_dir), uid=entry.pw_uid,
                        gid=entry.pw_gid, python=python, env=env)
        check = subprocess.run(["runuser", "-u", name, "--", python, "-c", "import web, trio"],
                               env={**os.environ, **env}, capture_output=True, timeout=60,
                               cwd=user.home)
        if check.returncode != 0:
            pytest.skip(f"user {name} cannot import Turnvisor with {python} and "
                        f"PYTHONPATH={env['PYTHONPATH']}: "
                        f"{check.stderr.decode(errors='replace').strip()[-300:]}")
        yield user
    finally:
        # -f: a process of that user still there does not keep the account.
        subprocess.run(["userdel", "--force", "--remove", name], timeout=30,
                       capture_output=True)
