"""Agent login, sans-IO and through the adapters (DESIGN.md §19).

The tables pin how each ``authMethods`` shape is read (gemini-cli 0.61's own
answer, the ACP auth RFD's ``env_var`` and ``terminal``) and what
``authenticate`` and Codex's ``account/*`` calls write; then the mock agent,
as a real subprocess in every dialect, refuses a session until it is logged in.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from protocols import codex_account
from protocols.acp_auth import AUTH_REQUIRED, AuthMethod, AuthRequired, read_auth_methods
from protocols.adapters import AcpAdapter, CodexAdapter, ProtocolName
from protocols.jsonrpc import Dialect, ErrorResponse, IncomingRequest, RpcConnection
from protocols.mock.login import KEY_VARIABLE, MARKER
from protocols.mock_agent import ACP_VERSION_ENV, STATE_DIR_ENV
from protocols.process import start_agent_process, terminate_group
from protocols.transport import AgentRequestError

from .acp_states import fresh, fresh_v2
from .conftest import SETUP_S, TEST_TIMEOUTS
from .helpers import MOCK_AGENT, REPO_ROOT, TRANSCRIPTS, RecordingSendStream, parse_lines

GEMINI = TRANSCRIPTS / "gemini_cli_0.61.0.jsonl"

METHOD_TABLE: list[tuple[str, Any, AuthMethod | None]] = [
    ("no type: the agent does it", {"id": "oauth", "name": "Google", "description": "d"},
     AuthMethod(id="oauth", name="Google", description="d")),
    ("type agent", {"id": "a", "name": "A", "type": "agent"}, AuthMethod(id="a", name="A")),
    ("env_var: a key into the variable",
     {"id": "k", "name": "Key", "type": "env_var", "varName": "X_KEY", "link": "https://k"},
     AuthMethod(id="k", name="Key", kind="key", var_name="X_KEY", link="https://k")),
    ("env_var without its variable: left out", {"id": "k", "type": "env_var"}, None),
    ("terminal: args and env",
     {"id": "t", "name": "T", "type": "terminal", "args": ["--login"], "env": {"A": "1"}},
     AuthMethod(id="t", name="T", kind="terminal", args=("--login",), env=(("A", "1"),))),
    ("terminal with args of the wrong shape: none",
     {"id": "t", "name": "T", "type": "terminal", "args": [1]},
     AuthMethod(id="t", name="T", kind="terminal")),
    ("gemini's _meta api-key: a key in authenticate",
     {"id": "g", "name": "G", "_meta": {"api-key": {"provider": "google"}}},
     AuthMethod(id="g", name="G", kind="key", key_in_meta=True)),
    ("a later type: the agent does it", {"id": "n", "type": "future"},
     AuthMethod(id="n", name="n")),
    ("no id: left out", {"name": "x"}, None),
    ("not an object: left out", "oauth", None),
]


@pytest.mark.parametrize(("case", "raw", "expected"), METHOD_TABLE,
                         ids=[row[0] for row in METHOD_TABLE])
def test_auth_method_shapes(case: str, raw: Any, expected: AuthMethod | None) -> None:
    got = read_auth_methods({"authMethods": [raw]})
    assert got == ((expected,) if expected is not None else ())


def test_gemini_methods_read_from_its_transcript() -> None:
    answer = next(m for line in GEMINI.read_text().splitlines()
                  if "authMethods" in line
                  for m in [json.loads(line)] if isinstance(m, dict))
    result = answer["msg"]["result"]
    methods = read_auth_methods(result)
    assert [(m.id, m.kind) for m in methods] == [
        ("oauth-personal", "agent"), ("gemini-api-key", "key"), ("vertex-ai", "agent"),
        ("gateway", "agent")]
    assert methods[1].key_in_meta


def test_duplicate_ids_and_non_lists() -> None:
    assert read_auth_methods({"authMethods": [{"id": "a"}, {"id": "a", "name": "B"}]}) == (
        AuthMethod(id="a", name="a"),)
    assert read_auth_methods({"authMethods": {"id": "a"}}) == ()
    assert read_auth_methods(None) == ()


@pytest.mark.parametrize("v2", [False, True])
def test_authenticate_and_auth_required_on_the_wire(v2: bool) -> None:
    p = fresh_v2() if v2 else fresh()
    [req] = p.to_agent(p.client.initialize()[1])
    assert isinstance(req, IncomingRequest)
    result: dict[str, Any] = {"protocolVersion": 2 if v2 else 1, "authMethods": [
        {"id": "k", "name": "Key", "type": "env_var", "varName": "K"},
        {"id": "g", "name": "G", "_meta": {"api-key": {}}}]}
    p.to_client(p.agent.send_response(req.id, result))
    assert [m.id for m in p.client.auth_methods] == ["k", "g"]
    # The session is refused auth_required: an error the caller reads, no session.
    _rid, data = p.client.new_session("/w")
    [req] = p.to_agent(data)
    assert isinstance(req, IncomingRequest)
    events = p.to_client(p.agent.send_error(req.id, AUTH_REQUIRED, "Authentication required"))
    assert [type(e) for e in events] == [ErrorResponse]
    assert isinstance(events[0], ErrorResponse) and events[0].code == AUTH_REQUIRED
    assert p.client.session_id is None
    # An env_var key is never in authenticate; gemini's goes in _meta.
    [req] = p.to_agent(p.client.authenticate("k", "secret")[1])
    assert isinstance(req, IncomingRequest) and req.params == {"methodId": "k"}
    [req] = p.to_agent(p.client.authenticate("g", "secret")[1])
    assert isinstance(req, IncomingRequest)
    assert req.params == {"methodId": "g", "_meta": {"api-key": "secret"}}
    with pytest.raises(ValueError, match="no login method 'x'"):
        p.client.authenticate("x")
    assert p.client.data_to_send() == b""


ACCOUNT_TABLE: list[tuple[Any, bool]] = [
    ({"account": None, "requiresOpenaiAuth": True}, True),
    ({"account": None, "requiresOpenaiAuth": False}, False),  # a local provider
    ({"account": {"type": "apiKey"}, "requiresOpenaiAuth": True}, False),
    ({"account": {"type": "chatgpt", "email": "a@b"}, "requiresOpenaiAuth": True}, False),
    ({}, False),
    (None, False),
]


@pytest.mark.parametrize(("result", "logged_out"), ACCOUNT_TABLE)
def test_codex_account_read(result: Any, logged_out: bool) -> None:
    assert codex_account.needs_login(result) is logged_out


def test_codex_login_start_params() -> None:
    rpc = RpcConnection(Dialect.CODEX)
    agent = RpcConnection(Dialect.CODEX)
    agent.receive_data(codex_account.login_start(rpc, "apiKey", "sk-1")[1])
    req = agent.next_event()
    assert isinstance(req, IncomingRequest) and req.method == "account/login/start"
    assert req.params == {"type": "apiKey", "apiKey": "sk-1"}
    agent.receive_data(codex_account.login_start(rpc, "chatgpt", None)[1])
    req = agent.next_event()
    assert isinstance(req, IncomingRequest) and req.params == {"type": "chatgpt"}
    with pytest.raises(ValueError, match="needs a key"):
        codex_account.login_start(rpc, "apiKey", "")
    with pytest.raises(ValueError, match="no login method"):
        codex_account.login_start(rpc, "oauth", None)
    assert codex_account.login_url({"type": "chatgpt", "authUrl": "https://x"}) == "https://x"
    assert codex_account.login_url({"type": "apiKey"}) is None


# -- the mock-login agent, a real subprocess --------------------------------------------

Opened = str | AuthRequired | AgentRequestError
DIALECTS: dict[str, tuple[ProtocolName, str]] = {
    "acp": ("acp", "1"), "acp2": ("acp", "2"), "codex": ("codex", "1")}


async def _open(dialect: str, home: Path, tmp: Path, key: str | None = None,
                method: str | None = None) -> tuple[Opened, list[dict[str, Any]]]:
    """One mock-login process: initialize, (log in with ``method``,) open a
    session; the session id, or why not, and what was written to it."""
    protocol, version = DIALECTS[dialect]
    env = {**os.environ, STATE_DIR_ENV: str(tmp / "state"), ACP_VERSION_ENV: version,
           "HOME": str(home)}
    if key is not None and protocol == "acp":
        env[KEY_VARIABLE] = key
    proc = await start_agent_process([*MOCK_AGENT, "--protocol", protocol, "--login"],
                                     cwd=str(REPO_ROOT), env=env)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        written = RecordingSendStream(proc.stdin)
        cls = AcpAdapter if protocol == "acp" else CodexAdapter
        adapter = cls(written, proc.stdout, timeouts=TEST_TIMEOUTS)
        async with trio.open_nursery() as nursery:
            await nursery.start(adapter.connection.run)
            with trio.fail_after(SETUP_S):
                await adapter.initialize()
                opened: Opened
                try:
                    if method is not None:
                        await adapter.login(method, key)
                    opened = await adapter.new_session(str(tmp))
                except (AuthRequired, AgentRequestError) as exc:
                    opened = exc
            nursery.cancel_scope.cancel()
        return opened, parse_lines(bytes(written.data))
    finally:
        await terminate_group(proc, grace_s=1.0)


@pytest.mark.parametrize("dialect", list(DIALECTS))
async def test_mock_login_with_a_key(dialect: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    refused, _ = await _open(dialect, home, tmp_path)
    assert isinstance(refused, AuthRequired)
    key_method = "apiKey" if dialect == "codex" else "mock-key"
    assert next((m.id, m.kind) for m in refused.methods) == (key_method, "key")
    # A wrong key is refused by the agent, and it stays logged out.
    wrong, _ = await _open(dialect, home, tmp_path, key="wrong", method=key_method)
    assert isinstance(wrong, AgentRequestError) and "not valid" in str(wrong)
    opened, written = await _open(dialect, home, tmp_path, key="mk-right", method=key_method)
    assert isinstance(opened, str)
    said = json.loads((home / MARKER).read_text())
    assert said["method"] == key_method and "mk-right" not in json.dumps(said)
    if dialect == "codex":  # the key went as the login's parameter
        assert [m["params"] for m in written if m.get("method") == "account/login/start"] == [
            {"type": "apiKey", "apiKey": "mk-right"}]
    else:  # the key went in the agent's environment, never on the wire
        assert "mk-right" not in json.dumps(written)
    # Its home remembers: the next process opens a session at once.
    again, _ = await _open(dialect, home, tmp_path)
    assert isinstance(again, str)


@pytest.mark.parametrize("dialect", ["acp", "acp2"])
async def test_mock_login_from_a_terminal(dialect: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    refused, _ = await _open(dialect, home, tmp_path)
    assert isinstance(refused, AuthRequired)
    terminal = next(m for m in refused.methods if m.kind == "terminal")
    early, _ = await _open(dialect, home, tmp_path, method=terminal.id)
    assert isinstance(early, AgentRequestError) and "--sign-in first" in str(early)
    # What the person runs: the agent's own command with the method's args.
    await trio.run_process([*MOCK_AGENT, "--protocol", "acp", *terminal.args],
                           cwd=str(REPO_ROOT), env={**os.environ, "HOME": str(home)},
                           capture_stdout=True)
    opened, _ = await _open(dialect, home, tmp_path, method=terminal.id)
    assert isinstance(opened, str)
