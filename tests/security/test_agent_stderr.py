"""An agent's stderr carries terminal escape sequences (issue 27, item 6).

The attack: the agent writes sequences that clear the operator's screen,
retitle the terminal, move the cursor back over the line and write a fake log
line, hide text, ring the bell — to stderr, which goes to the log and into
the start error a page shows.  None of it may arrive: what arrives is the
printable text, tabs kept.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import pytest
import trio

from protocols.process import clean_stderr_line
from supervisor.config import Config
from supervisor.errors import AgentStartError
from supervisor.root import open_supervisor

#: What the hostile agent writes, one line: every kind of control it could use.
HOSTILE = (b"\x1b[2J\x1b[H\x1b]0;pwned\x07boom:\tconfig\rINFO fake line\x1b[8mhidden"
           b"\x1b[0m\x07\x08\x00\x7f\xc2\x9b31m\xc2\x85end\x1b]8;;http://evil\x1b\\link\n")
CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def _agent(code: str) -> dict[str, object]:
    return {"protocol": "acp", "command": [sys.executable, "-c", code]}


def test_every_control_but_tab_is_removed() -> None:
    clean = clean_stderr_line(HOSTILE.rstrip(b"\n"))
    assert not CONTROL.search(clean), repr(clean)
    assert "\t" in clean
    # The text around the sequences is kept; the sequences' own bytes are not.
    assert clean.startswith("boom:\tconfigINFO fake linehidden")
    assert "pwned" not in clean and "evil" not in clean and clean.endswith("link")


@pytest.mark.parametrize("how", ["exits", "hangs"])
async def test_escape_sequences_reach_neither_the_log_nor_the_start_error(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str) -> None:
    write = f"import sys, time; sys.stderr.buffer.write({HOSTILE!r}); sys.stderr.flush(); "
    code = write + ("sys.exit(3)" if how == "exits" else "time.sleep(60)")
    config = Config.from_mapping(tmp_path / "data", {
        "agents": {"hostile": _agent(code)}, "timeouts": {"agent_start_s": 1.0}})
    caplog.set_level(logging.DEBUG, logger="supervisor")
    with trio.fail_after(30):
        async with open_supervisor(config) as sup:
            caller = await sup.caller()
            task = await sup.orchestrator.create_task(caller, "t")
            with pytest.raises(AgentStartError) as failed:
                await sup.orchestrator.launch_session(caller, task.id, "hostile")
            error = str(failed.value)
            assert "boom:" in error and "fake line" in error, error
            assert not CONTROL.search(error), repr(error)
            sessions = await sup.orchestrator.list_sessions(caller, task.id)
            shown = [m.content for m in
                     await sup.orchestrator.list_messages(caller, sessions[0]["id"])]
            assert any("boom:" in text for text in shown), shown
            assert not any(CONTROL.search(text) for text in shown), shown
    logged = [r.getMessage() for r in caplog.records if "boom:" in r.getMessage()]
    assert logged, "the agent's stderr line was not logged"
    assert not any(CONTROL.search(line) for line in logged), logged
