"""Logins through Turnvisor's adapter (DESIGN.md §19), with the pinned CLIs and the fake
provider.  Codex: its app-server schema still has the account calls we send and read; a Codex
whose provider needs OpenAI credentials and whose ``CODEX_HOME`` holds none says it is logged
out (``account/read``), so its session is ``AuthRequired`` before a turn could fail; an API key
given with ``account/login/start`` is kept in its home, and its next turn reaches the provider
with that key.  Gemini: its ``gemini-api-key`` method takes the key as ``authenticate``'s
``_meta["api-key"]``, and its next turn reaches the provider with it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from protocols.acp_auth import AuthRequired
from protocols.adapters import AcpAdapter, make_adapter
from protocols.events import TurnEnded
from protocols.process import start_agent_process, terminate_group
from tests.fake_provider import FakeProvider

from .cli import AGENTS_DIR, find_cli
from .homes import launch

pytestmark = pytest.mark.agents

CODEX = find_cli("codex")
KEY = "sk-turnvisor-login-test-1f2e3d"
GEMINI_KEY = "gk-turnvisor-login-test-9a8b7c"


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if CODEX is None:
        pytest.skip(f"codex CLI is not installed in {AGENTS_DIR} (run scripts/install_agents.sh)")
    out = tmp_path_factory.mktemp("codex-schema")
    subprocess.run([CODEX, "app-server", "generate-json-schema", "--out", str(out)],
                   capture_output=True, timeout=120, check=True)
    files = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    v2 = json.loads((out / "codex_app_server_protocol.v2.schemas.json").read_text())
    return {"files": files, "defs": v2["definitions"]}


def _methods(union: dict[str, Any]) -> set[str]:
    return {m for variant in union.get("oneOf", [])
            for m in variant.get("properties", {}).get("method", {}).get("enum", [])}


def test_the_account_calls_are_in_the_schema(schema: dict[str, Any]) -> None:
    assert {"account/read", "account/login/start"} <= _methods(schema["files"]["ClientRequest"])
    assert "account/login/completed" in _methods(schema["files"]["ServerNotification"])
    defs = schema["defs"]
    assert {"account", "requiresOpenaiAuth"} <= set(defs["GetAccountResponse"]["properties"])
    assert "refreshToken" in defs["GetAccountParams"]["properties"]
    login = json.dumps(defs["LoginAccountParams"])
    for word in ('"apiKey"', '"chatgpt"'):
        assert word in login
    assert "authUrl" in json.dumps(defs["LoginAccountResponse"])


async def test_login_with_an_api_key_reaches_the_provider(tmp_path: Path) -> None:
    with FakeProvider(n_tokens=3, token_interval_s=0.01) as provider:
        spec = launch("codex", provider.url, tmp_path)
        if spec is None:
            pytest.skip(f"codex CLI is not installed in {AGENTS_DIR}")
        # The provider takes OpenAI credentials (the ones Codex logs in with), none yet.
        config = Path(spec.env["CODEX_HOME"]) / "config.toml"
        config.write_text(config.read_text().replace('env_key = "FAKE_PROVIDER_KEY"',
                                                      "requires_openai_auth = true"))
        env = {k: v for k, v in spec.env.items()
               if k not in ("FAKE_PROVIDER_KEY", "OPENAI_API_KEY", "CODEX_API_KEY")}
        proc = await start_agent_process(spec.command, env=env, cwd=spec.cwd)
        try:
            assert proc.stdin is not None and proc.stdout is not None
            adapter = make_adapter("codex", proc.stdin, proc.stdout,
                                   thread_params=spec.thread_params)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(adapter.connection.run)
                with trio.fail_after(60):
                    await adapter.initialize()
                    with pytest.raises(AuthRequired) as asked:
                        await adapter.new_session(spec.cwd)
                    assert [m.id for m in asked.value.methods] == ["apiKey", "chatgpt"]
                    await adapter.login("apiKey", KEY)
                    await adapter.new_session(spec.cwd)
                    ended = await adapter.prompt("hello")
                    assert isinstance(ended, TurnEnded) and ended.stop_reason == "end_turn", ended
                nursery.cancel_scope.cancel()
        finally:
            await terminate_group(proc, grace_s=2.0)
        # Codex kept the key in its own home; the model request carried it.
        assert KEY in (Path(spec.env["CODEX_HOME"]) / "auth.json").read_text()
        assert f"Bearer {KEY}" in provider.credentials, provider.credentials


async def test_gemini_takes_its_key_as_authenticate_meta(tmp_path: Path) -> None:
    with FakeProvider(n_tokens=3, token_interval_s=0.01) as provider:
        spec = launch("gemini", provider.url, tmp_path)
        if spec is None:
            pytest.skip(f"gemini CLI is not installed in {AGENTS_DIR}")
        # No key in its environment nor a sign-in chosen in its settings.
        settings = Path(spec.env["HOME"]) / ".gemini" / "settings.json"
        settings.write_text(json.dumps({**json.loads(settings.read_text()), "security": {}}))
        env = {k: v for k, v in spec.env.items() if k != "GEMINI_API_KEY"}
        proc = await start_agent_process(spec.command, env=env, cwd=spec.cwd)
        try:
            assert proc.stdin is not None and proc.stdout is not None
            adapter = make_adapter("acp", proc.stdin, proc.stdout)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(adapter.connection.run)
                with trio.fail_after(60):
                    await adapter.initialize()
                    assert isinstance(adapter, AcpAdapter)
                    methods = {m.id: m for m in adapter.core.auth_methods}
                    assert methods["gemini-api-key"].kind == "key"
                    assert methods["gemini-api-key"].key_in_meta
                    await adapter.login("gemini-api-key", GEMINI_KEY)
                    await adapter.new_session(spec.cwd)
                    ended = await adapter.prompt("hello")
                    assert ended.stop_reason == "end_turn", ended
                nursery.cancel_scope.cancel()
        finally:
            await terminate_group(proc, grace_s=2.0)
        assert provider.credentials and provider.credentials[-1] == GEMINI_KEY, \
            provider.credentials
