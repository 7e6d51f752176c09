"""Which executors a backend imports, and when (supervisor/executors/__init__.py).

A remote executor's module (httpx, lightkube behind it) takes a few tenths of
a second to import, in one synchronous step of the event loop.  A backend
whose profiles name one imports it at its start (``default_launcher``), never
at a session's first launch, where every other session's cancel would wait
for it; a backend on the local executor alone imports none.  Each case runs in
a fresh interpreter, whose ``sys.modules`` says what was imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import json, sys
from pathlib import Path
from supervisor.config import Config
from supervisor.executors import default_launcher
agents = json.loads(sys.argv[2])
default_launcher(Config.from_mapping(Path(sys.argv[1]), {"agents": agents}))
print(json.dumps(sorted(m for m in sys.modules if m.startswith("supervisor.executors."))))
"""

REMOTE = {"supervisor.executors.agentctl", "supervisor.executors.container",
          "supervisor.executors.kube", "supervisor.executors.ssh"}


def _imported_at_start(tmp_path: Path, agents: dict[str, dict[str, object]]) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path), json.dumps(agents)],
                          capture_output=True, text=True, timeout=120, check=False,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1])) & REMOTE


def _profile(executor: str, **extra: object) -> dict[str, object]:
    return {"protocol": "acp", "executor": executor,
            "command": [sys.executable, "-m", "protocols.mock_agent"], **extra}


@pytest.mark.parametrize(("executor", "extra", "module"), [
    ("agentctl", {}, "supervisor.executors.agentctl"),
    ("agentctl", {"agentctl_url": "http://127.0.0.1:9", "agentctl_token": "t"},
     "supervisor.executors.agentctl"),
])
def test_a_remote_executor_a_profile_names_is_imported_at_start(
        tmp_path: Path, executor: str, extra: dict[str, object], module: str) -> None:
    imported = _imported_at_start(tmp_path, {"mock": _profile("local"),
                                             "remote": _profile(executor, **extra)})
    assert module in imported, imported


def test_a_backend_on_the_local_executor_imports_no_remote_one(tmp_path: Path) -> None:
    assert _imported_at_start(tmp_path, {"mock": _profile("local")}) == set()
